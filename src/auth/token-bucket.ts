/**
 * Token bucket: capacity = the plan's requests per minute, refilled continuously (capacity / 60 000 per ms), fractional
 * tokens kept so a 10/min plan really gets one request every 6 s rather than rounding to whole tokens per tick.
 */
import type { Ms } from '../types.js'

export interface TakeResult {
  allowed: boolean
  /** Whole requests left after this one. */
  remaining: number
  /** Time until the bucket is full again. */
  resetMs: Ms
  /** When refused: time until one token is available. */
  retryAfterMs: Ms
}

export class TokenBucket {
  readonly capacity: number
  readonly #perMs: number
  #tokens: number
  #updated: Ms

  constructor(opts: { capacity: number; perMinute: number; now: Ms }) {
    this.capacity = opts.capacity
    this.#perMs = opts.perMinute / 60_000
    this.#tokens = opts.capacity
    this.#updated = opts.now
  }

  take(now: Ms): TakeResult {
    this.#refill(now)
    const allowed = this.#tokens >= 1
    if (allowed) this.#tokens -= 1
    return {
      allowed,
      remaining: Math.floor(this.#tokens),
      resetMs: (this.capacity - this.#tokens) / this.#perMs,
      retryAfterMs: allowed ? 0 : (1 - this.#tokens) / this.#perMs,
    }
  }

  /** Time until a token is available (0: one is now), without taking it. */
  wait(now: Ms): Ms {
    this.#refill(now)
    return this.#tokens >= 1 ? 0 : (1 - this.#tokens) / this.#perMs
  }

  #refill(now: Ms): void {
    // A clock that steps backwards (NTP) must not drain or overfill the bucket.
    const elapsed = Math.max(0, now - this.#updated)
    this.#tokens = Math.min(this.capacity, this.#tokens + elapsed * this.#perMs)
    this.#updated = Math.max(this.#updated, now)
  }
}
