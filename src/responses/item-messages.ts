/**
 * Responses items ⇄ Chat Completions messages (reference §8), both ways, as pure functions.
 *
 * Items → messages (what the upstream is sent):
 * - A message's parts become Chat parts; a message whose content is exactly one text part becomes a plain string.
 *   Strings are what every provider accepts in every role (some reject part arrays in system messages), and what the
 *   packer and memory handle cheapest; several parts stay parts, so no separator is invented between them.
 * - `developer` becomes `system`: many providers behind OpenRouter reject the `developer` role.
 * - An assistant message's `output_text` parts join into one string; `refusal` parts go to the `refusal` field.
 * - Consecutive function (and custom) tool calls, with the assistant message just before them, become ONE assistant
 *   message with `tool_calls`: Anthropic (also through OpenRouter) rejects tool calls split over several turns.
 * - Reasoning and file_search_call items are dropped: the chat wire has no place for the first (OpenRouter's
 *   `reasoning_details` ride on stored chat messages instead) and the second is the gateway's own retrieval.
 *
 * Messages → items (a chat session listed as conversation items) is the inverse, so that a conversation and the
 * session it is can be read either way; test/responses-items.test.ts checks the round trip.
 */
import { isObject } from '../types.js'
import { isArray, type ChatMessage, type ContentPart, type ToolCall } from '../types.js'
import type { ItemPart, NewId, ResponseItem } from './item-types.js'
import { ITEM_ID_PREFIX } from './input-items.js'
import { quotedFile } from '../messages/quoted-file.js'

type Mutable = Record<string, unknown> & { tool_calls?: ToolCall[] }

export function itemsToMessages(items: readonly ResponseItem[]): ChatMessage[] {
  const out: Mutable[] = []
  // The assistant message that tool calls seen next join, while nothing but calls and reasoning has come since.
  let host: Mutable | undefined
  for (const item of items) {
    switch (item.type) {
      case 'message': {
        const m = messageFromItem(item)
        out.push(m)
        host = m.role === 'assistant' ? m : undefined
        break
      }
      case 'function_call':
      case 'custom_tool_call': {
        const call = toolCallFromItem(item)
        if (host === undefined) {
          host = { role: 'assistant', content: null }
          out.push(host)
        }
        ;(host.tool_calls ??= []).push(call)
        break
      }
      case 'function_call_output':
      case 'custom_tool_call_output':
        out.push({ role: 'tool', tool_call_id: str(item.call_id), content: toolOutputText(item.output) })
        host = undefined
        break
      case 'item_reference':
        throw new Error(`itemsToMessages: item_reference ${item.id ?? ''} must be resolved by the caller first`)
      default:
        // reasoning, file_search_call, and any kind a newer gateway stored: nothing the chat wire can carry. They do
        // not end a run of tool calls (OpenAI puts a reasoning item before each call it reasons about).
        break
    }
  }
  return out as unknown as ChatMessage[]
}

function messageFromItem(item: ResponseItem): Mutable {
  const parts = Array.isArray(item.content) ? (item.content as unknown[]).filter(isObject) : []
  if (item.role === 'assistant') {
    let text = ''
    let refusal = ''
    for (const p of parts) {
      if ((p.type === 'output_text' || p.type === 'input_text') && typeof p.text === 'string') text += p.text
      else if (p.type === 'refusal' && typeof p.refusal === 'string') refusal += p.refusal
    }
    const m: Mutable = { role: 'assistant', content: text === '' && refusal !== '' ? null : text }
    if (refusal !== '') m.refusal = refusal
    return m
  }
  const role = item.role === 'developer' ? 'system' : str(item.role)
  const chat = parts.map(chatPart)
  const only = chat.length === 1 ? chat[0] : undefined
  const content = only?.type === 'text' && typeof only.text === 'string' ? only.text : chat
  return { role, content }
}

/** `input_*` part → Chat part. Image detail `original` has no Chat equivalent; `high` is the nearest (no downscale). */
function chatPart(p: Record<string, unknown>): ContentPart {
  switch (p.type) {
    case 'input_text':
    case 'output_text':
      return { type: 'text', text: str(p.text) }
    case 'input_image': {
      const detail = p.detail === 'original' ? 'high' : p.detail
      const image: Record<string, unknown> = { url: typeof p.image_url === 'string' ? p.image_url : '' }
      if (typeof p.file_id === 'string' && typeof p.image_url !== 'string') image.file_id = p.file_id
      if (typeof detail === 'string') image.detail = detail
      return { type: 'image_url', image_url: image }
    }
    case 'input_file': {
      const file: Record<string, unknown> = {}
      if (typeof p.filename === 'string') file.filename = p.filename
      // Chat has no file_url: OpenRouter takes a file's URL in file_data and fetches it (its PDF inputs).
      const data = typeof p.file_data === 'string' ? p.file_data : p.file_url
      if (typeof data === 'string') file.file_data = data
      // Left only where nothing resolved it (a tool's output); a message's named file is its text by now (input-files.ts).
      if (typeof p.file_id === 'string') file.file_id = p.file_id
      return { type: 'file', file }
    }
    case 'input_audio':
      return { type: 'input_audio', input_audio: p.input_audio }
    case 'refusal':
      return { type: 'text', text: str(p.refusal) }
    default:
      return { ...p, type: str(p.type) }
  }
}

/** A custom tool's input travels as the one string argument `input` of a function (request.ts declares it so). */
function toolCallFromItem(item: ResponseItem): ToolCall {
  const args = item.type === 'custom_tool_call' ? JSON.stringify({ input: str(item.input) }) : str(item.arguments)
  return { id: str(item.call_id), type: 'function', function: { name: str(item.name), arguments: args } }
}

