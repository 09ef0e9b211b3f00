/**
 * The gateway's logger: pino, JSON lines, one line per request plus lifecycle events.
 *
 * Secrets are removed by configuration, not by hope: `REDACT_PATHS` lists every place a provider key or service key
 * can appear in a logged object (request headers under any casing we produce, and any property named like a key),
 * and pino replaces those values before the line is serialized. Code should still never put a key in a message
 * string — redaction applies to object properties only — and request records carry the tenant id, never the key
 * (`requestLogFields` has no parameter that could hold one).
 */
import pino from 'pino'
import { jsonNumber } from './json-text.js'
import type { Ms, Plan, Tokens } from './types.js'

// Through a constant of this module: range-cache.ts `charCodeAt` says why.
const charCodeAt = String.prototype.charCodeAt

export interface LogOptions {
  /** pino level name: fatal, error, warn, info, debug, trace or silent (validated by config as LOG_LEVEL). */
  level: string
  /**
   * Where lines go; tests capture logs here, every line as it is logged. Default: stdout through an asynchronous
   * sonic-boom destination, request lines batched (see `RequestLineBatcher`).
   */
  destination?: NodeJS.WritableStream
}

export type Logger = pino.Logger

const SECRET_HEADERS = [
  'authorization',
  'Authorization',
  'proxy-authorization',
  'servicekey',
  'serviceKey',
  'ServiceKey',
  'x-service-key',
  'X-Service-Key',
  'x-api-key',
  'api-key',
  'cookie',
  'set-cookie',
]
/** Objects that carry headers: node's `req`/`res` (serialized), upstream calls, and bare `headers`. */
const HEADER_HOLDERS = ['req.headers', 'res.headers', 'headers', 'upstream.headers', 'request.headers', '*.headers']
/** Property names that hold a secret wherever they appear (top level or one object down). */
const SECRET_PROPS = [
  'authorization',
  'apiKey',
  'api_key',
  'serviceKey',
  'service_key',
  'providerKey',
  'embeddingsApiKey',
  'key',
  'rawKey',
  'password',
  'token',
]

/** Every path pino redacts. Exported so docs and tests can list them. */
export const REDACT_PATHS: readonly string[] = [
  ...HEADER_HOLDERS.flatMap((holder) => SECRET_HEADERS.map((h) => `${holder}[${JSON.stringify(h)}]`)),
  ...SECRET_PROPS.flatMap((p) => [p, `*.${p}`]),
]

export const REDACTED = '[Redacted]'

export function createLogger(o: LogOptions): Logger {
  const options: pino.LoggerOptions = {
    level: o.level,
    redact: { paths: [...REDACT_PATHS], censor: REDACTED },
    // Level names instead of numbers and ISO times: the lines are read by people and by log shippers that expect
    // both, and the cost is a few hundred nanoseconds per line.
    formatters: { level: (label) => ({ level: label }) },
    timestamp: pino.stdTimeFunctions.isoTime,
    // A raw IncomingMessage/ServerResponse must never be stringified whole (sockets, buffers); these pick the fields.
    serializers: { req: pino.stdSerializers.req, res: pino.stdSerializers.res, err: pino.stdSerializers.err },
  }
  // Asynchronous stdout: a blocked pipe (slow log shipper) must not stall requests. pino flushes it on exit.
  const destination = o.destination ?? new RequestLineBatcher(pino.destination({ dest: 1, sync: false }))
  const logger = pino(options, destination)
  // pino's serialized bindings (its default `base`: pid and hostname), as it puts them on every line.
  const bindings = (logger as unknown as Record<symbol, unknown>)[pino.symbols.chindingsSym]
  if (typeof bindings === 'string') lineFormats.set(logger, { destination, bindings })
  return logger
}

