/**
 * The Redis connection (ioredis) and the one script recallgate runs on it: a token bucket per key, taken atomically
 * with Redis's own clock so every replica agrees on time. This module owns the connection; the limiter in
 * auth/shared-rate-limiter.ts sees only `take` and `ping`.
 *
 * Why ioredis over node-redis: one run, same Redis 7.0 on loopback, this script, 5 interleaved rounds (Node 20,
 * 2-core VM): serial p50 0.050–0.127 ms vs 0.059–0.156 ms, client CPU per call 9.9–11.3 µs vs 13.5–14.4 µs, calls/s
 * at 32 in flight ~47k vs ~40k. ioredis also has the bounds this needs built in: a per-command timeout, failing at
 * once instead of queueing while disconnected, and EVALSHA with an automatic EVAL fallback.
 *
 * Bounds: a command waits at most `timeout` (then it is a store error, and the limiter falls back); nothing queues
 * while the connection is down (`enableOfflineQueue: false`), so an outage costs a request one failed write, not a
 * wait; reconnects back off up to 2 s.
 */
import { Redis } from 'ioredis'
import type { TakeResult } from '../auth/token-bucket.js'
import type { Ms } from '../types.js'

/**
 * The bucket: hash {t: tokens (fractional), u: last update (ms, Redis TIME)}. Refill is continuous, as in the local
 * token-bucket.ts; a key expires once the bucket would be full again (a missing key and a full bucket are the same
 * thing), so idle keys cost nothing. A clock step backwards neither drains nor overfills. Numbers leave Lua as
 * strings: Lua→Redis integer replies would truncate the fractions.
 */
const TAKE = `
local cap = tonumber(ARGV[1])
local perMs = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local v = redis.call('HMGET', KEYS[1], 't', 'u')
local tokens = tonumber(v[1])
local updated = tonumber(v[2])
if tokens == nil or updated == nil then tokens = cap; updated = now end
local elapsed = now - updated
if elapsed < 0 then elapsed = 0 end
tokens = math.min(cap, tokens + elapsed * perMs)
if now > updated then updated = now end
local allowed = 0
if tokens >= 1 then tokens = tokens - 1; allowed = 1 end
local resetMs = (cap - tokens) / perMs
redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'u', string.format('%.17g', updated))
redis.call('PEXPIRE', KEYS[1], math.ceil(resetMs) + 1000)
local retry = 0
if allowed == 0 then retry = (1 - tokens) / perMs end
return {allowed, string.format('%.17g', tokens), string.format('%.17g', resetMs), string.format('%.17g', retry)}
`

type TakeReply = [number, string, string, string]
interface ScriptedRedis extends Redis {
  rgTake(key: string, capacity: string, perMs: string): Promise<TakeReply>
}

export interface RedisStoreOptions {
  url: string
  /** Longest wait for connecting and for one command. */
  timeout: Ms
  /** Prepended to every key. */
  keyPrefix: string
  /** Connection state changes (lost / back), for the log. Not called per failed command. */
  onConnectionChange?: (up: boolean, err?: Error) => void
}

export interface RedisStore {
  /** Take one token from the bucket `key` (capacity = per-minute figure, refilled continuously). */
  take(key: string, capacity: number, perMinute: number): Promise<TakeResult>
  /** Round trip to Redis (readiness). Rejects when it cannot answer within the timeout. */
  ping(): Promise<void>
  close(): Promise<void>
}

/** Connect (waiting at most `timeout` for the first connection: a Redis down at start is not fatal) and define the script. */
export async function openRedis(opts: RedisStoreOptions): Promise<RedisStore> {
  const client = new Redis(opts.url, {
    keyPrefix: opts.keyPrefix,
    connectTimeout: opts.timeout,
    commandTimeout: opts.timeout,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: (times) => Math.min(100 * times, 2_000),
    lazyConnect: true,
  }) as ScriptedRedis
  client.defineCommand('rgTake', { numberOfKeys: 1, lua: TAKE })
  let up = false
  client.on('ready', () => {
    if (!up) opts.onConnectionChange?.(true)
    up = true
  })
  // ioredis emits 'error' on every failed reconnect; without a listener that would crash the process. The state
  // change is reported once per outage; each failed check is counted by the limiter.
  client.on('error', (err: Error) => {
    if (up) opts.onConnectionChange?.(false, err)
    up = false
  })
  client.on('close', () => {
    if (up) opts.onConnectionChange?.(false)
    up = false
  })
  try {
    await client.connect()
  } catch (err) {
    // Deliberately not fatal: the limiter falls back and ioredis keeps reconnecting; readiness reports the outage.
    opts.onConnectionChange?.(false, err as Error)
  }

  return {
    async take(key, capacity, perMinute) {
      const [allowed, tokens, resetMs, retryMs] = await client.rgTake(key, String(capacity), String(perMinute / 60_000))
      return {
        allowed: allowed === 1,
        remaining: Math.floor(Number(tokens)),
        resetMs: Number(resetMs),
        retryAfterMs: Number(retryMs),
      }
    },
    async ping() {
      await client.ping()
    },
    async close() {
      client.disconnect()
    },
  }
}
