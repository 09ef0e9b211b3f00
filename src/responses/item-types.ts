/**
 * The Responses API's items (reference §2, §3): what `input` carries, what `output` returns and what a conversation
 * lists. One loose type for all of them (`ResponseItem`: the wire keeps growing item types, and stored items outlive
 * the code that wrote them) and narrow interfaces for the kinds the bridge builds or reads.
 */

/** Any item: a `type` and, once normalized, an `id`; every other field as the kind defines it. */
export interface ResponseItem {
  readonly type: string
  readonly id?: string
  readonly [field: string]: unknown
}

export type ItemStatus = 'in_progress' | 'completed' | 'incomplete'

/** One part of a message's `content`: `input_text`, `output_text`, `refusal`, `input_image`, `input_file`, `input_audio`. */
export interface ItemPart {
  readonly type: string
  readonly [field: string]: unknown
}

interface MessageItem extends ResponseItem {
  readonly type: 'message'
  readonly id: string
  readonly role: 'user' | 'system' | 'developer' | 'assistant'
  readonly content: readonly ItemPart[]
  readonly status?: ItemStatus
}

interface FunctionCallItem extends ResponseItem {
  readonly type: 'function_call'
  readonly id: string
  readonly call_id: string
  readonly name: string
  /** JSON text, as the model wrote it (not necessarily valid JSON). */
  readonly arguments: string
  readonly status?: ItemStatus
}

interface FunctionCallOutputItem extends ResponseItem {
  readonly type: 'function_call_output'
  readonly id: string
  readonly call_id: string
  readonly output: string | readonly ItemPart[]
  readonly status?: ItemStatus
}

/** Codex's freeform tools (`apply_patch`): the model writes `input` as raw text instead of JSON arguments. */
interface CustomToolCallItem extends ResponseItem {
  readonly type: 'custom_tool_call'
  readonly id: string
  readonly call_id: string
  readonly name: string
  readonly input: string
}

interface CustomToolCallOutputItem extends ResponseItem {
  readonly type: 'custom_tool_call_output'
  readonly id: string
  readonly call_id: string
  readonly output: string | readonly ItemPart[]
}

interface ReasoningItem extends ResponseItem {
  readonly type: 'reasoning'
  readonly id: string
  readonly summary: readonly { readonly type: 'summary_text'; readonly text: string }[]
  readonly content?: readonly { readonly type: 'reasoning_text'; readonly text: string }[]
  readonly encrypted_content?: string | null
}

/** A stored item named by id; the caller replaces it with the item before mapping to messages. */
interface ItemReference extends ResponseItem {
  readonly type: 'item_reference'
  readonly id: string
}

/** The gateway's retrieval made visible (`file_search` tool): results only when `include` asks for them. */
interface FileSearchCallItem extends ResponseItem {
  readonly type: 'file_search_call'
  readonly id: string
  readonly status: 'in_progress' | 'searching' | 'completed' | 'incomplete' | 'failed'
  readonly queries: readonly string[]
  readonly results: readonly Record<string, unknown>[] | null
}

/** Mints an id with the given prefix (`msg` → `msg_…`). Injected so tests get predictable ids. */
export type NewId = (prefix: string) => string