/** What the request handler knows when a response has finished. */
export interface RequestLogInput {
  requestId: string
  /** The id the client sent (`x-client-request-id` or `x-request-id`), never used as ours. */
  clientRequestId?: string
  /** Null when the request never authenticated (401, /healthz, /metrics). */
  tenantId: string | null
  plan: Plan | null
  method: string
  /** The route template ('/api/v1/sessions/:id'), not the raw path, so ids do not leak into aggregations. */
  route: string
  status: number
  model?: string
  stream?: boolean
  durationMs: Ms
  /** Time spent waiting on the upstream, headers to last byte. */
  upstreamMs?: Ms
  /** Time from sending the upstream request to its first content token (streams). */
  ttftMs?: Ms
  promptTokens?: Tokens
  completionTokens?: Tokens
  /** Prompt tokens the provider served from its cache. */
  cachedTokens?: Tokens
  /** Why a streamed reply that began (status 200) did not complete (types.ts STREAM_FAILURE_REASONS). */
  streamFailure?: string
  /** The error registry code when the response is an error, or a begun stream failed. */
  errorCode?: string
  /** The field the error names, and our message (never the upstream's: it may quote the request). */
  errorParam?: string
  errorMessage?: string
}

/** The flat object logged once per request. Field names are the documented log format (docs/operations.md). */
export interface RequestLogRecord {
  reqId: string
  clientRequestId?: string
  tenant: string | null
  plan: Plan | null
  method: string
  route: string
  status: number
  model?: string
  stream?: boolean
  durationMs: number
  upstreamMs?: number
  /** The gateway's own time: durationMs − upstreamMs. */
  overheadMs?: number
  ttftMs?: number
  promptTokens?: number
  completionTokens?: number
  cachedTokens?: number
  streamFailure?: string
  errorCode?: string
  errorParam?: string
  errorMessage?: string
}

/** Microsecond precision is all a timing needs; full doubles make every line ~40 bytes longer. */
const round = (ms: number): number => Math.round(ms * 1000) / 1000

export function requestLogFields(i: RequestLogInput): RequestLogRecord {
  const r: RequestLogRecord = {
    reqId: i.requestId,
    tenant: i.tenantId,
    plan: i.plan,
    method: i.method,
    route: i.route,
    status: i.status,
    durationMs: round(i.durationMs),
  }
  if (i.clientRequestId !== undefined) r.clientRequestId = i.clientRequestId
  if (i.model !== undefined) r.model = i.model
  if (i.stream !== undefined) r.stream = i.stream
  if (i.upstreamMs !== undefined) {
    r.upstreamMs = round(i.upstreamMs)
    r.overheadMs = round(Math.max(0, i.durationMs - i.upstreamMs))
  }
  if (i.ttftMs !== undefined) r.ttftMs = round(i.ttftMs)
  if (i.promptTokens !== undefined) r.promptTokens = i.promptTokens
  if (i.completionTokens !== undefined) r.completionTokens = i.completionTokens
  if (i.cachedTokens !== undefined) r.cachedTokens = i.cachedTokens
  if (i.streamFailure !== undefined) r.streamFailure = i.streamFailure
  if (i.errorCode !== undefined) r.errorCode = i.errorCode
  if (i.errorParam !== undefined) r.errorParam = i.errorParam
  if (i.errorMessage !== undefined) r.errorMessage = boundedMessage(i.errorMessage)
  return r
}

/** Bounded: a message may name a value the client sent (a file id); our messages never carry content or keys. */
function boundedMessage(m: string): string {
  return m.length > 300 ? `${m.slice(0, 299)}…` : m
}

/**
 * Server faults are errors; everything a client caused (4xx) is normal traffic and logs at info. A stream that failed
 * after its 200 is a fault too, unless it was the client that left.
 */
export function requestLogLevel(status: number, streamFailure?: string): 'info' | 'error' {
  return status >= 500 || (streamFailure !== undefined && streamFailure !== 'client_gone') ? 'error' : 'info'
}

