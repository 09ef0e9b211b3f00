/**
 * The one error registry. Every error the gateway returns is a `GatewayError` with a stable `code`, an HTTP status
 * and an OpenAI error `type`; `toWire` is the only place that turns one into the response body.
 * Upstream errors are converted into the same shape in `upstream/errors.ts`.
 */

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'api_error'
  | 'upstream_error'
  | 'timeout_error'
  | 'insufficient_quota'

export interface WireError {
  error: { message: string; type: string; param: string | null; code: string | null }
}

export class GatewayError extends Error {
  readonly status: number
  readonly type: string
  readonly code: string
  readonly param: string | null
  /** Extra response headers this error needs (Retry-After for 429, Allow for 405). */
  readonly headers: Record<string, string>
  /** The upstream's own error relayed: its message is the provider's text, which may quote the request (never logged). */
  readonly fromUpstream: boolean

  constructor(opts: {
    status: number
    type: string
    code: string
    message: string
    param?: string | null
    headers?: Record<string, string>
    cause?: unknown
    fromUpstream?: boolean
  }) {
    super(opts.message, opts.cause === undefined ? undefined : { cause: opts.cause })
    this.name = 'GatewayError'
    this.status = opts.status
    this.type = opts.type
    this.code = opts.code
    this.param = opts.param ?? null
    this.headers = opts.headers ?? {}
    this.fromUpstream = opts.fromUpstream ?? false
  }
}

interface Def {
  status: number
  type: ErrorType
  /** Default message; most factories take a specific one. */
  message: string
}

/**
 * Every code the gateway itself emits. The README's error table is checked against this list by a test, so a code
 * cannot be added without being documented.
 */
export const ERROR_CODES = {
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'Request body is not valid JSON' },
  invalid_parameter: { status: 400, type: 'invalid_request_error', message: 'Invalid parameter' },
  missing_parameter: { status: 400, type: 'invalid_request_error', message: 'Missing required parameter' },
  context_length_exceeded: {
    status: 400,
    type: 'invalid_request_error',
    message: "The request's messages and reply reserve do not fit the model's context window",
  },
  empty_file: { status: 400, type: 'invalid_request_error', message: 'The file has no extractable text' },
  embedder_mismatch: {
    status: 400,
    type: 'invalid_request_error',
    message: 'This knowledge base was indexed with a different embedder',
  },
  missing_service_key: {
    status: 401,
    type: 'authentication_error',
    message: 'Missing service key: send it in the `serviceKey` header',
  },
  invalid_service_key: { status: 401, type: 'authentication_error', message: 'Invalid service key' },
  missing_provider_key: {
    status: 401,
    type: 'authentication_error',
    message: 'Missing provider API key: send `Authorization: Bearer <key>`',
  },
  invalid_metrics_token: {
    status: 401,
    type: 'authentication_error',
    message: 'GET /metrics needs `Authorization: Bearer <METRICS_TOKEN>`',
  },
  not_found: { status: 404, type: 'not_found_error', message: 'Not found' },
  // OpenAI's code for GET /models/{id} with an id it does not list.
  model_not_found: { status: 404, type: 'not_found_error', message: 'The model does not exist' },
  // OpenAI's code and status for a `previous_response_id` that names no stored response of this tenant.
  previous_response_not_found: { status: 400, type: 'invalid_request_error', message: 'Previous response not found' },
  malformed_request: { status: 400, type: 'invalid_request_error', message: 'The request is not valid HTTP/1.1' },
  method_not_allowed: { status: 405, type: 'invalid_request_error', message: 'Method not allowed' },
  request_timeout: { status: 408, type: 'invalid_request_error', message: 'The request was not received in time' },
  payload_too_large: { status: 413, type: 'invalid_request_error', message: 'Request body too large' },
  extraction_limit_exceeded: {
    status: 422,
    type: 'invalid_request_error',
    message: 'The file is over an extraction limit',
  },
  unsupported_media_type: { status: 415, type: 'invalid_request_error', message: 'Unsupported content type' },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error', message: 'Rate limit exceeded' },
  // 403, not OpenAI's 429 for its billing quota: a stored-data quota does not refill with time, and the SDKs retry a
  // 429 by themselves (twice, with backoff) where they pass a 403 straight to the caller. The message names the quota,
  // its limit and what is in use (quotas/quota-error.ts).
  quota_exceeded: { status: 403, type: 'insufficient_quota', message: "Your plan's storage quota is used up" },
  headers_too_large: { status: 431, type: 'invalid_request_error', message: 'Request headers too large' },
  // nginx's convention for a client that left before its response: only ever seen in logs and metrics.
  client_closed_request: { status: 499, type: 'invalid_request_error', message: 'The client closed the request' },
  internal_error: { status: 500, type: 'api_error', message: 'Internal server error' },
  upstream_unreachable: { status: 502, type: 'upstream_error', message: 'The upstream provider could not be reached' },
  upstream_invalid_response: {
    status: 502,
    type: 'upstream_error',
    message: 'The upstream provider sent an invalid response',
  },
  upstream_timeout: { status: 504, type: 'timeout_error', message: 'The upstream provider did not answer in time' },
  shutting_down: { status: 503, type: 'api_error', message: 'The gateway is shutting down' },
  insufficient_storage: {
    status: 507,
    type: 'api_error',
    message: "The gateway's storage is full: nothing was saved. Reads and chats without memory still work",
  },
  storage_unavailable: { status: 503, type: 'api_error', message: "The gateway's storage cannot write right now: nothing was saved" },
  database_unavailable: {
    status: 503,
    type: 'api_error',
    message: 'The database cannot be reached right now; nothing was saved. Retry shortly',
  },
  rate_limit_unavailable: {
    status: 503,
    type: 'api_error',
    message: 'The shared rate-limit store cannot be reached and RATE_LIMIT_ON_STORE_ERROR is deny',
  },
} as const satisfies Record<string, Def>

export type ErrorCode = keyof typeof ERROR_CODES

/** Build a registered error. `message` overrides the default; `param` names the offending field. */
export function gatewayError(
  code: ErrorCode,
  opts: { message?: string; param?: string | null; headers?: Record<string, string>; cause?: unknown } = {},
): GatewayError {
  const def: Def = ERROR_CODES[code]
  return new GatewayError({
    status: def.status,
    type: def.type,
    code,
    message: opts.message ?? def.message,
    param: opts.param ?? null,
    headers: opts.headers,
    cause: opts.cause,
  })
}

/** Shorthand for the most common case: a 400 naming the field at fault. */
export function invalidParam(param: string, message: string): GatewayError {
  return gatewayError('invalid_parameter', { param, message })
}

/**
 * Convert anything thrown into a GatewayError. Unknown errors become a 500 whose message carries no internals
 * (no stack traces on the wire); the original stays as `cause` for the log.
 */
export function asGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err
  return gatewayError('internal_error', { cause: err })
}

export function toWire(err: GatewayError): WireError {
  return { error: { message: err.message, type: err.type, param: err.param, code: err.code } }
}
