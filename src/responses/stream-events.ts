/**
 * The Responses stream's event payloads and their SSE encoding, for stream-translator.ts: the shapes recorded from
 * OpenAI (reference §4a–c), in one place so the state machine reads as transitions only.
 */

/** One event: `type` and `sequence_number` (from 0, +1 per event across the stream) first, as OpenAI sends them. */
export interface EventObject {
  type: string
  sequence_number: number
  [field: string]: unknown
}

/**
 * An event whose `data` is already JSON text: made by the templates below (the events of a text message, which nearly
 * every stream sends, and the response snapshots rendered once by output.ts ResponseJson). encodeEvent writes it as
 * is; anything else that serializes it gets the same JSON (through toJSON, slowly), so it is never written as `{}`.
 * Why templates: an event object built by spreading its fields and then `JSON.stringify`ed cost ≈ 2.4 µs an event
 * (the spread in a megamorphic site, then the serializer); see docs/benchmarks.md, "Responses stream events from
 * templates, 2026-11-27".
 */
export class EncodedEvent {
  constructor(
    readonly type: string,
    readonly sequence_number: number,
    readonly data: string,
  ) {}

  toJSON(): unknown {
    return JSON.parse(this.data)
  }
}

export type ResponseEvent = EventObject | EncodedEvent

/**
 * `event: <type>\ndata: <json>\n\n`. JSON escapes line breaks inside strings; the type is ours, but a line break in
 * it would split the frame, so it is refused rather than trusted (hono's SSE writer does the same). An EncodedEvent's
 * type is one of the literals below.
 */
export function encodeEvent(e: ResponseEvent): string {
  if (e instanceof EncodedEvent) return `event: ${e.type}\ndata: ${e.data}\n\n`
  if (/[\r\n]/.test(e.type)) throw new Error('an SSE event type cannot contain a line break')
  return `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`
}

/**
 * A value whose JSON text is already made. A snapshot event (snapshotEvent) splices it in as is; anything else that
 * serializes it gets the same JSON (through toJSON, slowly), so it is never written as `{}`.
 */
export class JsonText {
  constructor(readonly text: string) {}

  toJSON(): unknown {
    return JSON.parse(this.text)
  }
}

/** Several events, encoded in order into one string (one write). */
export function encodeEvents(events: readonly ResponseEvent[]): string {
  let out = ''
  for (const e of events) out += encodeEvent(e)
  return out
}

// ---- templates ----------------------------------------------------------------------------------------------------
// Each makes exactly the text JSON.stringify makes of the event object named beside it, in the same field order
// (test/responses-stream.test.ts holds them equal). Numbers here are the stream's own counters and indexes (integers,
// written by `${n}` as JSON.stringify writes them); strings are given as JSON text already.

/** `{type, sequence_number, response}`: created, in_progress and the terminal events, around a rendered snapshot. */
export function snapshotEvent(type: string, seq: number, response: JsonText): EncodedEvent {
  return new EncodedEvent(type, seq, `{"type":${JSON.stringify(type)},"sequence_number":${seq},"response":${response.text}}`)
}

/** `"item_id":…,"output_index":…,"content_index":…`: what a message part's events share (at() and content_index). */
export function partWhere(itemId: string, outputIndex: number, contentIndex: number): string {
  return `"item_id":${JSON.stringify(itemId)},"output_index":${outputIndex},"content_index":${contentIndex}`
}

/** output_item.added of a message: `{…, output_index, item: {id, type: "message", status: "in_progress", content: [], role}}`. */
export function messageAdded(seq: number, id: string, outputIndex: number): EncodedEvent {
  const type = 'response.output_item.added'
  return new EncodedEvent(
    type,
    seq,
    `{"type":"${type}","sequence_number":${seq},"output_index":${outputIndex},"item":{"id":${JSON.stringify(id)},"type":"message","status":"in_progress","content":[],"role":"assistant"}}`,
  )
}

/** content_part.added of an output_text part: `{…, item_id, output_index, content_index, part: emptyPart('output_text')}`. */
export function textPartAdded(seq: number, where: string): EncodedEvent {
  const type = 'response.content_part.added'
  return new EncodedEvent(type, seq, `{"type":"${type}","sequence_number":${seq},${where},"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`)
}

/** output_text.delta: `{…, item_id, output_index, content_index, delta, logprobs}` (the piece's tokens, as JSON). */
export function textDelta(seq: number, where: string, deltaJson: string, logprobsJson = '[]'): EncodedEvent {
  return new EncodedEvent(TEXT_DELTA, seq, textDeltaData(seq, where, deltaJson, logprobsJson))
}

/** The same event's frame, encoded (what the relay writes for most events of a stream). */
export function textDeltaFrame(seq: number, where: string, deltaJson: string): string {
  return `event: ${TEXT_DELTA}\ndata: ${textDeltaData(seq, where, deltaJson)}\n\n`
}

const TEXT_DELTA = 'response.output_text.delta'

