import t from 'tap'
import { RateLimiter, formatDuration } from '../src/auth/rate-limiter.js'
import { TokenBucket } from '../src/auth/token-bucket.js'

t.test('a full bucket allows capacity requests, then refuses with the time to the next token', async (t) => {
  const b = new TokenBucket({ capacity: 10, perMinute: 10, now: 0 })
  for (let i = 0; i < 10; i++) t.equal(b.take(0).allowed, true, `request ${i + 1}`)
  const refused = b.take(0)
  t.equal(refused.allowed, false)
  t.equal(refused.remaining, 0)
  t.equal(refused.retryAfterMs, 6000, 'one token every 6 s at 10/min')
})

t.test('refill is continuous and keeps fractions', async (t) => {
  const b = new TokenBucket({ capacity: 10, perMinute: 10, now: 0 })
  for (let i = 0; i < 10; i++) b.take(0)
  t.equal(b.take(3000).allowed, false, 'half a token is not a request')
  t.equal(b.take(6000).allowed, true, 'the two halves add up to one token')
  t.equal(b.take(6001).allowed, false)
})

t.test('a clock stepping backwards neither drains nor overfills', async (t) => {
  const b = new TokenBucket({ capacity: 2, perMinute: 2, now: 100_000 })
  b.take(100_000)
  const r = b.take(50_000)
  t.equal(r.allowed, true)
  t.equal(b.take(50_000).allowed, false)
})

t.test('rate limiter: per key, per plan, with headers and Retry-After', async (t) => {
  let now = 0
  const limiter = new RateLimiter({
    limits: { free: 2, pro: 100, premium: 500, enterprise: 1000, unlimited: Infinity },
    maxKeys: 100,
    clock: () => now,
  })
  const first = limiter.check('a', 'free')
  t.same(first.headers['x-ratelimit-limit-requests'], '2')
  t.same(first.headers['x-ratelimit-remaining-requests'], '1')
  limiter.check('a', 'free')
  t.throws(() => limiter.enforce('a', 'free'), { status: 429, code: 'rate_limit_exceeded', headers: { 'retry-after': '30' } })
  t.equal(limiter.check('b', 'free').allowed, true, 'another key has its own bucket')
  now += 30_000
  t.equal(limiter.check('a', 'free').allowed, true, 'refilled after Retry-After')
  let refused = 0
  for (let i = 0; i < 5000; i++) if (!limiter.check('u', 'unlimited').allowed) refused++
  t.equal(refused, 0, 'unlimited never refuses')
  t.equal(limiter.check('u', 'unlimited').headers['x-ratelimit-limit-requests'], 'unlimited')
})

t.test('the key map is bounded: an evicted key starts with a full bucket', async (t) => {
  const limiter = new RateLimiter({
    limits: { free: 1, pro: 100, premium: 500, enterprise: 1000, unlimited: Infinity },
    maxKeys: 2,
    clock: () => 0,
  })
  limiter.check('a', 'free')
  t.equal(limiter.check('a', 'free').allowed, false)
  limiter.check('b', 'free')
  limiter.check('c', 'free')
  t.equal(limiter.check('a', 'free').allowed, true, 'a was evicted (LRU of 2)')
})

t.test('reset durations use OpenAI-style units', async (t) => {
  t.equal(formatDuration(250), '250ms')
  t.equal(formatDuration(6000), '6s')
  t.equal(formatDuration(66_000), '1m6s')
})
