/**
 * Rate limiting per service key. `RateLimiter` here is the in-process one (the embedded default, and the fallback of
 * the shared limiter in redis-rate-limiter.ts); both answer the `Limiter` interface the HTTP front calls.
 *
 * Per-key token buckets with a bounded key map: at most `maxKeys` buckets are kept (least recently used evicted; an
 * evicted key simply starts again with a full bucket, which errs on the side of the caller).
 */
import { LRUCache } from 'lru-cache'
import { gatewayError } from '../errors.js'
import type { Clock, Plan } from '../types.js'
import { TokenBucket, type TakeResult } from './token-bucket.js'

export interface RateDecision {
  headers: Record<string, string>
  allowed: boolean
  retryAfterSeconds: number
}

/**
 * What the HTTP front needs: a decision per request. The local limiter answers synchronously (no promise on the hot
 * path of the embedded mode); a shared one answers with a promise.
 */
export interface Limiter {
  check(tenantId: string, plan: Plan): RateDecision | Promise<RateDecision>
}

/** The same answer for every request of an unlimited plan: made once, not per request. */
const UNLIMITED: RateDecision = Object.freeze({
  allowed: true,
  retryAfterSeconds: 0,
  headers: Object.freeze({
    'x-ratelimit-limit-requests': 'unlimited',
    'x-ratelimit-remaining-requests': 'unlimited',
    'x-ratelimit-reset-requests': '0s',
  }),
})

export class RateLimiter implements Limiter {
  readonly #limits: Record<Plan, number>
  readonly #clock: Clock
  readonly #buckets: LRUCache<string, TokenBucket>

  constructor(opts: { limits: Record<Plan, number>; maxKeys: number; clock: Clock }) {
    this.#limits = opts.limits
    this.#clock = opts.clock
    this.#buckets = new LRUCache({ max: opts.maxKeys })
  }

  check(tenantId: string, plan: Plan): RateDecision {
    const perMinute = this.#limits[plan]
    if (!Number.isFinite(perMinute)) return UNLIMITED
    const now = this.#clock()
    // The bucket is keyed by tenant and plan so that a plan change (RATE_LIMITS, re-issued key) gets a fresh bucket.
    const id = `${tenantId}:${plan}`
    let bucket = this.#buckets.get(id)
    if (bucket === undefined) {
      bucket = new TokenBucket({ capacity: perMinute, perMinute, now })
      this.#buckets.set(id, bucket)
    }
    return decision(bucket.capacity, bucket.take(now))
  }

  /** Throws 429 with Retry-After when refused; returns the headers to set either way. */
  enforce(tenantId: string, plan: Plan): Record<string, string> {
    return enforceDecision(this.check(tenantId, plan), plan)
  }

  /** Whether `plan` has a limit at all (the unlimited plan never touches a store). */
  limited(plan: Plan): boolean {
    return Number.isFinite(this.#limits[plan])
  }

  perMinute(plan: Plan): number {
    return this.#limits[plan]
  }
}

/** A bucket's answer as headers: the same for the local and the shared limiter. */
export function decision(capacity: number, r: TakeResult): RateDecision {
  return {
    allowed: r.allowed,
    retryAfterSeconds: Math.max(1, Math.ceil(r.retryAfterMs / 1000)),
    headers: {
      'x-ratelimit-limit-requests': String(capacity),
      'x-ratelimit-remaining-requests': String(r.remaining),
      'x-ratelimit-reset-requests': formatDuration(r.resetMs),
    },
  }
}

/** Throws 429 with Retry-After when `d` refuses; returns the headers to set either way. */
export function enforceDecision(d: RateDecision, plan: Plan): Record<string, string> {
  if (!d.allowed) {
    const limit = d.headers['x-ratelimit-limit-requests']
    throw gatewayError('rate_limit_exceeded', {
      message: `Rate limit of ${limit} requests per minute exceeded for the ${plan} plan; retry in ${d.retryAfterSeconds}s`,
      headers: { ...d.headers, 'retry-after': String(d.retryAfterSeconds) },
    })
  }
  return d.headers
}

/** OpenAI's reset format: `1m6s`, `6s`, `250ms`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.ceil(ms)}ms`
  const total = Math.ceil(ms / 1000)
  const m = Math.floor(total / 60)
  const s = total % 60
  return m > 0 ? `${m}m${s}s` : `${s}s`
}
