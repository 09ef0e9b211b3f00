/**
 * Replicas sharing one Redis: two `recallgate serve` processes on their own ports (own DATA_DIRs), one plan's limit
 * enforced across both, readiness that sees the store, and the configured behaviour when Redis is down.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { startMockUpstream } from '../src/mock-upstream.js'
import { spawnGateway } from './helpers/child-gateway.js'
import { startHarness } from './helpers/harness.js'
import { freePort, sharedRedisUrl, skipWithout } from './helpers/services.js'

// Child gateways start in ~1 s from dist (CI), but from source under a loaded machine each can take tens of seconds.
t.setTimeout(360_000)
const READY = { readyTimeoutMs: 150_000 }

const KEY = `sk-replica-test-${process.pid}-${Date.now()}`

t.test('a free plan of 5 per minute admits exactly 5 across two replicas', { skip: skipWithout('redis') }, async (t) => {
  const redisUrl = await sharedRedisUrl(t)
  const mock = await startMockUpstream({})
  t.teardown(() => mock.close())
  const env = (): Record<string, string> => ({
    UPSTREAM_BASE_URL: mock.url,
    DATA_DIR: mkdtempSync(join(tmpdir(), 'recallgate-replica-')),
    SERVICE_KEYS: `${KEY}:free`,
    RATE_LIMITS: 'free:5',
    REDIS_URL: redisUrl,
    // A command timing out on a loaded machine is a store error, and the local fallback then admits: not this test.
    REDIS_TIMEOUT_MS: '10000',
  })
  const [a, b] = await Promise.all([spawnGateway(env(), READY), spawnGateway(env(), READY)])
  t.teardown(() => Promise.all([a.stop(), b.stop()]))

  for (const gw of [a, b]) {
    const ready = await fetch(`${gw.url}/readyz`)
    t.equal(ready.status, 200)
    t.same(await ready.json(), { status: 'ready', stores: { lmdb: 'ok', redis: 'ok' } })
  }

  const replies = await Promise.all(
    Array.from({ length: 12 }, (_, i) => fetch(`${(i % 2 ? a : b).url}/api/v1/sessions`, { headers: { serviceKey: KEY } })),
  )
  const ok = replies.filter((r) => r.status === 200)
  const limited = replies.filter((r) => r.status === 429)
  t.equal(ok.length, 5, 'exactly the plan, whichever replica answered')
  t.equal(limited.length, 7)
  t.same(
    ok.map((r) => Number(r.headers.get('x-ratelimit-remaining-requests'))).sort(),
    [0, 1, 2, 3, 4],
    'each admitted request saw the shared count',
  )
  const refused = limited[0] as Response
  t.equal(refused.headers.get('x-ratelimit-limit-requests'), '5')
  t.equal(refused.headers.get('retry-after'), '12', 'one request every 12 s at 5 per minute')
  t.match(await refused.json(), { error: { code: 'rate_limit_exceeded', type: 'rate_limit_error' } })
})

t.test('Redis unreachable: allow keeps serving on the local limiter and stays ready; deny answers 503', async (t) => {
  const closed = `redis://127.0.0.1:${await freePort()}`
  const allow = await startHarness(t, { env: { REDIS_URL: closed, REDIS_TIMEOUT_MS: '100', RATE_LIMITS: 'free:2' } })

  const statuses = []
  for (let i = 0; i < 3; i++) statuses.push((await allow.fetch('/api/v1/sessions', { key: 'sk-test-free-plan-0003-Vq8Zr3Lw5Ym2' })).status)
  t.same(statuses, [200, 200, 429], 'the local bucket of 2 decides')
  const ready = await allow.fetch('/readyz', { key: null })
  t.equal(ready.status, 200, 'with allow, a Redis outage does not take the replica out of the balancer')
  t.same(await ready.json(), { status: 'ready', stores: { lmdb: 'ok', redis: 'unavailable' } })
  await allow.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }], ...({ sessionId: 'm' } as object) })
  const metrics = await (await allow.fetch('/metrics', { key: null })).text()
  t.match(metrics, /recallgate_store_operation_seconds_count\{store="lmdb",op="commit"\} 1\n/, 'the saved exchange: one durable commit')
  t.match(metrics, /recallgate_store_errors_total\{store="redis",op="rate_check"\} [1-9]/)
  t.match(metrics, /recallgate_rate_limit_fallback_total\{outcome="allowed"\} 2/)
  t.match(metrics, /recallgate_rate_limit_fallback_total\{outcome="limited"\} 1/)
  t.match(allow.logs(), /rate-limit store failing/)

  const deny = await startHarness(t, { env: { REDIS_URL: closed, REDIS_TIMEOUT_MS: '100', RATE_LIMIT_ON_STORE_ERROR: 'deny' } })

  const refused = await deny.fetch('/api/v1/sessions', { key: 'sk-test-free-plan-0003-Vq8Zr3Lw5Ym2' })
  t.equal(refused.status, 503)
  t.equal(refused.headers.get('retry-after'), '1')
  t.match(await refused.json(), { error: { code: 'rate_limit_unavailable', type: 'api_error' } })
  const unlimited = await deny.fetch('/api/v1/sessions')
  t.equal(unlimited.status, 200, 'unlimited keys never need the store')
  t.equal((await deny.fetch('/readyz', { key: null })).status, 503, 'with deny, Redis is required for readiness')
})
