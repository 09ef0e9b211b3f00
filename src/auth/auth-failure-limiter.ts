/**
 * Failed authentications limited per client address (AUTH_FAILURE_LIMIT a minute, a token bucket per address, at
 * most AUTH_FAILURE_MAX_ADDRESSES of them, least recently used forgotten). Past the budget, a request from that
 * address whose key fails is answered 429 with Retry-After instead of 401, and unknown keys are no longer looked up
 * in the database (PostgreSQL's per-miss query is what a flood of bad keys would cost).
 *
 * A valid key is still served from a limited address, on purpose: behind a proxy or a NAT every client shares one
 * address, and one client retrying a wrong key must not lock all of them out (that would hand any tenant a way to
 * deny service to the others). Guessing is not what this stops: a key holds 192 random bits, and inline keys must
 * hold as many (config.ts).
 */
import { LRUCache } from 'lru-cache'
import { isIPv4 } from 'node:net'
import { gatewayError, type GatewayError } from '../errors.js'
import type { Clock } from '../types.js'
import { TokenBucket } from './token-bucket.js'

const AUTH_FAILURES: ReadonlySet<string> = new Set(['missing_service_key', 'invalid_service_key'])

export class AuthFailureLimiter {
  readonly #perMinute: number
  readonly #clock: Clock
  readonly #buckets: LRUCache<string, TokenBucket>

  constructor(o: { perMinute: number; maxAddresses: number; clock: Clock }) {
    this.#perMinute = o.perMinute
    this.#clock = o.clock
    this.#buckets = new LRUCache({ max: o.maxAddresses })
  }

  /** Whether this address has used up its failures (its unknown keys are then not looked up any further). */
  limited(address: string | undefined): boolean {
    return (this.#buckets.get(addressKey(address))?.wait(this.#clock()) ?? 0) > 0
  }

  /**
   * After `err` ended an authentication: count it when it is a failed key, and return the 429 to answer instead
   * when the address is past its budget. Undefined: answer `err` itself.
   */
  refuse(address: string | undefined, err: unknown): GatewayError | undefined {
    if ((err as GatewayError).code === undefined || !AUTH_FAILURES.has((err as GatewayError).code)) return undefined
    const key = addressKey(address)
    const now = this.#clock()
    let bucket = this.#buckets.get(key)
    if (bucket === undefined) this.#buckets.set(key, (bucket = new TokenBucket({ capacity: this.#perMinute, perMinute: this.#perMinute, now })))
    const taken = bucket.take(now)
    if (taken.allowed) return undefined
    const seconds = Math.max(1, Math.ceil(taken.retryAfterMs / 1000))
    return gatewayError('rate_limit_exceeded', {
      message: `Too many failed authentications from your address (${this.#perMinute} a minute): check your service key, and retry in ${seconds}s`,
      headers: { 'retry-after': String(seconds) },
    })
  }
}

/**
 * What failures are counted by: an IPv4 address as it is (also when IPv4-mapped), an IPv6 address by its /64, the
 * block one host or customer is usually given (counting single IPv6 addresses would let one host rotate past it).
 */
export function addressKey(address: string | undefined): string {
  if (address === undefined || address === '') return 'unknown'
  const plain = address.split('%', 1)[0] ?? address
  if (isIPv4(plain)) return plain
  if (plain.startsWith('::ffff:') && isIPv4(plain.slice(7))) return plain.slice(7)
  const [head = '', tail] = plain.split('::')
  const front = head === '' ? [] : head.split(':')
  const back = tail === undefined || tail === '' ? [] : tail.split(':')
  const groups = tail === undefined ? front : [...front, ...Array<string>(Math.max(0, 8 - front.length - back.length)).fill('0'), ...back]
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g || '0', 16).toString(16))
    .join(':')}::/64`
}
