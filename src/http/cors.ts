/**
 * CORS for browser apps served from other origins (CORS_ORIGINS): without it a page on https://app.example cannot
 * call the gateway at all, since every API request carries headers (serviceKey, Authorization, content-type: JSON)
 * that make the browser ask first with a preflight `OPTIONS`. Off by default: a service key in a browser is visible to
 * whoever uses the page, so serving pages that hold one is the operator's decision, not a default.
 *
 * For an allowed `Origin`: every answer, errors included (a page must be able to read a 401 or 429), carries
 * `Access-Control-Allow-Origin` and exposes the headers a client reads (`x-request-id`, the rate limit's, `retry-after`);
 * a preflight is answered here, 204, before routing or authentication (browsers send it without credentials). No
 * cookies are used, so credentials are never allowed. A request from an origin not allowed gets no CORS header and its
 * preflight goes on to the router's 405, which the browser reports as the refusal it is.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

const EXPOSED = [
  'x-request-id',
  'x-client-request-id',
  'x-ratelimit-limit-requests',
  'x-ratelimit-remaining-requests',
  'x-ratelimit-reset-requests',
  'retry-after',
].join(', ')

/** A header list as browsers send it in Access-Control-Request-Headers: names and commas, bounded. */
const HEADER_LIST = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+(?:\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$/
const MAX_HEADER_LIST = 2048

export class Cors {
  readonly #any: boolean
  readonly #origins: ReadonlySet<string>

  /** `origins`: exact origins (`scheme://host[:port]`), or `*` for any. */
  constructor(origins: readonly string[]) {
    this.#any = origins.includes('*')
    this.#origins = new Set(origins)
  }

  /** Sets the CORS headers of an allowed origin's request; true when it was a preflight, answered here. */
  apply(req: IncomingMessage, res: ServerResponse): boolean {
    const origin = req.headers.origin
    if (origin === undefined) return false
    // The answer depends on the Origin unless any origin is allowed: caches must keep them apart.
    if (!this.#any) res.setHeader('vary', 'Origin')
    if (!this.#any && !this.#origins.has(origin)) return false
    res.setHeader('access-control-allow-origin', this.#any ? '*' : origin)
    if (req.method === 'OPTIONS' && typeof req.headers['access-control-request-method'] === 'string') {
      res.setHeader('access-control-allow-methods', 'GET, POST, DELETE')
      // The SDKs send their own headers (x-stainless-*, openai-*): whatever the page asks for may be sent, as a list.
      const asked = req.headers['access-control-request-headers']
      if (typeof asked === 'string' && asked.length <= MAX_HEADER_LIST && HEADER_LIST.test(asked)) res.setHeader('access-control-allow-headers', asked)
      res.setHeader('access-control-max-age', '600')
      res.statusCode = 204
      res.end()
      return true
    }
    res.setHeader('access-control-expose-headers', EXPOSED)
    return false
  }
}
