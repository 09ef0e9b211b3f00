/**
 * Relays an upstream SSE stream to the client event by event while capturing the assistant's message (text, tool
 * calls assembled from their deltas, refusal, reasoning: messages/reply.ts).
 *
 * - Each upstream network chunk is parsed incrementally and what it completes is written to the client in one write,
 *   at once; when the client's socket buffer is full (`write()` false) we stop reading the upstream until `drain`.
 * - The first content chunk carries `_metadata`. Keep-alive comments stay comments. The usage-only chunk
 *   (`choices: []`) is captured and forwarded only if the client asked for `include_usage`.
 * - An upstream error event is relayed as is; our own failures mid-stream (invalid SSE, timeout, reset) become one
 *   error event in the OpenAI shape. Either way the stream then ends without `[DONE]`, which OpenAI clients read as
 *   an error, and nothing is saved.
 * - Choice 0 finishing with `error`, or carrying an `error` object whatever its finish (OpenRouter's report of a failure
 *   while generating; the JSON reply's test, messages/reply.ts `isFailedChoice`), fails the exchange too, with or
 *   without an error event: without one, the rest of the stream (other choices, the usage chunk, `[DONE]`) is relayed
 *   as it came, and nothing is saved. On a translated stream it ends the stream as an error event does.
 * - `[DONE]` is held back until `onComplete` (the memory save) has resolved, so a client that saw `[DONE]` (and choice
 *   0 neither finishing with `error` nor carrying an `error` object) knows the exchange is durable.
 */
