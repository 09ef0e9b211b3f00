/**
 * `input` of a Responses request, in every form clients send it (reference §2, pitfall 7), normalized to typed items
 * with ids: a plain string; easy messages (no `type`, string content, any role); typed messages; assistant output
 * messages sent back with their `id`/`status`/`phase`; function and custom tool calls and their outputs; reasoning
 * items (kept as they came, `encrypted_content` included: they are dropped later, when mapping to messages, never
 * refused); `item_reference`s, with or without `type`, left for the caller to resolve from its store.
 *
 * What the normalized item keeps: the fields its kind defines. Unknown extra keys are ignored, never refused (the SDKs
 * add fields every month); they are not stored either, so a listing returns the item in the documented shape.
 * Item kinds the gateway cannot act on (hosted tools' calls: web search, computer use, local shell, MCP, …) are a 400
 * naming `input[i].type`: silently dropping one would leave the model answering a conversation it cannot see.
 */
import { gatewayError, invalidParam } from '../errors.js'
import { isObject } from '../types.js'
import type { ItemPart, NewId, ResponseItem } from './item-types.js'

const ROLES: ReadonlySet<string> = new Set(['user', 'system', 'developer', 'assistant'])
const STATUSES: ReadonlySet<string> = new Set(['in_progress', 'completed', 'incomplete'])
const IMAGE_DETAILS: ReadonlySet<string> = new Set(['auto', 'low', 'high', 'original'])

/** Id prefixes for items the client sent without one. `msg`, `fc`, `rs` are OpenAI's; the rest follow their pattern. */
export const ITEM_ID_PREFIX = {
  message: 'msg',
  function_call: 'fc',
  function_call_output: 'fco',
  custom_tool_call: 'ctc',
  custom_tool_call_output: 'ctco',
  reasoning: 'rs',
  file_search_call: 'fs',
} as const

export function normalizeInput(input: unknown, opts: { newId: NewId }): ResponseItem[] {
  if (typeof input === 'string') {
    return [{ type: 'message', id: opts.newId('msg'), role: 'user', content: [{ type: 'input_text', text: input }] }]
  }
  if (!Array.isArray(input)) throw invalidParam('input', 'input must be a string or an array of input items')
  const out: ResponseItem[] = []
  for (let i = 0; i < input.length; i++) out.push(normalizeItem(input[i], `input[${i}]`, opts.newId))
  return out
}

function normalizeItem(raw: unknown, at: string, newId: NewId): ResponseItem {
  if (!isObject(raw)) throw invalidParam(at, `${at} must be an object (an input item)`)
  const type = raw.type
  if (type === undefined || type === null) {
    // The easy message has no `type`; neither has an item reference (`{id}`), whose `type` is optional.
    if (raw.role !== undefined) return message(raw, at, newId)
    if (typeof raw.id === 'string' && raw.id !== '') return { type: 'item_reference', id: raw.id }
    throw invalidParam(`${at}.type`, `${at} must have a type, a role (a message) or an id (an item reference)`)
  }
  if (typeof type !== 'string') throw invalidParam(`${at}.type`, `${at}.type must be a string`)
  switch (type) {
    case 'message':
      return message(raw, at, newId)
    case 'item_reference':
      return { type: 'item_reference', id: nonEmpty(raw, 'id', at) }
    case 'function_call':
      return withStatus(raw, at, {
        type,
        id: itemId(raw, at, newId, ITEM_ID_PREFIX.function_call),
        call_id: nonEmpty(raw, 'call_id', at),
        name: nonEmpty(raw, 'name', at),
        arguments: text(raw, 'arguments', at),
      })
    case 'function_call_output':
    case 'custom_tool_call_output':
      return withStatus(raw, at, {
        type,
        id: itemId(raw, at, newId, ITEM_ID_PREFIX[type]),
        call_id: nonEmpty(raw, 'call_id', at),
        output: toolOutput(raw.output, `${at}.output`),
      })
    case 'custom_tool_call':
      return {
        type,
        id: itemId(raw, at, newId, ITEM_ID_PREFIX.custom_tool_call),
        call_id: nonEmpty(raw, 'call_id', at),
        name: nonEmpty(raw, 'name', at),
        input: text(raw, 'input', at),
      }
    case 'reasoning':
    case 'file_search_call':
      // Kept whole: both are only ever dropped when mapped to messages, and a reasoning item's fields (summary,
      // encrypted_content) are the client's to get back unchanged from a listing.
      return { ...raw, type, id: itemId(raw, at, newId, ITEM_ID_PREFIX[type]) }
    default:
      throw invalidParam(
        `${at}.type`,
        `${at}.type ${JSON.stringify(type)} is not supported: this gateway accepts message, function_call, function_call_output, ` +
          'custom_tool_call, custom_tool_call_output, reasoning, file_search_call and item_reference items',
      )
  }
}

