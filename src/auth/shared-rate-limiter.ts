/**
 * Rate limits shared by every process and replica: each check is one atomic bucket operation in a shared store
 * (Redis, storage/redis.ts), so a plan's figure holds across the whole deployment, whichever replica answers.
 *
 * When the store cannot answer (down, timed out), what happens is a setting: `allow` lets this process's own
 * in-memory limiter decide (each replica then enforces the whole plan on its own until the store is back), `deny`
 * answers 503 `rate_limit_unavailable` with Retry-After. After a failure the store is left alone for `retryAfter`
 * (checks go straight to the fallback), so an outage costs one failed call per process per interval rather than a
 * timeout per request. Every failure is counted (`onStoreError`) and every fallback decision too (`onFallback`).
 */
import { gatewayError } from '../errors.js'
import type { Clock, Ms, Plan } from '../types.js'
import { decision, type Limiter, type RateDecision, type RateLimiter } from './rate-limiter.js'
import type { TakeResult } from './token-bucket.js'

/** The shared store's one operation. */
export interface SharedBuckets {
  take(key: string, capacity: number, perMinute: number): Promise<TakeResult>
}

export type FallbackOutcome = 'allowed' | 'limited' | 'denied'

export interface SharedRateLimiterOptions {
  buckets: SharedBuckets
  /** The in-process limiter: decides unlimited plans, and every check while the store is failing with `allow`. */
  local: RateLimiter
  onStoreError: 'allow' | 'deny'
  /** How long to use the fallback after a store failure before trying the store again. */
  retryAfter: Ms
  clock: Clock
  /** Each store call, for latency/error metrics. */
  observe?: (ms: Ms, ok: boolean) => void
  /** The store failed after working (or at the first check): once per outage, for the log. */
  onOutage?: (err: unknown) => void
  /** The store answered again after an outage. */
  onRecovery?: () => void
  /** Every check decided without the store. */
  onFallback?: (outcome: FallbackOutcome) => void
}

export class SharedRateLimiter implements Limiter {
  readonly #o: SharedRateLimiterOptions
  /** Until this time checks skip the store; 0 = the store is believed up. */
  #downUntil: Ms = 0
  #down = false

  constructor(opts: SharedRateLimiterOptions) {
    this.#o = opts
  }

  check(tenantId: string, plan: Plan): RateDecision | Promise<RateDecision> {
    const local = this.#o.local
    if (!local.limited(plan)) return local.check(tenantId, plan)
    if (this.#down && this.#o.clock() < this.#downUntil) return this.#fallback(tenantId, plan)
    return this.#shared(tenantId, plan)
  }

  async #shared(tenantId: string, plan: Plan): Promise<RateDecision> {
    const perMinute = this.#o.local.perMinute(plan)
    const started = this.#o.clock()
    let r: TakeResult
    try {
      // Keyed by tenant and plan, as the local limiter: a plan change starts a fresh bucket.
      r = await this.#o.buckets.take(`rl:${tenantId}:${plan}`, perMinute, perMinute)
    } catch (err) {
      this.#o.observe?.(this.#o.clock() - started, false)
      this.#downUntil = this.#o.clock() + this.#o.retryAfter
      if (!this.#down) this.#o.onOutage?.(err)
      this.#down = true
      return this.#fallback(tenantId, plan)
    }
    this.#o.observe?.(this.#o.clock() - started, true)
    if (this.#down) {
      this.#down = false
      this.#o.onRecovery?.()
    }
    return decision(perMinute, r)
  }

  #fallback(tenantId: string, plan: Plan): RateDecision {
    if (this.#o.onStoreError === 'deny') {
      this.#o.onFallback?.('denied')
      const seconds = Math.max(1, Math.ceil(this.#o.retryAfter / 1000))
      throw gatewayError('rate_limit_unavailable', { headers: { 'retry-after': String(seconds) } })
    }
    const d = this.#o.local.check(tenantId, plan)
    this.#o.onFallback?.(d.allowed ? 'allowed' : 'limited')
    return d
  }
}