/**
 * The request line is serialized here, in the format pino gives every line of a `createLogger` logger (level label,
 * ISO time, pid, hostname, the fields, "msg"), and written straight to its destination: byte for byte what
 * `logger.info(requestLogFields(i), 'request')` writes (test/request-line.test.ts compares them).
 *
 * Why not through pino: the line is the hottest logging there is, one per request. Going through pino with
 * redaction was profiled at 157 µs of a request's CPU (21 %) on the plain relay (bench/relay.ts), 126 µs of them in
 * the redaction paths; without redaction (a child logger) it still cost 51 of the 980 µs a request cost the gateway at
 * 32 connections (profiler time), in pino's generic property loop, serializer lookups and an ISO date per line.
 * Skipping redaction is safe by construction, not by hope: `requestLogFields` copies a fixed set of scalar fields (ids,
 * route, status, timings, token counts), none of which can hold a header or a key. Every other log call keeps the
 * configured redaction. A logger that `createLogger` did not make (no format known) goes through pino, unredacted.
 */
interface LineFormat {
  destination: { write(line: string): unknown }
  /** `,"pid":…,"hostname":…` */
  bindings: string
}
const lineFormats = new WeakMap<Logger, LineFormat>()
const unredacted = new WeakMap<Logger, Logger>()

/** Write the one line for a finished request. */
export function logRequest(logger: Logger, i: RequestLogInput): void {
  const level = requestLogLevel(i.status, i.streamFailure)
  const format = lineFormats.get(logger)
  if (format === undefined) {
    let plain = unredacted.get(logger)
    if (plain === undefined) {
      plain = logger.child({}, { redact: { paths: [] } })
      unredacted.set(logger, plain)
    }
    plain[level](requestLogFields(i), 'request')
    return
  }
  if (!logger.isLevelEnabled(level)) return
  // Batched: the line is written out with its batch (one tight loop a batch, not one cold call a request).
  if (format.destination instanceof RequestLineBatcher) format.destination.requestLater({ input: i, level, timeMs: Date.now(), bindings: format.bindings })
  else format.destination.write(requestLine({ input: i, level, timeMs: Date.now(), bindings: format.bindings }))
}

/** A request line's parts, formatted by `requestLine` when its batch is handed over. */
interface LateLine {
  input: RequestLogInput
  level: 'info' | 'error'
  /** When it was logged (epoch ms): the line's `time`. */
  timeMs: number
  /** `,"pid":…,"hostname":…` */
  bindings: string
}

function requestLine(l: LateLine): string {
  const i = l.input
  // Field by field, in `requestLogFields`' order, with no record object in between: a loop over the record's keys
  // read every field through a megamorphic keyed load and boxed every number through String(). Measured with the
  // request-done work switched off piece by piece (parallel A/B of gateway CPU per request, 32 connections): the log
  // line was ~3 % of a plain relayed request's CPU.
  let line = `{"level":"${l.level}","time":"${isoAt(l.timeMs)}"${l.bindings},"reqId":${jsonString(i.requestId)}`
  line += `,"tenant":${i.tenantId === null ? 'null' : jsonString(i.tenantId)},"plan":${i.plan === null ? 'null' : jsonString(i.plan)}`
  line += `,"method":${jsonString(i.method)},"route":${jsonString(i.route)},"status":${jsonNumber(i.status)},"durationMs":${jsonNumber(round(i.durationMs))}`
  if (i.clientRequestId !== undefined) line += `,"clientRequestId":${jsonString(i.clientRequestId)}`
  if (i.model !== undefined) line += `,"model":${jsonString(i.model)}`
  if (i.stream !== undefined) line += i.stream ? ',"stream":true' : ',"stream":false'
  if (i.upstreamMs !== undefined) line += `,"upstreamMs":${jsonNumber(round(i.upstreamMs))},"overheadMs":${jsonNumber(round(Math.max(0, i.durationMs - i.upstreamMs)))}`
  if (i.ttftMs !== undefined) line += `,"ttftMs":${jsonNumber(round(i.ttftMs))}`
  if (i.promptTokens !== undefined) line += `,"promptTokens":${jsonNumber(i.promptTokens)}`
  if (i.completionTokens !== undefined) line += `,"completionTokens":${jsonNumber(i.completionTokens)}`
  if (i.cachedTokens !== undefined) line += `,"cachedTokens":${jsonNumber(i.cachedTokens)}`
  if (i.streamFailure !== undefined) line += `,"streamFailure":${jsonString(i.streamFailure)}`
  if (i.errorCode !== undefined) line += `,"errorCode":${jsonString(i.errorCode)}`
  if (i.errorParam !== undefined) line += `,"errorParam":${jsonString(i.errorParam)}`
  if (i.errorMessage !== undefined) line += `,"errorMessage":${jsonString(boundedMessage(i.errorMessage))}`
  line += ',"msg":"request"}\n'
  return line
}

