/**
 * The node:http front: request id, routing (404/405), authentication and rate limiting for /api/v1/*, error → wire
 * conversion, and a per-request completion record for logs and metrics. Handlers get a small context and the
 * client's departure (ClientGone, or an AbortSignal on demand), so work they started upstream is cancelled at once.
 */
import { randomUUID } from 'node:crypto'
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Admission } from '../auth/admission.js'
import { asGatewayError, gatewayError, toWire, type GatewayError } from '../errors.js'
import type { Clock, Ms, PromptTrace, Tenant } from '../types.js'
import { ClientGone } from './client-gone.js'
import type { Cors } from './cors.js'
import { RequestFacts } from './request-facts.js'
import type { DrainLimits } from './drain.js'
import { sendError, sendErrorBeforeBody } from './respond.js'
import { storeFailure } from './store-failure.js'
import { Router } from './router.js'

export interface RequestContext {
  req: IncomingMessage
  res: ServerResponse
  requestId: string
  params: Record<string, string>
  /** The query string (parsed on first use). */
  readonly query: URLSearchParams
  /** Set for authenticated routes. */
  tenant: Tenant | undefined
  /** Fires when the client disconnects before the response is finished (made on first use: see ClientGone). */
  readonly signal: AbortSignal
  /** The same departure, cheap to create and to listen to; undici accepts it as a request's `signal`. */
  clientGone: ClientGone
  /** What the handler learned (model, stream, upstream timings, tokens, a failed stream): logs and metrics read it. */
  readonly facts: RequestFacts
  /** How the request's prompt was packed (chat and responses): read by the request-trace recorder. */
  trace: PromptTrace | undefined
}

/**
 * A class, not an object literal: a literal with getters is built through V8's slow path, which the profile showed
 * as 51 samples on that one line (4 % of `handle`) at 32 connections (bench/relay.ts).
 */
class Context implements RequestContext {
  params: Record<string, string> = {}
  tenant: Tenant | undefined = undefined
  readonly facts = new RequestFacts()
  trace: PromptTrace | undefined = undefined
  #query: URLSearchParams | undefined
  readonly #search: string

  constructor(
    public req: IncomingMessage,
    public res: ServerResponse,
    public requestId: string,
    public clientGone: ClientGone,
    search: string,
  ) {
    this.#search = search
  }

