/**
 * A Chat Completions reply → the Responses side (reference §3, §8): the Response object, its `usage`, its status
 * from the finish reason, and the output items of a non-stream completion. The stream's state machine
 * (stream-translator.ts) builds the same items from deltas, with the helpers exported here.
 *
 * Reasoning: OpenRouter's `message.reasoning` (the model's thinking as text) becomes a reasoning item first in the
 * output, `{id:"rs_…", type:"reasoning", summary:[{type:"summary_text", text}]}`. That is the shape OpenAI sends for
 * reasoning summaries, which every client parses: openai-node keeps it, Codex shows it, the AI SDK turns it into a
 * reasoning part and the Agents SDK passes it back as input next turn (where the bridge drops it again; the chat
 * message the lead stores beside the items keeps `reasoning_details` for providers that need them). The chat path
 * already relays this text to clients, so nothing is shown here that the gateway did not show before. No item is
 * made when the upstream sent no reasoning.
 */
import { randomBytes } from 'node:crypto'
import { jsonNumber, jsonString } from '../json-text.js'
import { isObject } from '../types.js'
import type { ItemPart, NewId, ResponseItem } from './item-types.js'
import { customInput } from './item-messages.js'
import { messageItemJson, textPartJson } from './stream-events.js'

export type ResponseStatus = 'completed' | 'incomplete' | 'failed' | 'in_progress' | 'cancelled'

export interface ResponseUsage {
  input_tokens: number
  input_tokens_details: { cached_tokens: number; cache_write_tokens?: number }
  output_tokens: number
  output_tokens_details: { reasoning_tokens: number }
  total_tokens: number
}

export interface ResponseObjectInput {
  id: string
  /** Unix seconds. */
  createdAt: number
  model: string
  status: ResponseStatus
  output: ResponseItem[]
  usage: ResponseUsage | null
  error: { code: string; message: string } | null
  incompleteDetails: { reason: string } | null
  /** From ResponsesRequest.echo; fields missing here take OpenAI's defaults. */
  echo: Record<string, unknown>
  previousResponseId: string | null
  conversationId: string | null
  /** Unix seconds; null until the response is done. */
  completedAt?: number | null
}

/**
 * What the echo shows for a request that set nothing (recorded OpenAI responses, reference §3). Frozen, because
 * request.ts puts these very objects in an echo that sets nothing (see shapeKey: a default is known by identity).
 */
export const ECHO_DEFAULTS = {
  instructions: null,
  max_output_tokens: null,
  max_tool_calls: null,
  parallel_tool_calls: true,
  prompt_cache_key: null,
  reasoning: Object.freeze({ effort: null, summary: null }),
  safety_identifier: null,
  service_tier: 'default',
  store: true,
  temperature: 1,
  text: Object.freeze({ format: Object.freeze({ type: 'text' }) }),
  tool_choice: 'auto',
  tools: Object.freeze([]) as readonly never[],
  top_logprobs: 0,
  top_p: 1,
  truncation: 'disabled',
  user: null,
  metadata: Object.freeze({}) as Readonly<Record<string, string>>,
} as const satisfies Readonly<Record<string, unknown>>
const ECHO_KEYS = Object.keys(ECHO_DEFAULTS) as ReadonlyArray<keyof typeof ECHO_DEFAULTS>
/** ECHO_DEFAULTS' values in ECHO_KEYS order (an element read, where `ECHO_DEFAULTS[k]` was a megamorphic keyed load). */
const ECHO_DEFAULT_VALUES: readonly unknown[] = ECHO_KEYS.map((k) => ECHO_DEFAULTS[k])