import { once } from 'node:events'
import type { ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import { asGatewayError, gatewayError, toWire, type GatewayError } from '../errors.js'
import { ChunkReader } from '../upstream/chunk-reader.js'
import { choiceFailedError, transportError, upstreamHttpError } from '../upstream/errors.js'
import { SseEventTooLargeError, SseParser } from '../upstream/sse-parser.js'
import { isFailedChoice, ReplyAssembler } from '../messages/reply.js'
import { choiceDeltaOnly, contentDelta, type ContentDelta } from './content-delta.js'
import type { Bytes, ChatMessage, StreamFailureReason } from '../types.js'

export interface Usage {
  prompt_tokens?: number
  completion_tokens?: number
  total_tokens?: number
  /** OpenAI's (and OpenRouter's) prompt cache report: the prompt tokens served from the cache. */
  prompt_tokens_details?: { cached_tokens?: number }
}

export type StreamOutcome =
  | { kind: 'completed'; text: string; usage: Usage | undefined }
  | { kind: 'failed'; error: GatewayError | undefined; text: string; usage: Usage | undefined }
  | { kind: 'aborted' }

/** How a stream that did not complete is reported: the reason counted in /metrics, and the code and message logged. */
export interface StreamFailure {
  reason: StreamFailureReason
  /** The error registry code (or, for the upstream's own error event, the code an upstream 502 gets). */
  code: string
  /** Our message, when the failure is ours to describe (the upstream's own text may quote the request). */
  message: string | undefined
}

/**
 * The upstream reported its own failure (an error event, or choice 0 failing) and the client got it as it came: the code
 * an upstream 502 gets, and no message of ours. Also what a chat JSON reply whose choice 0 failed is reported as
 * (chat/handler.ts), relayed as it came with its 200 as a stream's failure is.
 */
export const UPSTREAM_REPORTED_FAILURE: StreamFailure = { reason: 'upstream_error', code: 'upstream_error', message: undefined }

/** The failure an outcome stands for, or undefined for a completed stream. */
export function streamFailure(outcome: StreamOutcome): StreamFailure | undefined {
  if (outcome.kind === 'completed') return undefined
  if (outcome.kind === 'aborted') return { reason: 'client_gone', code: 'client_closed_request', message: undefined }
  // No error of ours: the upstream sent its own error event, relayed to the client as it came.
  if (outcome.error === undefined) return UPSTREAM_REPORTED_FAILURE
  const e = outcome.error
  const message = e.fromUpstream ? undefined : e.message
  switch (e.code) {
    // transportError: the connection to the upstream failed after the stream began (reset, closed, socket error).
    case 'upstream_unreachable':
      return { reason: 'upstream_reset', code: e.code, message }
    // UPSTREAM_BODY_TIMEOUT_MS of silence between two chunks.
    case 'upstream_timeout':
      return { reason: 'upstream_timeout', code: e.code, message }
    // Not SSE or not JSON, an event over the size bound, or a body that ended before [DONE].
    case 'upstream_invalid_response':
      return { reason: 'upstream_invalid', code: e.code, message }
    // What is left is ours: saving the exchange (onComplete) failed.
    default:
      return { reason: 'internal', code: e.code, message }
  }
}

/** The client's departure (ClientGone, src/http/client-gone.ts): polled, and as an AbortSignal when waiting. */
export interface ClientDeparture {
  readonly aborted: boolean
  readonly signal: AbortSignal
}

export interface RelayOptions {
  upstream: Readable
  res: ServerResponse
  client: ClientDeparture
  /** JSON of `_metadata`, spliced into the first chunk. */
  metadataJson: string
  includeUsage: boolean
  maxEventBytes: Bytes
  /**
   * Whether `onComplete` saves anything (default true). When it does not, the events that came with `[DONE]` are
   * written together with it instead of on their own first.
   */
  saves?: boolean
  /**
   * Whether `onComplete` reads the reply (default true). When it does not (a chat that saves nothing), events after the
   * first output are relayed without capturing it: only the usage chunk and an error event are still told apart, and
   * the reply (and the outcome's `text`) hold the first output only.
   */
  needsReply?: boolean
  /** Runs after the upstream finished normally and before `[DONE]` is written. */
  onComplete: (reply: ChatMessage, usage: Usage | undefined) => Promise<void>
  /** First model output seen: text, a tool call, a refusal or reasoning (time to first token). */
  onFirstToken?: () => void
  /**
   * Another wire format for the client (the Responses API's events): each parsed upstream chunk is handed to it
   * instead of being relayed as it came. Absent on the chat path, which relays the upstream's bytes.
   */
  format?: StreamFormat
  /**
   * What the client gets before any upstream event (the Responses stream's opening events): it leaves with the first
   * events in one write, or on its own on the next turn of the event loop when the upstream has sent none yet.
   */
  prefix?: string
}

/**
 * What the client is sent when the relay translates (responses/stream-format.ts): the relay keeps the reading,
 * backpressure, client departure, timeouts and the save-before-the-last-byte order; the format only makes text.
 */
export interface StreamFormat {
  /** An upstream chunk (any: content, tool calls, the usage-only chunk) → what to send now ('' for nothing). */
  chunk(chunk: Record<string, unknown>): string
  /**
   * An event that is only a piece of text, not parsed (content-delta.ts): what to send now, or undefined when the
   * format needs the parsed chunk for it after all (then `chunk` gets it).
   */
  text?(piece: ContentDelta): string | undefined
  /** The upstream finished normally: what closes the open items, sent before the save. */
  finishing(): string
  /** Sent after the save resolved, then the response ends. */
  done(): string
  /** The stream failed (the upstream's error chunk, converted, or ours): what to send before ending it. */
  failure(error: GatewayError): string
}

interface ChoiceShape {
  index?: unknown
  delta?: unknown
  finish_reason?: unknown
  error?: unknown
}

interface ChunkShape {
  choices?: ChoiceShape[]
  usage?: Usage
  error?: unknown
}

export const SSE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  // Tell nginx-style proxies in front of us not to buffer the stream.
  'x-accel-buffering': 'no',
}

export async function relayStream(o: RelayOptions): Promise<StreamOutcome> {
  const timers: RelayTimers = { headersAlone: undefined }
  try {
    return await relay(o, timers)
  } finally {
    clearImmediate(timers.headersAlone)
  }
}

/** What `relay` leaves running for `relayStream` to stop, however the relay ends. */
interface RelayTimers {
  headersAlone: NodeJS.Immediate | undefined
}

