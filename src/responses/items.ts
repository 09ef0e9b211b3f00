/**
 * The item side of the Responses bridge, in one import: the item type, `normalizeInput` (request `input` → typed
 * items with ids) and the two mappings between items and Chat Completions messages. Each lives in its own module
 * (item-types.ts, input-items.ts, item-messages.ts); this file only gathers what the rest of the gateway uses.
 */
export type { ResponseItem } from './item-types.js'
export { normalizeInput } from './input-items.js'
export { itemsToMessages, messagesToItems } from './item-messages.js'
