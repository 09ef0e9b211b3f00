/**
 * The one HTTP client to the model-routing provider: an undici Pool with keep-alive to UPSTREAM_BASE_URL's origin.
 * Timeouts are set on purpose: undici's 300 s default body timeout would cut a long stream, while no timeout at all
 * would let a hung upstream hold a client forever. `bodyTimeout` is the idle gap allowed between two body chunks,
 * so a stream that keeps sending (tokens or keep-alive comments) lives as long as it needs to.
 * Note undici's timers are coarse (a 500 ms timeout fires near 800 ms).
 */
import { Pool, type Dispatcher } from 'undici'
import type { Ms } from '../types.js'
import { transportError } from './errors.js'

export interface UpstreamOptions {
  baseUrl: string
  connectTimeout: Ms
  headersTimeout: Ms
  bodyTimeout: Ms
  connections: number
  httpReferer?: string | undefined
  xTitle?: string | undefined
  /** A request sent once more after the keep-alive race (`#request`): counted in /metrics. */
  onRetry?: () => void
}

/** What undici accepts as a request's `signal`. */
export type AbortSource = NonNullable<Dispatcher.RequestOptions['signal']>

export interface UpstreamResponse {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: Dispatcher.ResponseData['body']
}

export class UpstreamClient {
  readonly #pool: Pool
  readonly #basePath: string
  readonly #extraHeaders: Record<string, string>
  readonly #onRetry: (() => void) | undefined

  constructor(opts: UpstreamOptions) {
    const url = new URL(opts.baseUrl)
    this.#basePath = url.pathname.replace(/\/+$/, '')
    this.#pool = new Pool(url.origin, {
      connections: opts.connections,
      connectTimeout: opts.connectTimeout,
      headersTimeout: opts.headersTimeout,
      bodyTimeout: opts.bodyTimeout,
      keepAliveTimeout: 30_000,
      // Pipelining stays at 1: a slow stream must not hold up the requests queued behind it on the same socket.
      pipelining: 1,
    })
    this.#onRetry = opts.onRetry
    this.#extraHeaders = {}
    if (opts.httpReferer) this.#extraHeaders['http-referer'] = opts.httpReferer
    if (opts.xTitle) this.#extraHeaders['x-title'] = opts.xTitle
  }

  /**
   * POST /chat/completions. `authorization` is forwarded exactly as the client sent it. `signal` aborts the call: an
   * AbortSignal, or an EventEmitter with `aborted` that emits `abort` (undici takes both; see ClientGone).
   */
  async chat(body: string, opts: { authorization: string; signal: AbortSource; stream: boolean }): Promise<UpstreamResponse> {
    return this.#request('POST', '/chat/completions', {
      signal: opts.signal,
      body,
      // The extra headers last: a literal that starts with a spread and adds keys it lacks is built through V8's slow
      // path (≈ 0.4 µs hot, more cold), once per upstream call. Their names never clash with these.
      headers: {
        authorization: opts.authorization,
        'content-type': 'application/json',
        accept: opts.stream ? 'text/event-stream' : 'application/json',
        ...this.#extraHeaders,
      },
    })
  }

  /** POST a JSON body to another upstream endpoint (/embeddings), `authorization` forwarded as the client sent it. */
  async postJson(path: string, body: string, opts: { authorization: string; signal: AbortSource }): Promise<UpstreamResponse> {
    return this.#request('POST', path, {
      signal: opts.signal,
      body,
      headers: { authorization: opts.authorization, 'content-type': 'application/json', accept: 'application/json', ...this.#extraHeaders },
    })
  }

  async get(path: string, opts: { authorization?: string | undefined; signal?: AbortSignal }): Promise<UpstreamResponse> {
    const headers: Record<string, string> = { accept: 'application/json', ...this.#extraHeaders }
    if (opts.authorization) headers.authorization = opts.authorization
    return this.#request('GET', path, { headers, signal: opts.signal })
  }

  /**
   * Sent once more, on another connection, when a pooled connection that had served earlier responses was closed by
   * the upstream before this request got any answer: the keep-alive race (the server closed the idle connection as
   * the request went out on it), which otherwise reaches the client as a 502 now and then after a quiet spell. A
   * connection that fails on its first request, or fails again, is the upstream's failure and is reported as such.
   */
  #request(
    method: 'GET' | 'POST',
    path: string,
    o: { headers: Record<string, string>; body?: string; signal?: AbortSource | undefined },
  ): Promise<UpstreamResponse> {
    // Promise chains, not async functions: the success path allocates what one `await` did before the retry existed.
    return this.#send(method, path, o).then(asResponse, (err: unknown) => {
      if (!reusedConnectionDropped(err) || (o.signal as { aborted?: boolean } | undefined)?.aborted === true) throw transportError(err)
      this.#onRetry?.()
      return this.#send(method, path, o).then(asResponse, (again: unknown) => {
        throw transportError(again)
      })
    })
  }

  #send(method: 'GET' | 'POST', path: string, o: { headers: Record<string, string>; body?: string; signal?: AbortSource | undefined }) {
    return this.#pool.request({ method, path: this.#basePath + path, headers: o.headers, body: o.body, signal: o.signal })
  }

  close(): Promise<void> {
    return this.#pool.close()
  }

  destroy(): Promise<void> {
    return this.#pool.destroy()
  }
}

function asResponse(res: Dispatcher.ResponseData): UpstreamResponse {
  return { status: res.statusCode, headers: res.headers, body: res.body }
}

/**
 * undici's "other side closed" before any answer, on a connection that had read earlier responses (`bytesRead`
 * counts the connection's whole life): the upstream closed a kept-alive connection, not this request's.
 */
function reusedConnectionDropped(err: unknown): boolean {
  const e = err as { code?: unknown; socket?: { bytesRead?: unknown } } | null
  return e?.code === 'UND_ERR_SOCKET' && typeof e.socket?.bytesRead === 'number' && e.socket.bytesRead > 0
}

/**
 * Read a whole upstream body, bounded: beyond `limit` bytes the response is treated as invalid.
 * Event-driven rather than `for await`: the async iterator's promise and generator per chunk measured 43 of the
 * 1,220 µs a request cost the gateway at 32 connections (profiler time, bench/relay.ts), for this and the request body.
 */
export function readUpstreamBody(body: UpstreamResponse['body'], limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = []
    let size = 0
    const fail = (err: unknown): void => reject(transportError(err))
    body.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        body.destroy()
        fail(Object.assign(new Error(`upstream body larger than ${limit} bytes`), { code: 'RG_UPSTREAM_TOO_LARGE' }))
        return
      }
      parts.push(chunk)
    })
    body.once('end', () => resolve((parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, size)).toString('utf8')))
    // Stays attached once settled: a late error (the destroy above) must not go unhandled.
    body.on('error', fail)
  })
}