/**
 * pino's `stdTimeFunctions.isoTime` value (`new Date(now).toISOString()`), with the part up to the seconds made once
 * a second: `toISOString` measured 1.6 µs a call here (Node 20, the 2-core dev machine), 14 of the 1,220 µs a request
 * cost the gateway at 32 connections (profiler time).
 */
let isoSecond = NaN
let isoPrefix = ''
function isoAt(now: number): string {
  const second = Math.floor(now / 1000)
  if (second !== isoSecond) {
    isoSecond = second
    isoPrefix = new Date(second * 1000).toISOString().slice(0, 20)
  }
  const ms = now - second * 1000
  return `${isoPrefix}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z`
}

/** A JSON string literal exactly as pino writes it (its `asString`): quotes and backslashes escaped in short strings. */
function jsonString(s: string): string {
  if (s.length > 100) return JSON.stringify(s)
  let out = ''
  let last = 0
  let found = false
  for (let i = 0; i < s.length; i++) {
    const c = charCodeAt.call(s, i)
    if (c < 32) return JSON.stringify(s)
    if (c === 34 || c === 92) {
      out += `${s.slice(last, i)}\\`
      last = i
      found = true
    }
  }
  return `"${found ? out + s.slice(last) : s}"`
}

/** What RequestLineBatcher needs of a sonic-boom destination. */
interface LineSink {
  write(data: string): boolean
  flush(cb?: (err?: Error) => void): void
  flushSync(): void
}

export interface BatcherOptions {
  /** Hand the batch over once it holds this many characters. Default 65,536 (≈ 200 request lines). */
  maxChars?: number
  /** … or this long after its first line. Default 100 ms. */
  maxDelayMs?: Ms
  /** Timer functions (tests inject their own). Default setTimeout (unref'd) / clearTimeout. */
  timers?: { set(fn: () => void, ms: Ms): unknown; clear(handle: unknown): void }
}

/** What a request line is taken to hold until it is formatted (they are ≈ 330–450 characters). */
const LATE_LINE_CHARS = 320

const realTimers = {
  // unref: a pending batch must not keep a stopping process alive (the exit handler writes it).
  set: (fn: () => void, ms: Ms): unknown => setTimeout(fn, ms).unref(),
  clear: (handle: unknown): void => clearTimeout(handle as NodeJS.Timeout),
}

/**
 * Request lines are handed to the destination in batches; every other line (lifecycle, warnings, errors) goes out at
 * once, after any request lines batched before it, so order is kept and "recallgate listening" is seen immediately.
 *
 * Why: each hand-over to the asynchronous destination is one `fs.write` on libuv's thread pool, i.e. a cross-thread
 * wakeup per request on a machine where those are dear. Profiled on the plain relay (bench/relay.ts, 2 shared vCPUs):
 * the log write was 100 µs of the 1,150 µs a serial request cost the gateway's main thread (`writeString`, 9 %), and
 * 38 µs of 754 µs at 32 connections. Batched, it is one write per ≈ 200 lines, or per `maxDelayMs` at lower rates.
 * 64 KB batches against 4 KB ones (≈ 12 lines): gateway CPU per request at 32 connections 0.958× and 0.935× (two runs
 * of 10–12 rounds, one server driven at a time), where requests logged at `warn` (no request lines at all) read 0.921×:
 * each hand-over is two cross-thread wakeups (the write's, and its completion's), which cost far more than the write.
 *
 * Bounds: a batch is handed over when it reaches `maxChars` or `maxDelayMs` after its first line, whichever comes
 * first, so a quiet server's last request lines appear within `maxDelayMs`. On exit the batch is written
 * synchronously; what a `kill -9` loses is at most one batch of request lines, the last `maxDelayMs` of them (never
 * a lifecycle or error line).
 */