/** The whole Response object, in the field order OpenAI sends. */
export function responseObject(o: ResponseObjectInput): Record<string, unknown> {
  const echo = (k: keyof typeof ECHO_DEFAULTS): unknown => (Object.hasOwn(o.echo, k) ? o.echo[k] : ECHO_DEFAULTS[k])
  return {
    id: o.id,
    object: 'response',
    created_at: o.createdAt,
    status: o.status,
    background: false,
    error: o.error,
    incomplete_details: o.incompleteDetails,
    instructions: echo('instructions'),
    max_output_tokens: echo('max_output_tokens'),
    max_tool_calls: echo('max_tool_calls'),
    model: o.model,
    output: o.output,
    parallel_tool_calls: echo('parallel_tool_calls'),
    previous_response_id: o.previousResponseId,
    prompt_cache_key: echo('prompt_cache_key'),
    reasoning: echo('reasoning'),
    safety_identifier: echo('safety_identifier'),
    service_tier: echo('service_tier'),
    store: echo('store'),
    temperature: echo('temperature'),
    text: echo('text'),
    tool_choice: echo('tool_choice'),
    tools: echo('tools'),
    top_logprobs: echo('top_logprobs'),
    top_p: echo('top_p'),
    truncation: echo('truncation'),
    usage: o.usage,
    user: echo('user'),
    metadata: echo('metadata'),
    conversation: o.conversationId === null ? null : { id: o.conversationId },
    completed_at: o.completedAt ?? null,
  }
}

/** The Response object's fields that change as it progresses; the rest are fixed when the request is parsed. */
export type ResponseState = Pick<ResponseObjectInput, 'status' | 'output' | 'usage' | 'error' | 'incompleteDetails' | 'completedAt'>

/** Fields that change from one response to the next though their request's echo is the same: the cached text's gaps. */
type Slot = keyof ResponseState | 'id' | 'createdAt' | 'model' | 'previousResponseId' | 'conversationId'

/** In the order responseObject writes them (ResponseJson finds them in this order). */
const SLOT_FIELDS: readonly Slot[] = ['id', 'createdAt', 'status', 'error', 'incompleteDetails', 'model', 'output', 'previousResponseId', 'usage', 'conversationId', 'completedAt']
const STATE_FIELDS: ReadonlySet<Slot> = new Set<Slot>(['status', 'error', 'incompleteDetails', 'output', 'usage', 'completedAt'])

/** Stands for a changing field in the probe (ResponseJson): a random nonce per process, so no value holds it by chance. */
const SLOT_MARK = `\u0000recallgate-slot-${randomBytes(12).toString('base64url')}-`
const MARKS = SLOT_FIELDS.map((_, i) => JSON.stringify(`${SLOT_MARK}${i}`))

/** A Response object's text cut at its slots: `texts[i]`, slot `slots[i]`, …, the last text. */
interface Shape {
  texts: readonly string[]
  slots: readonly Slot[]
  /** Whether `slots[i]` is one of the state's fields (a gap render fills) or the turn's (filled in by the constructor). */
  state: readonly boolean[]
}

/**
 * Shapes by the request's echo (and whether the response has a conversation): requests of one client mostly share
 * one. Bounded: emptied when full (a client varying its echo on every request only misses, as if there were no cache).
 */
const shapes = new Map<string, Shape>()
const MAX_SHAPES = 256

/**
 * The key of a shape: the JSON of each echo field responseObject reads, in ECHO_KEYS order, after a comma each, and
 * nothing for a field missing or holding its default itself (both render as the default; request.ts sets the default
 * objects, not copies, so a request that sets nothing has a key of commas). Each JSON value ends where it ends, so the
 * key stands for one text. Fields responseObject does not read are not in the text, nor in the key. Undefined for an
 * echo whose text the key cannot settle (a value with no JSON: left out of the text, where a missing field would show
 * its default instead). Measured: the whole echo's JSON.stringify and the Map lookup by it was ≈ 2.5 µs a response
 * (see docs/benchmarks.md, "Responses stream events from templates, 2026-11-27").
 */