function message(raw: Record<string, unknown>, at: string, newId: NewId): ResponseItem {
  const role = raw.role
  if (typeof role !== 'string' || !ROLES.has(role)) {
    if (role === undefined) throw gatewayError('missing_parameter', { param: `${at}.role`, message: `${at}.role is required` })
    throw invalidParam(`${at}.role`, `${at}.role must be one of user, system, developer, assistant`)
  }
  const assistant = role === 'assistant'
  const content = raw.content
  let parts: ItemPart[]
  if (typeof content === 'string') {
    parts = [assistant ? { type: 'output_text', text: content, annotations: [] } : { type: 'input_text', text: content }]
  } else if (Array.isArray(content)) {
    parts = content.map((p, j) => part(p, `${at}.content[${j}]`, assistant))
  } else if (content === undefined || content === null) {
    throw gatewayError('missing_parameter', { param: `${at}.content`, message: `${at}.content is required` })
  } else {
    throw invalidParam(`${at}.content`, `${at}.content must be a string or an array of content parts`)
  }
  const item: Record<string, unknown> = { type: 'message', id: itemId(raw, at, newId, ITEM_ID_PREFIX.message), role, content: parts }
  // An output message sent back as input is a ResponseOutputMessage, whose status is required; newer models also
  // want its `phase` (commentary / final_answer) kept.
  const status = optionalStatus(raw, at)
  if (status !== undefined) item.status = status
  else if (assistant) item.status = 'completed'
  if (assistant && typeof raw.phase === 'string') item.phase = raw.phase
  return item as ResponseItem
}

/**
 * Text parts are accepted under either name in any role (`input_text` in an assistant message, `output_text` in a
 * user one): clients mix them up and the meaning is plain; they are renamed for the role. Media only in non-assistant
 * messages, as OpenAI has it.
 */
function part(p: unknown, at: string, assistant: boolean): ItemPart {
  if (!isObject(p)) throw invalidParam(at, `${at} must be an object with a string type`)
  const type = p.type
  if (typeof type !== 'string' || type === '') throw invalidParam(`${at}.type`, `${at}.type must be a non-empty string`)
  switch (type) {
    case 'input_text':
    case 'output_text': {
      const text = p.text
      if (typeof text !== 'string') throw invalidParam(`${at}.text`, `${at}.text must be a string`)
      if (!assistant) return { type: 'input_text', text }
      const out: Record<string, unknown> = { type: 'output_text', text, annotations: Array.isArray(p.annotations) ? p.annotations : [] }
      if (Array.isArray(p.logprobs)) out.logprobs = p.logprobs
      return out as ItemPart
    }
    case 'refusal':
      if (typeof p.refusal !== 'string') throw invalidParam(`${at}.refusal`, `${at}.refusal must be a string`)
      return { type, refusal: p.refusal }
    case 'input_image':
    case 'input_file':
    case 'input_audio':
      if (assistant) throw invalidParam(`${at}.type`, `${at}.type ${type} is not allowed in an assistant message`)
      return media(p, type, at)
    default:
      throw invalidParam(
        `${at}.type`,
        `${at}.type ${JSON.stringify(type)} is not supported: use input_text, input_image, input_file, input_audio (or output_text, refusal in assistant messages)`,
      )
  }
}

