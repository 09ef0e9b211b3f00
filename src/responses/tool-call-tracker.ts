/**
 * The tool calls of a Chat stream, assembled from their deltas, for stream-translator.ts. Deltas are keyed by
 * `index`: the first usually carries `id` and `name`, the rest pieces of `arguments`; several calls may interleave;
 * some providers send a whole call in one chunk, and some reuse an index for a new call (LiteLLM guards this too).
 * The tracker only assembles; which call is open on the Responses side is the translator's business.
 */
import { isObject } from '../types.js'

export interface TrackedCall {
  /** The upstream's call id ('' until it sends one). */
  upstreamId: string
  name: string
  args: string
  state: 'pending' | 'open' | 'closed'
  /** The item id and call id, set when the translator opens the call. */
  id: string
  callId: string
}

/** As ReplyAssembler: a tool call `index` outside this range is a provider bug, taken as a new call. */
const MAX_CALL_INDEX = 1024

export class ToolCallTracker {
  readonly #calls: TrackedCall[] = []
  readonly #byIndex = new Map<number, TrackedCall>()

  /** Calls seen so far. */
  get size(): number {
    return this.#calls.length
  }

  /** One entry of `delta.tool_calls`. Returns its call and the argument text it added ('' when none). */
  apply(c: Record<string, unknown>): { call: TrackedCall; args: string } {
    const index = typeof c.index === 'number' && Number.isInteger(c.index) && c.index >= 0 && c.index < MAX_CALL_INDEX ? c.index : -1
    const upstreamId = typeof c.id === 'string' ? c.id : ''
    let call = index >= 0 ? this.#byIndex.get(index) : undefined
    // Some providers reuse an index for a new call: a different id is a different call.
    if (call !== undefined && upstreamId !== '' && call.upstreamId !== '' && upstreamId !== call.upstreamId) call = undefined
    if (call === undefined) {
      call = { upstreamId, name: '', args: '', state: 'pending', id: '', callId: '' }
      this.#calls.push(call)
      if (index >= 0) this.#byIndex.set(index, call)
    }
    if (call.upstreamId === '') call.upstreamId = upstreamId
    const f = isObject(c.function) ? c.function : {}
    // The name comes once, in the first delta (OpenAI's protocol); some providers repeat it: the first one holds.
    if (call.name === '' && typeof f.name === 'string') call.name = f.name
    const args = typeof f.arguments === 'string' ? f.arguments : ''
    // More after a closed call's complete JSON is a provider bug: it can no longer be shown, so it is not kept either
    // (the output must stay what output_item.done said).
    if (args === '' || call.state === 'closed') return { call, args: '' }
    call.args += args
    return { call, args }
  }

  /** The next call to open: the first pending one, once its name is known (calls open in the order they came). */
  next(): TrackedCall | undefined {
    const next = this.#calls.find((c) => c.state === 'pending')
    return next !== undefined && next.name !== '' ? next : undefined
  }

  pending(): TrackedCall[] {
    return this.#calls.filter((c) => c.state === 'pending')
  }
}

/**
 * Arguments that parse are finished: JSON allows nothing after a complete value. Checked on each chunk while another
 * call waits, so the parse is skipped unless the text can end a value (arguments are an object).
 */
export function completeJson(args: string): boolean {
  if (!args.trimEnd().endsWith('}')) return false
  try {
    JSON.parse(args)
    return true
  } catch {
    // Not (yet) complete: the call stays open.
    return false
  }
}
