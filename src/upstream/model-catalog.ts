/**
 * The upstream's model list, cached: the source of each model's `context_length` for packing and the body of
 * GET /api/v1/models. Stale-while-revalidate: once a list is cached, a stale entry is served immediately and refreshed
 * in the background, so the chat hot path never waits on /models after the first fetch; concurrent misses share one
 * fetch. A failed fetch is not fatal for chat: packing falls back to DEFAULT_CONTEXT_LENGTH.
 */
import { GatewayError, gatewayError } from '../errors.js'
import type { Clock, Ms, Tokens } from '../types.js'
import { readUpstreamBody, type UpstreamClient } from './client.js'
import { upstreamHttpError } from './errors.js'

interface Cached {
  body: string
  windows: Map<string, Tokens>
  /** Each listed model's own entry, as the upstream wrote it, for GET /api/v1/models/{id}. */
  entries: Map<string, string>
  fetchedAt: Ms
}

const MAX_MODELS_BODY = 32 * 1024 * 1024

export class ModelCatalog {
  readonly #upstream: UpstreamClient
  readonly #ttl: Ms
  readonly #clock: Clock
  #cached: Cached | undefined
  #inflight: Promise<Cached> | undefined
  /** When the upstream last refused the list for want of a key (401/403): reachable at the right path all the same. */
  #refusedAt: Ms | undefined

  constructor(opts: { upstream: UpstreamClient; ttl: Ms; clock: Clock }) {
    this.#upstream = opts.upstream
    this.#ttl = opts.ttl
    this.#clock = opts.clock
  }

  /** The raw list body for GET /api/v1/models. */
  async list(authorization?: string): Promise<string> {
    return (await this.#get(authorization)).body
  }

  /**
   * One model's entry from the cached list (GET /api/v1/models/{id}, the SDKs' `models.retrieve`), or undefined when the
   * upstream does not list it. Answered from the same cache as the list: no upstream call per retrieve.
   */
  async model(id: string, authorization?: string): Promise<string | undefined> {
    return (await this.#get(authorization)).entries.get(id)
  }

  /**
   * For /readyz with READY_CHECK_UPSTREAM=1: resolves when the upstream answers GET /models at the configured base URL
   * (a wrong one, say without /api/v1, answers 404 or not at all), rejects otherwise. Cheap: a cached list counts, as
   * for chat (stale-while-revalidate, so a probe never waits on a refresh), and so does a 401/403, remembered for the
   * cache's TTL: an upstream that wants a key for its list (OpenAI's) is reachable and the path right, and readiness
   * has no key of its own to send.
   */
  async check(): Promise<void> {
    if (this.#refusedAt !== undefined && this.#clock() - this.#refusedAt < this.#ttl) return
    try {
      await this.#get()
    } catch (err) {
      if (err instanceof GatewayError && err.fromUpstream && (err.status === 401 || err.status === 403)) {
        this.#refusedAt = this.#clock()
        return
      }
      throw err
    }
  }

  /**
   * The model's window if the upstream lists it; undefined if unknown or the list cannot be had. `cancel`: a client
   * that leaves stops waiting (its error is thrown), without aborting the shared fetch other requests wait on; its
   * signal is read only on a miss, so a cached list costs no AbortSignal.
   */
  async contextLength(model: string, authorization?: string, cancel?: { readonly signal?: AbortSignal | undefined }): Promise<Tokens | undefined> {
    return (await this.#windows(authorization, cancel))?.get(model)
  }

  /**
   * The largest window any listed model has, as `contextLength` reads it: the bound where text is kept before a model
   * is named (a file quoted into a conversation's items).
   */
  async largestContextLength(authorization?: string, cancel?: { readonly signal?: AbortSignal | undefined }): Promise<Tokens | undefined> {
    const windows = await this.#windows(authorization, cancel)
    if (windows === undefined || windows.size === 0) return undefined
    let most = 0
    for (const w of windows.values()) most = Math.max(most, w)
    return most
  }

  async #windows(authorization?: string, cancel?: { readonly signal?: AbortSignal | undefined }): Promise<Map<string, Tokens> | undefined> {
    const pending = this.#get(authorization)
    // #get sets nothing synchronously on a miss: a cached list here means the answer is already there.
    const left = this.#cached === undefined ? cancel?.signal : undefined
    try {
      return (await (left === undefined ? pending : untilAborted(pending, left))).windows
    } catch (err) {
      if (left?.aborted === true) throw err
      // Deliberately ignored: a chat must not fail because /models is down; the caller uses the default window.
      return undefined
    }
  }

  /**
   * The model's window from a list already cached, without waiting: `{ window }` (undefined when the list does not name
   * the model), or undefined when no list is cached yet (ask `contextLength`). A stale list is served and refreshed in
   * the background, as `contextLength` does. For the planner's short path, which answers without an await.
   */
  knownContextLength(model: string, authorization?: string): { window: Tokens | undefined } | undefined {
    const c = this.#cached
    if (c === undefined) return undefined
    this.#revalidate(c, authorization)
    return { window: c.windows.get(model) }
  }

  async #get(authorization?: string): Promise<Cached> {
    const c = this.#cached
    if (c !== undefined) {
      this.#revalidate(c, authorization)
      return c
    }
    return this.#refresh(authorization)
  }

  /** A stale list is refreshed in the background; a failure keeps serving the previous list until the next attempt. */
  #revalidate(c: Cached, authorization: string | undefined): void {
    if (this.#clock() - c.fetchedAt >= this.#ttl && this.#inflight === undefined) this.#refresh(authorization).catch(() => undefined)
  }

  #refresh(authorization?: string): Promise<Cached> {
    this.#inflight ??= this.#fetch(authorization).finally(() => {
      this.#inflight = undefined
    })
    return this.#inflight
  }

  async #fetch(authorization?: string): Promise<Cached> {
    const res = await this.#upstream.get('/models', { authorization })
    const text = await readUpstreamBody(res.body, MAX_MODELS_BODY)
    if (res.status < 200 || res.status > 299) throw upstreamHttpError(res.status, text)
    const windows = new Map<string, Tokens>()
    const entries = new Map<string, string>()
    try {
      const parsed = JSON.parse(text) as { data?: Array<{ id?: unknown; context_length?: unknown }> }
      for (const m of Array.isArray(parsed.data) ? parsed.data : []) {
        if (m === null || typeof m !== 'object' || typeof m.id !== 'string') continue
        entries.set(m.id, JSON.stringify(m))
        if (typeof m.context_length === 'number' && m.context_length > 0) windows.set(m.id, m.context_length)
      }
    } catch (err) {
      throw gatewayError('upstream_invalid_response', { message: 'The upstream model list is not valid JSON', cause: err })
    }
    const cached = { body: text, windows, entries, fetchedAt: this.#clock() }
    this.#cached = cached
    return cached
  }
}

/** `work`, or the signal's reason once it aborts first; `work` itself goes on (others may be waiting on it). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    const settle = (): void => signal.removeEventListener('abort', onAbort)
    // Both outcomes are handled here: the chained promise cannot reject.
    void work.then(
      (v) => {
        settle()
        resolve(v)
      },
      (err: unknown) => {
        settle()
        reject(err)
      },
    )
  })
}