export class RequestLineBatcher {
  readonly #sink: LineSink
  readonly #maxChars: number
  readonly #maxDelayMs: Ms
  readonly #timers: NonNullable<BatcherOptions['timers']>
  #batch = ''
  /** Request lines logged since the last hand-over, not formatted yet (`requestLater`). */
  #late: LateLine[] = []
  #timer: unknown

  constructor(sink: LineSink, o: BatcherOptions = {}) {
    this.#sink = sink
    this.#maxChars = o.maxChars ?? 65_536
    this.#maxDelayMs = o.maxDelayMs ?? 100
    this.#timers = o.timers ?? realTimers
    liveBatchers.add(new WeakRef(this))
  }

  /** Any line but a request line: goes out now, after the batch. */
  write(line: string): boolean {
    this.#handOver()
    return this.#sink.write(line)
  }

  /** A request line: batched. */
  request(line: string): boolean {
    this.#formatLate()
    this.#batch += line
    if (this.#batch.length >= this.#maxChars) this.#handOver()
    else this.#timer ??= this.#timers.set(() => this.#handOver(), this.#maxDelayMs)
    return true
  }

  /**
   * A request line's parts (`logRequest`): formatted with the rest of its batch when the batch is handed over, one
   * tight loop over ≈ 200 lines instead of one call on every request's cold path (formatting a line costs 0.6 µs in a
   * loop, where request lines as a whole were ≈ 10 % of a plain relayed request's CPU, 11 µs at 32 connections:
   * `LOG_LEVEL=warn` read 0.896×; formatted late, 0.966×, 0.986× and 0.974× the CPU per request, three runs;
   * docs/benchmarks.md, "Thirteenth round"). A `LATE_LINE_CHARS` estimate of each line counts toward `maxChars`.
   */
  requestLater(l: LateLine): boolean {
    const n = this.#late.push(l)
    if (this.#batch.length + n * LATE_LINE_CHARS >= this.#maxChars) this.#handOver()
    else this.#timer ??= this.#timers.set(() => this.#handOver(), this.#maxDelayMs)
    return true
  }

  #formatLate(): void {
    if (this.#late.length === 0) return
    const late = this.#late
    this.#late = []
    for (const l of late) {
      try {
        this.#batch += requestLine(l)
      } catch {
        // Formatted on a timer or inside another write, outside the request's bookkeeping and its error handling: a
        // record that cannot be formatted (a field of the wrong type) loses its line, not the process or the batch.
      }
    }
  }

  /** pino's `logger.flush(cb)`. */
  flush(cb?: (err?: Error) => void): void {
    this.#handOver()
    this.#sink.flush(cb)
  }

  flushSync(): void {
    this.#handOver()
    this.#sink.flushSync()
  }

  #handOver(): void {
    if (this.#timer !== undefined) {
      this.#timers.clear(this.#timer)
      this.#timer = undefined
    }
    this.#formatLate()
    if (this.#batch === '') return
    const batch = this.#batch
    this.#batch = ''
    this.#sink.write(batch)
  }
}

/**
 * One set of exit handlers for every batcher (a listener per logger would pile up in processes that start many
 * gateways). Registered when this module loads, so before pino's own handlers for its destinations (which flush and
 * end them on `beforeExit`, and flush them synchronously on `exit`): the batch reaches the destination first.
 */
const liveBatchers = new Set<WeakRef<RequestLineBatcher>>()
const handOverAll = (sync: boolean): void => {
  for (const ref of liveBatchers) {
    const b = ref.deref()
    if (b === undefined) {
      liveBatchers.delete(ref)
      continue
    }
    try {
      if (sync) b.flushSync()
      else b.flush()
    } catch {
      // Exiting: a destination that can no longer be written (closed pipe) has nowhere to report to.
    }
  }
}
process.on('beforeExit', () => handOverAll(false))
process.once('exit', () => handOverAll(true))
