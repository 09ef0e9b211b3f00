/**
 * Converting what the upstream does wrong into registry errors: transport failures (undici error codes) and
 * OpenRouter's error bodies `{"error": {"code": 429, "message": "...", "metadata": {...}}}`, whose numeric code is
 * mapped to a string and whose message is kept.
 */
import { STATUS_CODES } from 'node:http'
import { GatewayError, gatewayError } from '../errors.js'

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])

/** A transport-level failure talking to the upstream (no usable HTTP response). */
export function transportError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err
  const code = (err as { code?: string } | null)?.code
  if (code !== undefined && TIMEOUT_CODES.has(code)) {
    return gatewayError('upstream_timeout', { cause: err })
  }
  return gatewayError('upstream_unreachable', {
    message: `The upstream provider could not be reached${code ? ` (${code})` : ''}`,
    cause: err,
  })
}

const CODE_BY_STATUS: Record<number, string> = {
  400: 'invalid_request',
  401: 'invalid_api_key',
  402: 'insufficient_credits',
  403: 'forbidden',
  404: 'not_found',
  408: 'timeout',
  413: 'payload_too_large',
  422: 'unprocessable_entity',
  429: 'rate_limit_exceeded',
  502: 'upstream_error',
  503: 'service_unavailable',
}

const TYPE_BY_STATUS: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'insufficient_quota',
  403: 'permission_error',
  404: 'not_found_error',
  408: 'timeout_error',
  429: 'rate_limit_error',
}

/**
 * An upstream non-2xx answer (or a 2xx whose body is an error) in our wire shape. The status passes through, except
 * an upstream 500 (which would read as our own internal error) becomes 502. The message says the answer was the
 * upstream's and which status it had, then the upstream's own message, or the status text when the body is not
 * OpenRouter's/OpenAI's error shape: a wrong UPSTREAM_BASE_URL answered `404 Not Found` for every chat, which read as
 * the gateway's own 404 (issue 27).
 */
export function upstreamHttpError(status: number, bodyText: string, retryAfter?: string): GatewayError {
  let error: unknown
  try {
    error = (JSON.parse(bodyText) as { error?: unknown }).error
  } catch {
    // Not JSON (an HTML error page, say): keep the status text. The status still tells the client what happened.
  }
  return upstreamError(status, error, retryAfter)
}

/**
 * A streamed choice that finished with `error` with no error event beside it (OpenRouter's report of a failure while
 * generating): the error such an event makes (upstreamHttpError on a 2xx), from the choice's own `error` if it has one.
 */
export function choiceFailedError(choice: { error?: unknown }): GatewayError {
  const e = choice.error
  return upstreamError(200, e !== null && typeof e === 'object' ? e : { message: 'the model failed while generating (finish_reason "error")' })
}

/** OpenRouter's or OpenAI's `error` object (anything else: none) → the registry error, as upstreamHttpError says. */
function upstreamError(status: number, error: unknown, retryAfter?: string): GatewayError {
  let message = (status >= 400 ? STATUS_CODES[status] : undefined) ?? 'no error message'
  let code: string | undefined
  let param: string | null = null
  const e = error as { message?: unknown; code?: unknown; param?: unknown } | null | undefined
  if (e && typeof e === 'object') {
    if (typeof e.message === 'string' && e.message !== '') message = e.message
    if (typeof e.code === 'string') code = e.code
    if (typeof e.param === 'string') param = e.param
  }
  message = status >= 200 && status < 300 ? `Upstream returned an error: ${message}` : `Upstream returned ${status}: ${message}`
  const wireStatus = status === 500 || status < 400 || status > 599 ? 502 : status
  return new GatewayError({
    status: wireStatus,
    type: TYPE_BY_STATUS[wireStatus] ?? 'upstream_error',
    code: code ?? CODE_BY_STATUS[wireStatus] ?? 'upstream_error',
    message,
    param,
    headers: retryAfter ? { 'retry-after': retryAfter } : {},
    fromUpstream: true,
  })
}

/**
 * Some providers quote the API key they were given in their error message ("Incorrect API key provided: sk-…"). Error
 * messages reach the logs (5xx) and the error registry, so the caller's key is cut out of the upstream's body first.
 */
export function withoutSecret(text: string, authorization: string): string {
  const token = authorization.replace(/^\s*bearer\s+/i, '').trim()
  return token.length >= 8 ? text.split(token).join('[redacted]') : text
}
