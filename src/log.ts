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
import type { Ms, Plan, Tokens } from './types.js'

export interface LogOptions {
  /** pino level name: fatal, error, warn, info, debug, trace or silent (validated by config as LOG_LEVEL). */
  level: string
  /** Where lines go; tests capture logs here. Default: stdout through an asynchronous sonic-boom destination. */
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
  const destination = o.destination ?? pino.destination({ dest: 1, sync: false })
  return pino(options, destination)
}

/** What the request handler knows when a response has finished. */
export interface RequestLogInput {
  requestId: string
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
  /** The error registry code when the response is an error. */
  errorCode?: string
}

/** The flat object logged once per request. Field names are the documented log format (docs/operations.md). */
export interface RequestLogRecord {
  reqId: string
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
  errorCode?: string
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
  if (i.model !== undefined) r.model = i.model
  if (i.stream !== undefined) r.stream = i.stream
  if (i.upstreamMs !== undefined) {
    r.upstreamMs = round(i.upstreamMs)
    r.overheadMs = round(Math.max(0, i.durationMs - i.upstreamMs))
  }
  if (i.ttftMs !== undefined) r.ttftMs = round(i.ttftMs)
  if (i.promptTokens !== undefined) r.promptTokens = i.promptTokens
  if (i.completionTokens !== undefined) r.completionTokens = i.completionTokens
  if (i.errorCode !== undefined) r.errorCode = i.errorCode
  return r
}

/** Server faults are errors; everything a client caused (4xx) is normal traffic and logs at info. */
export function requestLogLevel(status: number): 'info' | 'error' {
  return status >= 500 ? 'error' : 'info'
}

/**
 * The request line goes through a child logger without redaction. Redaction walks every configured path, wildcards
 * included, on every line: profiled at 126 µs of the 157 µs a request line cost, 21% of the gateway's CPU on the plain
 * relay (bench/relay.ts), and one line per request is the hottest logging there is. It is safe to skip here by
 * construction, not by hope: `requestLogFields` copies a fixed set of scalar fields (ids, route, status, timings,
 * token counts), none of which can hold a header or a key. Every other log call keeps the configured redaction.
 */
const unredacted = new WeakMap<Logger, Logger>()

/** Write the one line for a finished request. */
export function logRequest(logger: Logger, i: RequestLogInput): void {
  let plain = unredacted.get(logger)
  if (plain === undefined) {
    plain = logger.child({}, { redact: { paths: [] } })
    unredacted.set(logger, plain)
  }
  plain[requestLogLevel(i.status)](requestLogFields(i), 'request')
}