function shapeKey(echo: Readonly<Record<string, unknown>>, conversation: boolean): string | undefined {
  let key = conversation ? 'c' : '-'
  for (let i = 0; i < ECHO_KEYS.length; i++) {
    key += ','
    const k = ECHO_KEYS[i] as (typeof ECHO_KEYS)[number]
    // A field that is missing reads as undefined too: only then is Object.hasOwn asked (18 calls a request before).
    const v = echo[k]
    if (v === ECHO_DEFAULT_VALUES[i]) continue
    if (v === undefined && !Object.hasOwn(echo, k)) continue
    if (v === undefined || typeof v === 'function' || typeof v === 'symbol') return undefined
    key += typeof v === 'number' || typeof v === 'boolean' ? `${v}` : JSON.stringify(v)
  }
  return key
}

/** The probe: the Response object serialized with a marker in each slot, cut at the markers. */
function shapeOf(fixed: Omit<ResponseObjectInput, keyof ResponseState>): Shape {
  const marked: Record<string, string> = {}
  for (const [i, field] of SLOT_FIELDS.entries()) marked[field] = `${SLOT_MARK}${i}`
  const text = JSON.stringify(responseObject({ ...(marked as unknown as ResponseObjectInput), echo: fixed.echo, conversationId: fixed.conversationId === null ? null : marked.conversationId as string }))
  const texts: string[] = []
  const slots: Slot[] = []
  let from = 0
  for (const [i, field] of SLOT_FIELDS.entries()) {
    const mark = MARKS[i] as string
    const at = text.indexOf(mark, from)
    // No conversation: `"conversation":null`, no slot.
    if (at === -1 && field === 'conversationId') continue
    if (at === -1) throw new Error(`ResponseJson: no ${field} after the fields before it in the Response object`)
    texts.push(text.slice(from, at))
    slots.push(field)
    from = at + mark.length
  }
  texts.push(text.slice(from))
  return { texts, slots, state: slots.map((slot) => STATE_FIELDS.has(slot)) }
}

/** JSON.stringify of one of the turn's fields: ids and the model quoted as they are when nothing in them needs escaping. */
function fixedJson(slot: Exclude<Slot, keyof ResponseState>, fixed: Omit<ResponseObjectInput, keyof ResponseState>): string {
  switch (slot) {
    case 'createdAt':
      return jsonNumber(fixed.createdAt)
    case 'id':
      return jsonString(fixed.id)
    case 'model':
      return jsonString(fixed.model)
    case 'previousResponseId':
      return fixed.previousResponseId === null ? 'null' : jsonString(fixed.previousResponseId)
    case 'conversationId':
      return fixed.conversationId === null ? 'null' : jsonString(fixed.conversationId)
  }
}

/**
 * One response's JSON text, whose 25 of 31 fields never change while it runs (a stream sends it three times: created,
 * in_progress, the terminal event) and mostly repeat from one request to the next: the text is cut at the changing
 * fields once per shape (the request's echo, cached), the turn's own fields (id, model, …) are filled in once here,
 * and `render(s)` joins the pieces with the state's JSON. So the text is exactly
 * `JSON.stringify({...responseObject({...fixed, ...s}), _metadata})` (a test holds them equal), in responseObject's
 * field order, without building and serializing the whole object each time. Measured: see docs/benchmarks.md,
 * "Relay and Responses CPU, 2026-11-27".
 */
export class ResponseJson {
  readonly #texts: string[] = []
  readonly #slots: Array<keyof ResponseState> = []

  constructor(fixed: Omit<ResponseObjectInput, keyof ResponseState>, metadataJson?: string) {
    const key = shapeKey(fixed.echo, fixed.conversationId !== null)
    let shape = key === undefined ? undefined : shapes.get(key)
    if (shape === undefined) {
      shape = shapeOf(fixed)
      if (key !== undefined) {
        if (shapes.size >= MAX_SHAPES) shapes.clear()
        shapes.set(key, shape)
      }
    }
    // The turn's fields go into the text now; only the state's stay gaps.
    let text = shape.texts[0] as string
    for (let i = 0; i < shape.slots.length; i++) {
      const slot = shape.slots[i] as Slot
      if (shape.state[i] === true) {
        this.#texts.push(text)
        this.#slots.push(slot as keyof ResponseState)
        text = ''
      } else text += fixedJson(slot as Exclude<Slot, keyof ResponseState>, fixed)
      text += shape.texts[i + 1] as string
    }
    // `_metadata` last: the text ends with the object's `}`.
    this.#texts.push(metadataJson === undefined ? text : `${text.slice(0, -1)},"_metadata":${metadataJson}}`)
  }