async function relay(o: RelayOptions, timers: RelayTimers): Promise<StreamOutcome> {
  const { res } = o
  const reply = new ReplyAssembler()
  let usage: Usage | undefined
  let metadataSent = false
  let done = false
  let upstreamError = false
  /**
   * Choice 0 failed (finished with `error`, or carried an `error` object) and no error event came (an event's `"error"`
   * or `error":` sends it to the parse, content-delta.ts): the exchange failed. Relayed on to the end as it came, unlike
   * an error event, after which nothing more is read.
   */
  let choiceFailed = false
  let out = o.prefix ?? ''
  let wrote = false
  const format = o.format
  /** Relayed as they came once the first output is seen, uncaptured (see `needsReply`). */
  const relayOnly = format === undefined && o.needsReply === false
  /** Writes what is ready now, without waiting for `drain` (the next flush waits if this one filled the buffer). */
  const writeNow = (): void => {
    wrote = true
    if (out === '') res.flushHeaders()
    else res.write(out)
    out = ''
  }
  // The response headers (written by the caller) leave with the first event, in the same write: one syscall fewer per
  // stream. Profiled on the plain relay (bench/relay.ts, serial streams), flushing them on their own was 9 % of the
  // gateway's time per stream. An upstream that has sent no event yet still gets them (and the prefix) out on the next
  // turn of the event loop, so a client waiting for the headers is not kept waiting on the model.
  timers.headersAlone = setImmediate(() => {
    if (!wrote && !res.writableEnded && !res.destroyed) writeNow()
  })
  /** The upstream's error chunk, converted, for a format that reports failures its own way. */
  let formatError: GatewayError | undefined

  const parser = new SseParser({
    maxEventBytes: o.maxEventBytes,
    onComment: (text) => {
      out += `: ${text}\n\n`
    },
    onEvent: (e) => {
      if (done) return
      if (e.data === '[DONE]') {
        done = true
        return
      }
      // What is written back: the data as it came, its lines (rare: every provider sends one) each a `data:` line again.
      const wire = e.multiline === true ? e.data.replaceAll('\n', '\ndata: ') : e.data
      // With nobody to read the reply, an event after the first output needs no capture: a scan tells the usage chunk
      // and an error apart from everything relayed as it came. Measured: see docs/benchmarks.md, "Relay and Responses
      // CPU, 2026-11-27".
      if (relayOnly && reply.pieces > 0 && choiceDeltaOnly(e.data)) {
        out += `data: ${wire}\n\n`
        return
      }
      // Most events are one piece of text: captured without a parse (content-delta.ts), relayed as they came. The
      // first event is parsed whole all the same (it carries `_metadata`, and a malformed stream shows there).
      if (metadataSent || format !== undefined) {
        const piece = contentDelta(e.data)
        if (piece !== undefined) {
          const text = format?.text?.(piece)
          if (format === undefined || text !== undefined) {
            const first = reply.pushContent(piece.text) && reply.pieces === 1
            out += text ?? `data: ${wire}\n\n`
            if (first) {
              o.onFirstToken?.()
              // As below: a translated stream's first output leaves at once.
              if (format !== undefined) writeNow()
            }
            return
          }
        }
      }
      let chunk: ChunkShape
      try {
        chunk = JSON.parse(e.data) as ChunkShape
      } catch (err) {
        throw gatewayError('upstream_invalid_response', { message: 'The upstream sent an SSE event that is not JSON', cause: err })
      }
      if (chunk === null || typeof chunk !== 'object') {
        throw gatewayError('upstream_invalid_response', { message: 'The upstream sent an SSE event that is not an object' })
      }
      if (format !== undefined) {
        if (chunk.error !== undefined) {
          upstreamError = true
          formatError = upstreamHttpError(200, e.data)
          return
        }
        if (chunk.usage) usage = chunk.usage
        const zero = choiceZero(chunk.choices)
        if (zero !== undefined && !choiceFailed && isFailedChoice(zero)) {
          choiceFailed = true
          formatError = choiceFailedError(zero)
        }
        const delta = zero?.delta
        const first = delta !== undefined && reply.push(delta) && reply.pieces === 1
        out += format.chunk(chunk as Record<string, unknown>)
        if (first) {
          o.onFirstToken?.()
          // The first output leaves at once, not after the rest of this network chunk's events are translated (an
          // upstream that sends several events in one packet would otherwise hold the first text behind them all).
          writeNow()
        }
        return
      }
      if (chunk.error !== undefined) {
        upstreamError = true
        out += `data: ${wire}\n\n`
        return
      }
      const choices = chunk.choices
      if (Array.isArray(choices) && choices.length === 0) {
        if (chunk.usage) usage = chunk.usage
        if (o.includeUsage) out += `data: ${wire}\n\n`
        return
      }
      if (chunk.usage) usage = chunk.usage
      const zero = choiceZero(choices)
      if (isFailedChoice(zero)) choiceFailed = true
      const delta = zero?.delta
      if (delta !== undefined && reply.push(delta) && reply.pieces === 1) o.onFirstToken?.()
      if (!metadataSent) {
        metadataSent = true
        out += `data: ${spliceMetadata(wire, o.metadataJson)}\n\n`
        // The first event leaves at once with the headers (time to first chunk), not after the rest of its network
        // chunk: an upstream that sends many events in one packet would otherwise hold it behind all of them.
        writeNow()
      } else {
        out += `data: ${wire}\n\n`
      }
    },
  })

  const flush = async (): Promise<void> => {
    if (out === '') return
    wrote = true
    const ok = res.write(out)
    out = ''
    if (!ok && !res.destroyed) await once(res, 'drain', { signal: o.client.signal })
  }

  const fail = async (error: GatewayError | undefined): Promise<StreamOutcome> => {
    o.upstream.destroy()
    if (format !== undefined) {
      const reported = error ?? formatError
      if (reported !== undefined && !res.destroyed) out += format.failure(reported)
    } else if (error !== undefined && !res.destroyed) out += `data: ${JSON.stringify(toWire(error))}\n\n`
    if (!res.destroyed) {
      // A client that stops reading while we report the failure must not hold the request open.
      await flush().catch(() => undefined)
      res.end()
    }
    return { kind: 'failed', error, text: reply.text, usage }
  }

  const reader = new ChunkReader(o.upstream)

  /** Choice 0 failed, no error event: the relay ends as the upstream's stream did (see `choiceFailed`). */
  const relayedFailure = (): StreamOutcome => {
    reader.release()
    res.end(done ? `${out}data: [DONE]\n\n` : out)
    return { kind: 'failed', error: undefined, text: reply.text, usage }
  }

  /** The stream reached [DONE]: `onComplete` (the save), then [DONE] to the client. */
  const complete = async (): Promise<StreamOutcome> => {
    // Not destroy(): the body's end normally came with [DONE], and a body let go of cleanly costs no error (see
    // ChunkReader). Then, with nothing awaited but onComplete, [DONE] leaves in the same write as the last events.
    reader.release()
    const text = reply.text
    if (format !== undefined) out += format.finishing()
    try {
      await o.onComplete(reply.message(), usage)
    } catch (err) {
      return fail(asGatewayError(err))
    }
    if (o.client.aborted) return { kind: 'aborted' }
    res.end(format === undefined ? `${out}data: [DONE]\n\n` : out + format.done())
    return { kind: 'completed', text, usage }
  }

  try {
    for (let chunk = await reader.next(); chunk !== null; chunk = await reader.next()) {
      parser.push(chunk)
      // With no save between them, the last events and [DONE] leave in one write: a syscall fewer per stream (the
      // stream profile showed twice the floor's writes, docs/benchmarks.md). With a save, they are not held back for it.
      if (done && o.saves === false) break
      await flush()
      if (done || upstreamError) break
    }
  } catch (err) {
    if (o.client.aborted) {
      o.upstream.destroy()
      return { kind: 'aborted' }
    }
    if (err instanceof SseEventTooLargeError) {
      return fail(gatewayError('upstream_invalid_response', { message: err.message, cause: err }))
    }
    return fail(isGatewayError(err) ? err : transportError(err))
  }
  if (o.client.aborted) return { kind: 'aborted' }
  // A translated stream ends with the failure's events (formatError), as after an error event.
  if (upstreamError || (choiceFailed && format !== undefined)) return fail(undefined)
  if (choiceFailed) return relayedFailure()
  if (!done) {
    return fail(gatewayError('upstream_invalid_response', { message: 'The upstream stream ended before [DONE]' }))
  }
  return complete()
}

