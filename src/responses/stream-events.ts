/**
 * The Responses stream's event payloads and their SSE encoding, for stream-translator.ts: the shapes recorded from
 * OpenAI (reference §4a–c), in one place so the state machine reads as transitions only.
 */

/** One event: `type` and `sequence_number` (from 0, +1 per event across the stream) first, as OpenAI sends them. */
export interface ResponseEvent {
  type: string
  sequence_number: number
  [field: string]: unknown
}

/**
 * `event: <type>\ndata: <json>\n\n`. JSON escapes line breaks inside strings; the type is ours, but a line break in
 * it would split the frame, so it is refused rather than trusted (hono's SSE writer does the same).
 */
export function encodeEvent(e: ResponseEvent): string {
  if (/[\r\n]/.test(e.type)) throw new Error('an SSE event type cannot contain a line break')
  const r = e.response
  if (r instanceof JsonText) {
    // A response snapshot rendered once (output.ts ResponseJson) is spliced in, not serialized again.
    const { type, sequence_number: seq, response: _, ...rest } = e
    if (Object.keys(rest).length === 0) return `event: ${type}\ndata: {"type":${JSON.stringify(type)},"sequence_number":${seq},"response":${r.text}}\n\n`
  }
  return `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`
}

/**
 * A value whose JSON text is already made. encodeEvent splices it in as is; anything else that serializes it gets the
 * same JSON (through toJSON, slowly), so it is never written as `{}`.
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

/** A message's content part while it streams. */
export type Part =
  | { type: 'output_text'; text: string; annotations: Record<string, unknown>[] }
  | { type: 'refusal'; refusal: string }

/** Where a delta goes: the open item's id and output index. */
export function at(item: { id: string; index: number }): { item_id: string; output_index: number } {
  return { item_id: item.id, output_index: item.index }
}

/** The part as `content_part.added` announces it. */
export function emptyPart(type: Part['type']): Record<string, unknown> {
  return type === 'output_text' ? { type, annotations: [], logprobs: [], text: '' } : { type, refusal: '' }
}

/** The finished part, in `content_part.done` and in the message item: the same shape completionToOutput makes. */
export function finalPart(p: Part): Record<string, unknown> {
  return p.type === 'output_text' ? { type: p.type, annotations: [...p.annotations], logprobs: [], text: p.text } : { type: p.type, refusal: p.refusal }
}

export function summaryPart(r: { id: string; index: number }, text: string): Record<string, unknown> {
  return { ...at(r), summary_index: 0, part: { type: 'summary_text', text } }
}

export function summaryDelta(r: { id: string; index: number }, delta: string): Record<string, unknown> {
  return { ...at(r), summary_index: 0, delta }
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