  /** `outputJson`: `s.output` as JSON text when the caller has it already (the stream made its items' text). */
  render(s: ResponseState, outputJson?: string): string {
    let out = this.#texts[0] as string
    for (let i = 0; i < this.#slots.length; i++) {
      const slot = this.#slots[i] as keyof ResponseState
      out += stateJson(slot, s, outputJson) + (this.#texts[i + 1] as string)
    }
    return out
  }
}

/**
 * One state field's JSON, as JSON.stringify writes it: the fields of a fixed shape written out (a status, a number,
 * the usage object as mapUsage builds it), the rest through JSON.stringify. Why: render's JSON.stringify calls were
 * most of its time, ≈ 1.5 µs a response hot (the usage object alone 0.5 µs, the message item 0.8 µs).
 */
function stateJson(slot: keyof ResponseState, s: ResponseState, outputJson: string | undefined): string {
  switch (slot) {
    case 'status':
      return `"${s.status}"`
    case 'completedAt':
      return s.completedAt === undefined || s.completedAt === null ? 'null' : jsonNumber(s.completedAt)
    case 'usage':
      return s.usage === null ? 'null' : usageJson(s.usage)
    case 'output':
      return outputJson ?? JSON.stringify(s.output)
    default:
      return s[slot] === null ? 'null' : JSON.stringify(s[slot] ?? null)
  }
}

/** JSON.stringify(u) for a usage object as mapUsage builds it (the same fields, in the same order). */
function usageJson(u: ResponseUsage): string {
  const d = u.input_tokens_details
  const write = d.cache_write_tokens === undefined ? '' : `,"cache_write_tokens":${jsonNumber(d.cache_write_tokens)}`
  return (
    `{"input_tokens":${jsonNumber(u.input_tokens)},"input_tokens_details":{"cached_tokens":${jsonNumber(d.cached_tokens)}${write}},` +
    `"output_tokens":${jsonNumber(u.output_tokens)},"output_tokens_details":{"reasoning_tokens":${jsonNumber(u.output_tokens_details.reasoning_tokens)}},` +
    `"total_tokens":${jsonNumber(u.total_tokens)}}`
  )
}

/**
 * JSON.stringify(items) for completionToOutput's items (a non-stream reply's output): its message items, whose fields
 * and their order it sets, are written with the stream's own templates for a finished message (stream-events.ts), the
 * other items by JSON.stringify. Saves the message item's JSON.stringify, ≈ 0.8 µs of a response hot.
 */
export function outputJson(items: readonly ResponseItem[]): string {
  let out = '['
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as ResponseItem
    if (i > 0) out += ','
    const status = item.status
    out +=
      item.type === 'message' && item.role === 'assistant' && typeof item.id === 'string' && (status === 'completed' || status === 'incomplete')
        ? messageItemJson(item.id, status, (item.content as readonly ItemPart[]).map(partJson))
        : JSON.stringify(item)
  }
  return `${out}]`
}

function partJson(p: ItemPart): string {
  return p.type === 'output_text' && typeof p.text === 'string' && Array.isArray(p.annotations) && Array.isArray(p.logprobs)
    ? textPartJson(p.annotations as readonly Record<string, unknown>[], JSON.stringify(p.text), p.logprobs as readonly unknown[])
    : JSON.stringify(p)
}

