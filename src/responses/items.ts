/**
 * The item side of the Responses bridge, in one import: the item types, `normalizeInput` (request `input` → typed
 * items with ids) and the two mappings between items and Chat Completions messages. Each lives in its own module
 * (item-types.ts, input-items.ts, item-messages.ts); this file only gathers them.
 */
export type {
  CustomToolCallItem,
  CustomToolCallOutputItem,
  FileSearchCallItem,
  FunctionCallItem,
  FunctionCallOutputItem,
  ItemPart,
  ItemReference,
  ItemStatus,
  MessageItem,
  NewId,
  ReasoningItem,
  ResponseItem,
} from './item-types.js'
export { ITEM_ID_PREFIX, normalizeInput } from './input-items.js'
export { customInput, itemsToMessages, messagesToItems, type MessagesToItemsOptions } from './item-messages.js'