/** Chat tool messages carry text: text parts join with a newline, anything else (an image) as its JSON. */
function toolOutputText(output: unknown): string {
  if (typeof output === 'string') return output
  if (!Array.isArray(output)) return ''
  const pieces: string[] = []
  for (const p of output) {
    if (isObject(p) && (p.type === 'input_text' || p.type === 'output_text') && typeof p.text === 'string') pieces.push(p.text)
    else pieces.push(JSON.stringify(p))
  }
  return pieces.join('\n')
}

export interface MessagesToItemsOptions {
  newId: NewId
  /** Set on every item (conversation listings show it). */
  status?: 'completed'
  /** Function names that are custom tools: their calls list as `custom_tool_call` with the `input` unwrapped. */
  customTools?: ReadonlySet<string>
}

export function messagesToItems(messages: readonly ChatMessage[], opts: MessagesToItemsOptions): ResponseItem[] {
  const out: ResponseItem[] = []
  const push = (item: Record<string, unknown>): void => {
    if (opts.status !== undefined) item.status = opts.status
    out.push(item as ResponseItem)
  }
  for (const m of messages) {
    switch (m.role) {
      case 'user':
      case 'system':
      case 'developer':
        push({ type: 'message', id: opts.newId(ITEM_ID_PREFIX.message), role: m.role, content: inputParts(m.content) })
        break
      case 'assistant': {
        const calls = isArray(m.tool_calls) ? m.tool_calls : []
        const content = outputParts(m)
        // As in a Response's output: no empty message in front of tool calls.
        if (content.length > 0 || calls.length === 0) {
          push({ type: 'message', id: opts.newId(ITEM_ID_PREFIX.message), role: 'assistant', content })
        }
        for (const c of calls) {
          const item = itemFromToolCall(c, opts)
          if (item !== undefined) push(item)
        }
        break
      }
      case 'tool':
        push({
          type: 'function_call_output',
          id: opts.newId(ITEM_ID_PREFIX.function_call_output),
          call_id: m.tool_call_id ?? '',
          output: typeof m.content === 'string' ? m.content : textOf(m.content),
        })
        break
      default:
        // `function` (deprecated before tool calls existed) has no call id to pair an item with.
        break
    }
  }
  return out
}

/**
 * A text the gateway made from an `input_file` naming a file by id (chat/file-inputs.ts) is listed as that part again,
 * as OpenAI lists it, not as the file's text: what the message holds is the text, what the client sent was the file.
 */
function textPart(text: string): ItemPart {
  const quoted = quotedFile(text)
  return quoted === undefined ? { type: 'input_text', text } : { type: 'input_file', file_id: quoted.id, filename: quoted.filename }
}

function inputParts(content: ChatMessage['content']): ItemPart[] {
  if (typeof content === 'string') return [textPart(content)]
  if (!Array.isArray(content)) return []
  const out: ItemPart[] = []
  for (const p of content as readonly ContentPart[]) {
    switch (p.type) {
      case 'text':
        out.push(textPart(str(p.text)))
        break
      case 'image_url': {
        const img = isObject(p.image_url) ? p.image_url : {}
        const part: Record<string, unknown> = { type: 'input_image', detail: typeof img.detail === 'string' ? img.detail : 'auto' }
        if (typeof img.url === 'string' && img.url !== '') part.image_url = img.url
        if (typeof img.file_id === 'string') part.file_id = img.file_id
        out.push(part as ItemPart)
        break
      }
      case 'file':
        out.push({ type: 'input_file', ...(isObject(p.file) ? p.file : {}) })
        break
      case 'input_audio':
        out.push({ type: 'input_audio', input_audio: p.input_audio })
        break
      default:
        // A part the Responses wire has no name for (a provider's own): not listable.
        break
    }
  }
  return out
}

function outputParts(m: ChatMessage): ItemPart[] {
  const out: ItemPart[] = []
  const text = typeof m.content === 'string' ? m.content : textOf(m.content)
  if (text !== '' || (m.refusal == null && (m.tool_calls ?? []).length === 0)) out.push({ type: 'output_text', text, annotations: [] })
  if (typeof m.refusal === 'string' && m.refusal !== '') out.push({ type: 'refusal', refusal: m.refusal })
  return out
}

function itemFromToolCall(c: ToolCall, opts: MessagesToItemsOptions): Record<string, unknown> | undefined {
  if (c.function === undefined) return undefined
  const { name, arguments: args } = c.function
  if (opts.customTools?.has(name) === true) {
    // As output.ts's toolCallItem: raw text instead of the {"input"} wrapper is the input itself.
    return { type: 'custom_tool_call', id: opts.newId(ITEM_ID_PREFIX.custom_tool_call), call_id: c.id, name, input: customInput(args) ?? args }
  }
  return { type: 'function_call', id: opts.newId(ITEM_ID_PREFIX.function_call), call_id: c.id, name, arguments: args }
}

/** `{"input": "<text>"}` → the text; anything else (a model that ignored the schema) → undefined. */
export function customInput(args: string): string | undefined {
  try {
    const v: unknown = JSON.parse(args)
    return isObject(v) && typeof v.input === 'string' ? v.input : undefined
  } catch {
    // Not JSON: the model wrote the input raw; the caller uses the text as it is.
    return undefined
  }
}

function textOf(content: ChatMessage['content']): string {
  if (!Array.isArray(content)) return ''
  let out = ''
  for (const p of content as readonly ContentPart[]) if (p.type === 'text' && typeof p.text === 'string') out += p.text
  return out
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : ''
}