/** Chat usage → Responses usage. Both detail objects always, with zeros: Codex and the AI SDK parse them. */
export function mapUsage(u: unknown): ResponseUsage {
  const usage = isObject(u) ? u : {}
  const prompt = isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {}
  const completion = isObject(usage.completion_tokens_details) ? usage.completion_tokens_details : {}
  const input = count(usage.prompt_tokens)
  const output = count(usage.completion_tokens)
  const inputDetails: ResponseUsage['input_tokens_details'] = { cached_tokens: count(prompt.cached_tokens) }
  if (typeof prompt.cache_write_tokens === 'number') inputDetails.cache_write_tokens = count(prompt.cache_write_tokens)
  return {
    input_tokens: input,
    input_tokens_details: inputDetails,
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: count(completion.reasoning_tokens) },
    total_tokens: typeof usage.total_tokens === 'number' ? count(usage.total_tokens) : input + output,
  }
}

/** Codex parses token counts as integers. */
function count(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.round(v) : 0
}

export interface FinishStatus {
  status: 'completed' | 'incomplete' | 'failed'
  incompleteDetails: { reason: 'max_output_tokens' | 'content_filter' } | null
}

/** The AI SDK derives its finish reason from `incomplete_details.reason`, so it is always set when incomplete. */
export function statusFromFinish(finishReason: string | null | undefined): FinishStatus {
  switch (finishReason) {
    case 'length':
      return { status: 'incomplete', incompleteDetails: { reason: 'max_output_tokens' } }
    case 'content_filter':
      return { status: 'incomplete', incompleteDetails: { reason: 'content_filter' } }
    case 'error':
      return { status: 'failed', incompleteDetails: null }
    default:
      return { status: 'completed', incompleteDetails: null }
  }
}

/** OpenRouter nests a citation under its type (`{type:"url_citation", url_citation:{…}}`); Responses has it flat. */
export function flattenAnnotations(raw: unknown): Record<string, unknown>[] {
  if (!Array.isArray(raw)) return []
  const out: Record<string, unknown>[] = []
  for (const a of raw) {
    if (!isObject(a) || a.type !== 'url_citation') continue
    const c = isObject(a.url_citation) ? a.url_citation : a
    if (typeof c.url !== 'string') continue
    out.push({
      type: 'url_citation',
      start_index: typeof c.start_index === 'number' ? c.start_index : 0,
      end_index: typeof c.end_index === 'number' ? c.end_index : 0,
      url: c.url,
      title: typeof c.title === 'string' ? c.title : '',
    })
  }
  return out
}

/** One token's log probability, as Chat and Responses both shape it (`bytes` may be null on Chat's side). */
interface Logprob {
  token: string
  logprob: number
  bytes: number[]
  top_logprobs: Array<Omit<Logprob, 'top_logprobs'>>
}

/**
 * Chat's `choice.logprobs` (`{content: [...]}`, the text's tokens) → an `output_text` part's `logprobs`. The gateway asks
 * the upstream for them only when the caller did (request.ts), so what came back is the caller's. Refusal tokens have
 * no place on an output_text part and are left out.
 */
export function mapLogprobs(raw: unknown): Logprob[] {
  const content = isObject(raw) ? raw.content : undefined
  if (!Array.isArray(content)) return []
  const out: Logprob[] = []
  for (const l of content) {
    if (!isObject(l) || typeof l.token !== 'string') continue
    const top = Array.isArray(l.top_logprobs) ? l.top_logprobs.filter(isObject).filter((x) => typeof x.token === 'string') : []
    // Written out, not `{ ...tokenLogprob(l), top_logprobs }` (a spread then a new key: V8's slow path, per token).
    const t = tokenLogprob(l)
    out.push({ token: t.token, logprob: t.logprob, bytes: t.bytes, top_logprobs: top.map(tokenLogprob) })
  }
  return out
}

function tokenLogprob(l: Record<string, unknown>): Omit<Logprob, 'top_logprobs'> {
  return {
    token: String(l.token),
    logprob: typeof l.logprob === 'number' ? l.logprob : 0,
    bytes: Array.isArray(l.bytes) ? l.bytes.filter((b): b is number => typeof b === 'number') : [],
  }
}