function textDeltaData(seq: number, where: string, deltaJson: string, logprobsJson = '[]'): string {
  return `{"type":"${TEXT_DELTA}","sequence_number":${seq},${where},"delta":${deltaJson},"logprobs":${logprobsJson}}`
}

/** output_text.done: `{…, item_id, output_index, content_index, text, logprobs}` (all the text's tokens, as JSON). */
export function textDone(seq: number, where: string, textJson: string, logprobsJson = '[]'): EncodedEvent {
  const type = 'response.output_text.done'
  return new EncodedEvent(type, seq, `{"type":"${type}","sequence_number":${seq},${where},"text":${textJson},"logprobs":${logprobsJson}}`)
}

/** content_part.done: `{…, item_id, output_index, content_index, part}`. */
export function partDone(seq: number, where: string, partJson: string): EncodedEvent {
  const type = 'response.content_part.done'
  return new EncodedEvent(type, seq, `{"type":"${type}","sequence_number":${seq},${where},"part":${partJson}}`)
}

/** output_item.done: `{…, output_index, item}`. */
export function itemDone(seq: number, outputIndex: number, itemJson: string): EncodedEvent {
  const type = 'response.output_item.done'
  return new EncodedEvent(type, seq, `{"type":"${type}","sequence_number":${seq},"output_index":${outputIndex},"item":${itemJson}}`)
}

/** finalPart(p) of an output_text part, as JSON, its text given as JSON. */
export function textPartJson(annotations: readonly Record<string, unknown>[], textJson: string, logprobs: readonly unknown[] = []): string {
  return `{"type":"output_text","annotations":${annotations.length === 0 ? '[]' : JSON.stringify(annotations)},"logprobs":${logprobs.length === 0 ? '[]' : JSON.stringify(logprobs)},"text":${textJson}}`
}

/** A finished message item (`{id, type: "message", status, content, role}`), its parts given as JSON. */
export function messageItemJson(id: string, status: 'completed' | 'incomplete', partsJson: readonly string[]): string {
  return `{"id":${JSON.stringify(id)},"type":"message","status":"${status}","content":[${partsJson.join(',')}],"role":"assistant"}`
}

/** A message's content part while it streams. */
export type Part =
  /**
   * `json`: the text's JSON, made once when the part closes (its done events, the item, the terminal event).
   * `logprobs`: the text's tokens, when the caller asked for them (output.ts mapLogprobs).
   */
  | { type: 'output_text'; text: string; annotations: Record<string, unknown>[]; json?: string; logprobs?: unknown[] }
  | { type: 'refusal'; refusal: string }

/**
 * Where an event's item is, and the event's other fields after it. One literal with the fields spread last: a literal
 * that starts with a spread (`{ ...at(item), delta }`) and adds keys is built through V8's slow path, ≈ 0.4 µs hot,
 * and some of these are made per delta.
 */
export function at(item: { id: string; index: number }): { item_id: string; output_index: number }
export function at<T extends Record<string, unknown>>(item: { id: string; index: number }, fields: T): { item_id: string; output_index: number } & T
export function at(item: { id: string; index: number }, fields?: Record<string, unknown>): Record<string, unknown> {
  return fields === undefined ? { item_id: item.id, output_index: item.index } : { item_id: item.id, output_index: item.index, ...fields }
}

/** The part as `content_part.added` announces it. */
export function emptyPart(type: Part['type']): Record<string, unknown> {
  return type === 'output_text' ? { type, annotations: [], logprobs: [], text: '' } : { type, refusal: '' }
}

/** The finished part, in `content_part.done` and in the message item: the same shape completionToOutput makes. */
export function finalPart(p: Part): Record<string, unknown> {
  return p.type === 'output_text'
    ? { type: p.type, annotations: [...p.annotations], logprobs: [...(p.logprobs ?? [])], text: p.text }
    : { type: p.type, refusal: p.refusal }
}

export function summaryPart(r: { id: string; index: number }, text: string): Record<string, unknown> {
  return at(r, { summary_index: 0, part: { type: 'summary_text', text } })
}

export function summaryDelta(r: { id: string; index: number }, delta: string): Record<string, unknown> {
  return at(r, { summary_index: 0, delta })
}

/**
 * The `error` event's fields. The recorded OpenAI payload nests them under `error`; the SDK's type declares them at
 * the top level: both are sent (§4c). `type` defaults to the code, as in the recording.
 */
export function errorFields(err: { code: string; message: string; type?: string }): Record<string, unknown> {
  return {
    code: err.code,
    message: err.message,
    param: null,
    error: { type: err.type ?? err.code, code: err.code, message: err.message, param: null },
  }
}

/** OpenRouter's `{code: <HTTP status or string>, message}` → the code Codex and the SDKs know. */
export function upstreamError(e: Record<string, unknown>): { code: string; message: string } {
  const message = typeof e.message === 'string' && e.message !== '' ? e.message : 'The upstream provider failed while generating the response'
  const code = typeof e.code === 'string' && e.code !== '' ? e.code : e.code === 429 ? 'rate_limit_exceeded' : 'server_error'
  return { code, message }
}