/**
 * Choice 0 in an event. With `n` > 1 the upstream streams each choice in events of its own, told apart by `index`: the
 * reply kept for memory is choice 0's (as a JSON reply's `choices[0]`), never the choices run together, and it is choice
 * 0 failing that fails the exchange (as a JSON reply's, messages/reply.ts `generationFailed`).
 */
function choiceZero(choices: ChunkShape['choices']): ChoiceShape | undefined {
  if (!Array.isArray(choices)) return undefined
  for (const c of choices) if (c !== null && typeof c === 'object' && (c.index === undefined || c.index === 0)) return c
  return undefined
}

function isGatewayError(err: unknown): err is GatewayError {
  return err instanceof Error && err.name === 'GatewayError'
}

/**
 * Add `_metadata` to a JSON object's text without re-serialising it: `{...}` → `{...,"_metadata":{...}}`. `data` must
 * be the text of a JSON object (trailing whitespace allowed); anything without a `}` comes back unchanged.
 */
export function spliceMetadata(data: string, metadataJson: string): string {
  const end = data.lastIndexOf('}')
  if (end === -1) return data
  const body = data.slice(0, end).trimEnd()
  const sep = body.endsWith('{') ? '' : ','
  return `${body}${sep}"_metadata":${metadataJson}}`
}