function media(p: Record<string, unknown>, type: string, at: string): ItemPart {
  if (type === 'input_image') {
    const url = p.image_url
    const fileId = p.file_id
    if (url !== undefined && url !== null && typeof url !== 'string')
      throw invalidParam(`${at}.image_url`, `${at}.image_url must be a string (an https or data: URL), not an object`)
    // Uploads here are documents (their text is kept, not their bytes) and the provider has no file store: an image
    // named only by id would reach it as an image with no URL.
    if (typeof url !== 'string' && typeof fileId === 'string')
      throw invalidParam(`${at}.file_id`, `${at}: an image by file_id is not supported by this gateway: send image_url (an https or data: URL)`)
    if (typeof url !== 'string') throw invalidParam(`${at}.image_url`, `${at} needs image_url (an https or data: URL string)`)
    const detail = p.detail ?? 'auto'
    if (typeof detail !== 'string' || !IMAGE_DETAILS.has(detail))
      throw invalidParam(`${at}.detail`, `${at}.detail must be one of auto, low, high, original`)
    const out: Record<string, unknown> = { type, detail }
    if (typeof url === 'string') out.image_url = url
    if (typeof fileId === 'string') out.file_id = fileId
    return out as ItemPart
  }
  if (type === 'input_file') {
    const out: Record<string, unknown> = { type }
    for (const k of ['file_id', 'file_data', 'file_url', 'filename'] as const) {
      const v = p[k]
      if (v === undefined || v === null) continue
      if (typeof v !== 'string') throw invalidParam(`${at}.${k}`, `${at}.${k} must be a string`)
      out[k] = v
    }
    if (out.file_id === undefined && out.file_data === undefined && out.file_url === undefined)
      throw invalidParam(`${at}.file_data`, `${at} needs file_data (base64 or a data: URL), file_id or file_url`)
    return out as ItemPart
  }
  const audio = p.input_audio
  if (!isObject(audio) || typeof audio.data !== 'string' || typeof audio.format !== 'string')
    throw invalidParam(`${at}.input_audio`, `${at}.input_audio must be {data: base64, format: "wav" | "mp3"}`)
  return { type, input_audio: { data: audio.data, format: audio.format } }
}

/** A tool's output: a string, or parts (text, image, file) as a user message would carry them. */
function toolOutput(v: unknown, at: string): string | ItemPart[] {
  if (typeof v === 'string') return v
  if (v === undefined || v === null) throw gatewayError('missing_parameter', { param: at, message: `${at} is required` })
  if (!Array.isArray(v)) throw invalidParam(at, `${at} must be a string or an array of content parts`)
  return v.map((p, j) => part(p, `${at}[${j}]`, false))
}

function itemId(raw: Record<string, unknown>, at: string, newId: NewId, prefix: string): string {
  const id = raw.id
  if (id === undefined || id === null || id === '') return newId(prefix)
  if (typeof id !== 'string') throw invalidParam(`${at}.id`, `${at}.id must be a string`)
  return id
}

function withStatus(raw: Record<string, unknown>, at: string, item: Record<string, unknown>): ResponseItem {
  const status = optionalStatus(raw, at)
  if (status !== undefined) item.status = status
  return item as ResponseItem
}

function optionalStatus(raw: Record<string, unknown>, at: string): string | undefined {
  const s = raw.status
  if (s === undefined || s === null) return undefined
  if (typeof s !== 'string' || !STATUSES.has(s)) throw invalidParam(`${at}.status`, `${at}.status must be one of in_progress, completed, incomplete`)
  return s
}

function nonEmpty(raw: Record<string, unknown>, field: string, at: string): string {
  const v = raw[field]
  if (typeof v === 'string' && v !== '') return v
  if (v === undefined || v === null) throw gatewayError('missing_parameter', { param: `${at}.${field}`, message: `${at}.${field} is required` })
  throw invalidParam(`${at}.${field}`, `${at}.${field} must be a non-empty string`)
}

function text(raw: Record<string, unknown>, field: string, at: string): string {
  const v = raw[field]
  if (typeof v === 'string') return v
  if (v === undefined || v === null) throw gatewayError('missing_parameter', { param: `${at}.${field}`, message: `${at}.${field} is required` })
  throw invalidParam(`${at}.${field}`, `${at}.${field} must be a string`)
}