/** The reasoning item, from the reasoning text (see the module comment for why it is shown). */
export function reasoningItem(id: string, text: string): ResponseItem {
  return { id, type: 'reasoning', summary: [{ type: 'summary_text', text }] }
}

/**
 * A tool call's output item: `custom_tool_call` for custom tools, else `function_call`. A custom tool's input is the
 * `input` argument unwrapped; when the model ignored the wrapper and wrote raw text, that text is the input (for
 * `apply_patch` it is the patch itself).
 */
export function toolCallItem(
  o: { id: string; callId: string; name: string; args: string; status: 'completed' | 'incomplete' },
  customTools: ReadonlySet<string>,
): ResponseItem {
  if (customTools.has(o.name)) return { id: o.id, type: 'custom_tool_call', call_id: o.callId, name: o.name, input: customInput(o.args) ?? o.args }
  return { id: o.id, type: 'function_call', status: o.status, arguments: o.args, call_id: o.callId, name: o.name }
}

export interface CompletionOutput {
  output: ResponseItem[]
  finishReason: string | null
}

/** A non-stream completion's `choices[0]` → output items: reasoning, then the message, then one item per call. */
export function completionToOutput(
  completion: Record<string, unknown>,
  opts: { newId: NewId; customTools: ReadonlySet<string> },
): CompletionOutput {
  const choices = completion.choices
  const first: unknown = Array.isArray(choices) ? choices[0] : undefined
  const choice = isObject(first) ? first : {}
  const msg = isObject(choice.message) ? choice.message : {}
  const finishReason = typeof choice.finish_reason === 'string' ? choice.finish_reason : null
  const cut = statusFromFinish(finishReason).status === 'incomplete'

  const output: ResponseItem[] = []
  if (typeof msg.reasoning === 'string' && msg.reasoning !== '') output.push(reasoningItem(opts.newId('rs'), msg.reasoning))

  const text = contentText(msg.content)
  const refusal = typeof msg.refusal === 'string' ? msg.refusal : ''
  const calls = Array.isArray(msg.tool_calls) ? msg.tool_calls.filter(isObject) : []
  // As OpenAI does: no empty message in front of tool calls; an empty one when there is nothing else to say.
  if (text !== '' || refusal !== '' || calls.length === 0) {
    const content: ItemPart[] = []
    if (text !== '' || refusal === '') content.push({ type: 'output_text', annotations: flattenAnnotations(msg.annotations), logprobs: mapLogprobs(choice.logprobs), text })
    if (refusal !== '') content.push({ type: 'refusal', refusal })
    output.push({ id: opts.newId('msg'), type: 'message', status: 'completed', content, role: 'assistant' })
  }
  for (const c of calls) {
    const f = isObject(c.function) ? c.function : isObject(c.custom) ? c.custom : {}
    const name = typeof f.name === 'string' ? f.name : ''
    // The newer Chat custom-tool call carries `custom.input` (raw text); wrap it as the function form would.
    const args = typeof f.arguments === 'string' ? f.arguments : typeof f.input === 'string' ? JSON.stringify({ input: f.input }) : ''
    const callId = typeof c.id === 'string' && c.id !== '' ? c.id : opts.newId('call')
    const id = opts.newId(opts.customTools.has(name) ? 'ctc' : 'fc')
    output.push(toolCallItem({ id, callId, name, args, status: 'completed' }, opts.customTools))
  }
  // Cut by the length limit (or a filter): the item being written when it happened is the incomplete one.
  const last = output.at(-1)
  if (cut && last !== undefined && last.type !== 'reasoning' && last.type !== 'custom_tool_call') {
    output[output.length - 1] = { ...last, status: 'incomplete' }
  }
  return { output, finishReason }
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  let out = ''
  for (const p of content) if (isObject(p) && p.type === 'text' && typeof p.text === 'string') out += p.text
  return out
}