  // Most requests have no query: URLSearchParams is made when a handler reads one.
  get query(): URLSearchParams {
    return (this.#query ??= new URLSearchParams(this.#search))
  }

  get signal(): AbortSignal {
    return this.clientGone.signal
  }
}

export type Handler = (ctx: RequestContext) => Promise<void>

export interface RouteDef {
  method: 'GET' | 'POST' | 'DELETE'
  path: string
  /** Requires a service key (and counts against its rate limit). */
  auth: boolean
  /** Guarded by ADMIN_KEY in its handler (routes/admin-keys.ts), not by a service key: the route table says so. */
  admin?: true
  handler: Handler
}

export interface RequestRecord {
  requestId: string
  /** The id the client chose for the request, if it sent one (see clientRequestId). */
  clientRequestId: string | undefined
  method: string
  route: string
  status: number
  tenant: Tenant | undefined
  durationMs: Ms
  error: GatewayError | undefined
  facts: RequestFacts
  trace: PromptTrace | undefined
}

export interface HttpServerOptions {
  routes: RouteDef[]
  /** Who may use a route that needs a key, at what rate (auth/admission.ts): the policy is not this module's. */
  admission: Admission
  clock: Clock
  headersTimeout: Ms
  requestTimeout: Ms
  maxHeaderBytes: number
  /** How much of an unread body is read and discarded after an early answer, so the client sees it (drain.ts). */
  drain: DrainLimits
  /** CORS for browser pages on other origins (cors.ts, CORS_ORIGINS); without it no CORS header is ever sent. */
  cors?: Cors
  /** Called first for every request (before routing): the stores' per-request hook (compose: `Store.freshReads`). */
  onRequestStart?: () => void
  onRequestDone?: (r: RequestRecord) => void
}

export interface HttpServer {
  server: Server
  /** Requests currently being handled. */
  inFlight(): number
  /** Refuse new requests with 503 and ask keep-alive clients to reconnect elsewhere. */
  drain(): void
}

/**
 * The request id the client chose: OpenAI's `x-client-request-id`, else an `x-request-id` (what proxies and older
 * clients send). Only a plain token (`[\w.:-]{1,128}`) is kept, so it is safe in a header and a log line.
 */
function clientRequestIdOf(req: IncomingMessage): string | undefined {
  const v = req.headers['x-client-request-id'] ?? req.headers['x-request-id']
  return typeof v === 'string' && /^[\w.:-]{1,128}$/.test(v) ? v : undefined
}

export function createHttpServer(opts: HttpServerOptions): HttpServer {
  const router = new Router<RouteDef>()
  for (const r of opts.routes) router.add(r.method, r.path, r)
  let inFlight = 0
  let draining = false
  /** Sockets node cut off for taking longer than requestTimeout while a handler was reading their body. */
  const timedOut = new WeakSet<Duplex>()

  const server = createServer(
    {
      headersTimeout: opts.headersTimeout,
      requestTimeout: opts.requestTimeout,
      // node only looks for expired headers/request timers every `connectionsCheckingInterval` (default 30 s), so a
      // 10 s headers timeout could take 40 s to fire; checking at a quarter of the shortest timeout (at most once a
      // second, at least every 50 ms) keeps a slow client's socket from outliving its timeout by much.
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(Math.min(opts.headersTimeout, opts.requestTimeout) / 4))),
      maxHeaderSize: opts.maxHeaderBytes,
      // Each SSE event must leave as soon as it is written: no Nagle batching.
      noDelay: true,
      keepAliveTimeout: 5_000,
    },
    (req, res) => void handle(req, res),
  )

  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // What node's default handler does, in our error shape and with a request id: answer only when no response of
    // an in-flight request has started on this socket (anything else would corrupt it), then close.
    const inFlightRes = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage
    if (err.code === 'ECONNRESET' || !socket.writable || (inFlightRes && inFlightRes.headersSent)) {
      socket.destroy()
      return
    }
    if (inFlightRes && err.code !== 'ERR_HTTP_REQUEST_TIMEOUT') {
      // The connection ended in the middle of a request's body (the client left): nobody is left to answer, and the
      // handler reading that body records it as client_closed_request.
      socket.destroy()
      return
    }
    const failure =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? gatewayError('headers_too_large', { message: `Request headers exceed ${opts.maxHeaderBytes} bytes` })
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? gatewayError('request_timeout')
          : gatewayError('malformed_request', { cause: err })
    // A request whose body was cut off keeps the id its handler logs it under.
    const inFlightId = inFlightRes?.getHeader('x-request-id')
    const requestId = typeof inFlightId === 'string' ? inFlightId : `req_${randomUUID()}`
    const body = JSON.stringify(toWire(failure))
    // write + destroy, as node does: a small write leaves at once, and destroy frees the socket without waiting for
    // a client that may never read.
    socket.write(
      `HTTP/1.1 ${failure.status} ${STATUS_CODES[failure.status] ?? 'Error'}\r\n` +
        `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
        `x-request-id: ${requestId}\r\nconnection: close\r\n\r\n${body}`,
    )
    socket.destroy()
    if (inFlightRes) {
      // The handler still reading this request's body records it as a timeout; its own answer goes nowhere.
      timedOut.add(socket)
      return
    }
    opts.onRequestDone?.({
      requestId,
      clientRequestId: undefined,
      method: '-',
      route: 'unparsed',
      status: failure.status,
      tenant: undefined,
      durationMs: 0,
      error: failure,
      facts: new RequestFacts(),
      trace: undefined,
    })
  })

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = opts.clock()
    opts.onRequestStart?.()
    // Always ours: a client-chosen id used as-is could name another tenant's request in the logs and traces
    // (issue 29). Theirs is echoed beside it and logged as clientRequestId, so they can still correlate by it.
    const requestId = `req_${randomUUID()}`
    res.setHeader('x-request-id', requestId)
    const clientRequestId = clientRequestIdOf(req)
    if (clientRequestId !== undefined) res.setHeader('x-client-request-id', clientRequestId)
    if (draining) res.setHeader('connection', 'close')

    inFlight++
    const gone = new ClientGone()
    res.once('close', () => {
      inFlight--
      if (!res.writableFinished) gone.abort()
    })

    const url = req.url ?? '/'
    const q = url.indexOf('?')
    const pathname = q === -1 ? url : url.slice(0, q)
    const ctx = new Context(req, res, requestId, gone, q === -1 ? '' : url.slice(q + 1))
    let route = 'unmatched'
    let failure: GatewayError | undefined
    try {
      if (opts.cors?.apply(req, res) === true) {
        route = 'preflight'
        return
      }
      const found = router.find(req.method ?? 'GET', pathname)
      if (found.kind === 'not-found') {
        throw gatewayError('not_found', { message: `No route for ${req.method} ${pathname}${misplacedApiHint(router, req.method ?? 'GET', pathname)}` })
      }
      if (found.kind === 'bad-encoding') {
        route = found.template
        throw gatewayError('invalid_parameter', {
          param: found.param,
          message: `The ${found.param} in the path is not valid percent-encoding (URL-encode it with encodeURIComponent)`,
        })
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
        // Only a caching key store asking its database, or a shared limiter, answers with a promise.
        const who = opts.admission.authenticate(req.headers, req.socket.remoteAddress, req.socket)
        const tenant = (ctx.tenant = who instanceof Promise ? await who : who)
        const limited = opts.admission.limit(tenant)
        const headers = limited instanceof Promise ? await limited : limited
        for (const k in headers) res.setHeader(k, headers[k] as string)
      }
      await def.handler(ctx)
    } catch (err) {
      failure = storeFailure(err) ?? asGatewayError(err)
      if (timedOut.has(req.socket)) failure = gatewayError('request_timeout', { cause: err })
      else if (gone.aborted && failure.status >= 500) {
        // The client left first, and what failed was work its departure cancelled (the upstream call): not a fault.
        failure = gatewayError('client_closed_request', { cause: err })
      }
      if (!res.headersSent) {
        // The body may be partly unread (refused for size, key or rate): answer, read the rest within a bound so the
        // client is not reset before it reads the answer, then close (drain.ts).
        if (!req.complete) sendErrorBeforeBody(req, res, failure, opts.drain)
        else sendError(res, failure)
      } else if (!res.writableEnded) {
        // Headers are out (a stream was under way) and the handler could not finish it: cut the connection so the
        // client sees a truncated response instead of a hang.
        res.destroy()
      }
    } finally {
      const done = (): void =>
        opts.onRequestDone?.({
          requestId,
          clientRequestId,
          method: req.method ?? 'GET',
          route,
          status: res.statusCode,
          tenant: ctx.tenant,
          durationMs: opts.clock() - started,
          error: failure,
          facts: ctx.facts,
          trace: ctx.trace,
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

/**
 * A client pointed at `http://host/v1` (where most OpenAI-compatible servers answer) instead of `/api/v1` asks for
 * `/v1/chat/completions` and got a bare 404; the answer now says where the route is.
 */
function misplacedApiHint(router: Router<RouteDef>, method: string, pathname: string): string {
  const at = pathname.indexOf('/v1/')
  if (at === -1 || pathname.startsWith('/api/v1/')) return ''
  const moved = `/api${pathname.slice(at)}`
  return router.find(method, moved).kind === 'not-found'
    ? ''
    : `: the API is under /api/v1 (${method} ${moved}); set the client's base URL to end in /api/v1`
}
