/**
 * The shared (Redis) rate limiter against a real redis-server: the bucket script, its headers and expiry, several
 * limiters (= replicas) sharing one plan exactly, and what happens when Redis is unreachable, stopped and back.
 */
import { randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { Redis } from 'ioredis'
import { RateLimiter, enforceDecision, type RateDecision } from '../src/auth/rate-limiter.js'
import { SharedRateLimiter, type FallbackOutcome, type SharedRateLimiterOptions } from '../src/auth/shared-rate-limiter.js'
import { openRedis, type RedisStore } from '../src/storage/redis.js'
import type { Plan } from '../src/types.js'
import { freePort, ownRedis, sharedRedisUrl, skipWithout } from './helpers/services.js'

const LIMITS: Record<Plan, number> = { free: 3, pro: 10, premium: 500, enterprise: 1000, unlimited: Infinity }

async function store(t: Test, url: string, prefix: string): Promise<RedisStore> {
  const s = await openRedis({ url, timeout: 200, keyPrefix: prefix })
  t.teardown(() => s.close())
  return s
}

function limiter(buckets: RedisStore, over: Partial<SharedRateLimiterOptions> = {}): SharedRateLimiter {
  return new SharedRateLimiter({
    buckets,
    local: new RateLimiter({ limits: LIMITS, maxKeys: 100, clock: over.clock ?? Date.now }),
    onStoreError: 'allow',
    retryAfter: 1000,
    clock: Date.now,
    ...over,
  })
}

t.test('one bucket per key in Redis: headers, refusal, Retry-After, expiry', { skip: skipWithout('redis') }, async (t) => {
  const url = await sharedRedisUrl(t)
  const prefix = `test:${randomUUID()}:`
  const l = limiter(await store(t, url, prefix))
  const seen: RateDecision[] = []
  for (let i = 0; i < 4; i++) seen.push(await l.check('tenant-a', 'free'))
  t.same(
    seen.map((d) => [d.allowed, d.headers['x-ratelimit-limit-requests'], d.headers['x-ratelimit-remaining-requests']]),
    [
      [true, '3', '2'],
      [true, '3', '1'],
      [true, '3', '0'],
      [false, '3', '0'],
    ],
  )
  // 3 per minute: one token every 20 s; the bucket is ~3 tokens short of full (~60 s).
  const refused = seen[3] as RateDecision
  t.ok(refused.retryAfterSeconds >= 19 && refused.retryAfterSeconds <= 20, `Retry-After ${refused.retryAfterSeconds}`)
  t.match(refused.headers['x-ratelimit-reset-requests'], /^(59s|1m0s)$/)
  t.throws(() => enforceDecision(refused, 'free'), { status: 429, code: 'rate_limit_exceeded', headers: { 'retry-after': String(refused.retryAfterSeconds) } })
  t.equal((await l.check('tenant-b', 'free')).allowed, true, 'another tenant has its own bucket')

  const raw = new Redis(url)
  t.teardown(() => raw.disconnect())
  const keys = await raw.keys(`${prefix}*`)
  t.equal(keys.length, 2, 'one key per tenant and plan, under the prefix')
  const ttl = await raw.pttl(`${prefix}rl:tenant-a:free`)
  t.ok(ttl > 55_000 && ttl <= 61_000, `expires once the bucket would be full again (pttl ${ttl})`)
})

t.test('unlimited plans never touch Redis', async (t) => {
  const calls: string[] = []
  const l = limiter({ take: async (k) => (calls.push(k), Promise.reject(new Error('no'))), ping: async () => {}, close: async () => {} })
  const d = l.check('u', 'unlimited')
  t.notOk(d instanceof Promise, 'answered synchronously')
  t.equal((d as RateDecision).headers['x-ratelimit-limit-requests'], 'unlimited')
  t.same(calls, [])
})

t.test('three limiters on three connections (three replicas) admit exactly the plan, concurrently', { skip: skipWithout('redis') }, async (t) => {
  const url = await sharedRedisUrl(t)
  const prefix = `test:${randomUUID()}:`
  const replicas = [limiter(await store(t, url, prefix)), limiter(await store(t, url, prefix)), limiter(await store(t, url, prefix))]
  const decisions = await Promise.all(Array.from({ length: 40 }, (_, i) => (replicas[i % 3] as SharedRateLimiter).check('tenant', 'pro')))
  t.equal(decisions.filter((d) => d.allowed).length, 10, 'exactly the pro plan of 10, not 10 per replica')
  const remaining = decisions.filter((d) => d.allowed).map((d) => Number(d.headers['x-ratelimit-remaining-requests']))
  t.same([...remaining].sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 'each admitted request saw its own count')
})

t.test('Redis unreachable: allow falls back to the local limiter, deny answers 503; both counted', async (t) => {
  const port = await freePort() // nothing listens here
  const buckets = await store(t, `redis://127.0.0.1:${port}`, 'x:')
  let now = 0
  const outages: unknown[] = []
  const fallbacks: FallbackOutcome[] = []
  let calls = 0
  const counting = { ...buckets, take: (k: string, c: number, p: number) => (calls++, buckets.take(k, c, p)) }
  const allow = limiter(counting, {
    clock: () => now,
    onOutage: (err) => outages.push(err),
    onFallback: (o) => fallbacks.push(o),
  })
  const answers: boolean[] = []
  for (let i = 0; i < 5; i++) answers.push((await allow.check('tenant', 'free')).allowed)
  t.same(answers, [true, true, true, false, false], 'the local bucket of 3 decides')
  t.equal(outages.length, 1, 'the outage is reported once, not per request')
  t.same(fallbacks, ['allowed', 'allowed', 'allowed', 'limited', 'limited'])
  t.equal(calls, 1, 'within REDIS_RETRY_MS the store is not tried again')
  now += 1001
  await allow.check('tenant', 'free')
  t.equal(calls, 2, 'tried again after REDIS_RETRY_MS')

  const deny = limiter(buckets, { onStoreError: 'deny' })
  await t.rejects(Promise.resolve().then(() => deny.check('tenant', 'free')), {
    status: 503,
    code: 'rate_limit_unavailable',
    headers: { 'retry-after': '1' },
  })
})

t.test('Redis stopped mid-run, then back: falls back, then shares again without a restart', { skip: skipWithout('redis-server') }, async (t) => {
  const redis = await ownRedis(t)
  let now = 0
  const events: string[] = []
  const buckets = await store(t, redis.url, 'y:')
  const l = limiter(buckets, {
    clock: () => now,
    onOutage: () => events.push('outage'),
    onRecovery: () => events.push('recovery'),
  })
  t.equal((await l.check('tenant', 'free')).allowed, true)
  await redis.stop()
  // The local bucket starts full: while Redis is gone each process enforces the whole plan on its own.
  const during = []
  for (let i = 0; i < 4; i++) during.push((await l.check('tenant', 'free')).allowed)
  t.same(during, [true, true, true, false])
  t.same(events, ['outage'])
  await redis.start()
  // ioredis reconnects with a backoff; wait for a ping to go through, then let the retry interval pass.
  for (let i = 0; i < 100; i++) {
    try {
      await buckets.ping()
      break
    } catch {
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  now += 1001
  const after = await l.check('tenant', 'free')
  t.same(events, ['outage', 'recovery'])
  t.equal(after.headers['x-ratelimit-remaining-requests'], '2', 'a fresh shared bucket (the restarted Redis kept nothing)')
})
