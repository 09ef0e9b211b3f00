/**
 * The node:http front: request id, routing (404/405), authentication and rate limiting for /api/v1/*, error → wire
 * conversion, and a per-request completion record for logs and metrics. Handlers get a small context and an
 * AbortSignal that fires when the client goes away, so work they started upstream is cancelled at once.
 */
import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Authenticator } from '../auth/authenticator.js'
import type { RateLimiter } from '../auth/rate-limiter.js'
import { asGatewayError, gatewayError, type GatewayError } from '../errors.js'
import type { Clock, Ms, Tenant } from '../types.js'
import { sendError } from './respond.js'
import { Router } from './router.js'

export interface RequestContext {
  req: IncomingMessage
  res: ServerResponse
  requestId: string
  params: Record<string, string>
  query: URLSearchParams
  /** Set for authenticated routes. */
  tenant: Tenant | undefined
  /** Fires when the client disconnects before the response is finished. */
  signal: AbortSignal
  /** Facts a handler wants in the request log line (model, stream, upstream timings, tokens). */
  annotations: Record<string, string | number | boolean | undefined>
}

export type Handler = (ctx: RequestContext) => Promise<void>

export interface RouteDef {
  method: 'GET' | 'POST' | 'DELETE'
  path: string
  /** Requires a service key (and counts against its rate limit). */
  auth: boolean
  handler: Handler
}

export interface RequestRecord {
  requestId: string
  method: string
  route: string
  status: number
  tenant: Tenant | undefined
  durationMs: Ms
  error: GatewayError | undefined
  annotations: RequestContext['annotations']
}

export interface HttpServerOptions {
  routes: RouteDef[]
  authenticator: Authenticator
  limiter: RateLimiter
  clock: Clock
  headersTimeout: Ms
  requestTimeout: Ms
  maxHeaderBytes: number
  onRequestDone?: (r: RequestRecord) => void
  onRateLimited?: (plan: string) => void
}

export interface HttpServer {
  server: Server
  /** Requests currently being handled. */
  inFlight(): number
  /** Refuse new requests with 503 and ask keep-alive clients to reconnect elsewhere. */
  drain(): void
}

export function createHttpServer(opts: HttpServerOptions): HttpServer {
  const router = new Router<RouteDef>()
  for (const r of opts.routes) router.add(r.method, r.path, r)
  let inFlight = 0
  let draining = false

  const server = createServer(
    {
      headersTimeout: opts.headersTimeout,
      requestTimeout: opts.requestTimeout,
      maxHeaderSize: opts.maxHeaderBytes,
      // Each SSE event must leave as soon as it is written: no Nagle batching.
      noDelay: true,
      keepAliveTimeout: 5_000,
    },
    (req, res) => {
      inFlight++
      res.once('close', () => inFlight--)
      void handle(req, res)
    },
  )

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = opts.clock()
    const incomingId = req.headers['x-request-id']
    const requestId =
      typeof incomingId === 'string' && /^[\w.:-]{1,128}$/.test(incomingId) ? incomingId : `req_${randomUUID()}`
    res.setHeader('x-request-id', requestId)
    if (draining) res.setHeader('connection', 'close')

    const ac = new AbortController()
    res.once('close', () => {
      if (!res.writableFinished) ac.abort()
    })

    const ctx: RequestContext = {
      req,
      res,
      requestId,
      params: {},
      query: new URLSearchParams(),
      tenant: undefined,
      signal: ac.signal,
      annotations: {},
    }
    let route = 'unmatched'
    let failure: GatewayError | undefined
    try {
      const q = req.url?.indexOf('?') ?? -1
      const pathname = q === -1 ? (req.url ?? '/') : (req.url ?? '/').slice(0, q)
      if (q !== -1) ctx.query = new URLSearchParams((req.url ?? '').slice(q + 1))
      const found = router.find(req.method ?? 'GET', pathname)
      if (found.kind === 'not-found') {
        throw gatewayError('not_found', { message: `No route for ${req.method} ${pathname}` })
      }
      if (found.kind === 'method-not-allowed') {
        route = found.template
        throw gatewayError('method_not_allowed', {
          message: `${req.method} is not allowed on ${pathname}; use ${found.allow.join(', ')}`,
          headers: { allow: found.allow.join(', ') },
        })
      }
      const def = found.match.handler
      route = def.path
      ctx.params = found.match.params
      if (draining) throw gatewayError('shutting_down')
      if (def.auth) {
        ctx.tenant = opts.authenticator.authenticate(req.headers)
        try {
          const headers = opts.limiter.enforce(ctx.tenant.id, ctx.tenant.plan)
          for (const [k, v] of Object.entries(headers)) res.setHeader(k, v)
        } catch (err) {
          opts.onRateLimited?.(ctx.tenant.plan)
          throw err
        }
      }
      await def.handler(ctx)
    } catch (err) {
      failure = asGatewayError(err)
      if (!res.headersSent) {
        // The body may be partly unread (e.g. refused for size or auth); close the connection rather than drain an
        // arbitrarily large upload.
        if (!req.complete) res.setHeader('connection', 'close')
        sendError(res, failure)
      } else if (!res.writableEnded) {
        // Headers are out (a stream was under way) and the handler could not finish it: cut the connection so the
        // client sees a truncated response instead of a hang.
        res.destroy()
      }
    } finally {
      const done = (): void =>
        opts.onRequestDone?.({
          requestId,
          method: req.method ?? 'GET',
          route,
          status: res.statusCode,
          tenant: ctx.tenant,
          durationMs: opts.clock() - started,
          error: failure,
          annotations: ctx.annotations,
        })
      if (res.writableFinished || res.destroyed) done()
      else res.once('close', done)
    }
  }

  return {
    server,
    inFlight: () => inFlight,
    drain: () => {
      draining = true
      server.closeIdleConnections()
    },
  }
}
