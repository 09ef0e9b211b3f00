/**
 * Errors that come from the upstream say so (issue 27): a wrong UPSTREAM_BASE_URL (missing /api/v1) used to turn
 * every chat into a `404 Not Found` indistinguishable from the gateway's own. They keep OpenAI's error shape, the
 * upstream's status and code, and their message starts `Upstream returned <status>: `. And /readyz, with
 * READY_CHECK_UPSTREAM=1, fails while the upstream does not answer GET /models at the configured URL.
 * On every store engine (LMDB, and PostgreSQL when the test cluster is there): the keys requests authenticate with,
 * and their usage and traces, are the store's.
 */
import { once } from 'node:events'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import OpenAI from 'openai'
import t from 'tap'
import { KEY_A, startHarness } from './helpers/harness.js'
import { testableEngines, type StoreEngine } from './helpers/store-engines.js'

const ask = { model: 'openai/gpt-4o-mini', messages: [{ role: 'user' as const, content: 'hi' }] }

/** What /readyz reports for the store engines when they answer: DATA_DIR's LMDB always, PostgreSQL when it is the engine. */
const storesOf = (engine: StoreEngine): Record<string, string> => (engine.name === 'postgres' ? { lmdb: 'ok', postgres: 'ok' } : { lmdb: 'ok' })

for (const engine of testableEngines(t, 'upstream-errors')) {
  t.test(`${engine.name}: a wrong UPSTREAM_BASE_URL: chats fail with an error that says the upstream answered 404, and /readyz says not ready`, async (t) => {
    const h = await startHarness(t, { engine })
    const wrong = h.mock.url.replace(/\/api\/v1$/, '')
    await h.restart({ UPSTREAM_BASE_URL: wrong, READY_CHECK_UPSTREAM: '1' })

    const err = await h.client().chat.completions.create(ask).catch((e: unknown) => e)
    t.type(err, OpenAI.APIError)
    t.match(err, { status: 404, type: 'not_found_error', message: /^404 Upstream returned 404: / }, "the SDK's error names the upstream")
    const raw = await h.fetch('/api/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ask) })
    t.equal(raw.status, 404)
    t.match(await raw.json(), { error: { message: /^Upstream returned 404: \S/, type: 'not_found_error', param: null, code: String } }, "OpenAI's shape")

    const ours = await h.fetch('/api/v1/chat/completion', { method: 'POST' })
    t.match(await ours.json(), { error: { message: 'No route for POST /api/v1/chat/completion', code: 'not_found' } }, "the gateway's own 404 reads differently")

    const models = await h.fetch('/api/v1/models')
    t.equal(models.status, 404)
    t.match(await models.json(), { error: { message: /^Upstream returned 404: / } }, 'the model list relayed from the upstream too')

    const ready = await h.fetch('/readyz', { key: null, provider: null })
    t.equal(ready.status, 503, 'not ready')
    t.same(await ready.json(), { status: 'not_ready', stores: { ...storesOf(engine), upstream: 'unavailable' } })

    await h.restart({ UPSTREAM_BASE_URL: wrong })
    const unchecked = await h.fetch('/readyz', { key: null, provider: null })
    t.equal(unchecked.status, 200, 'without READY_CHECK_UPSTREAM the upstream is not part of readiness')
    t.same(await unchecked.json(), { status: 'ready', stores: storesOf(engine) })
  })

  t.test(`${engine.name}: the right UPSTREAM_BASE_URL: /readyz is ready, and probes are answered from the cached model list`, async (t) => {
    const h = await startHarness(t, { engine, env: { READY_CHECK_UPSTREAM: '1' } })
    const listCalls = (): number => h.mock.requests.filter((r) => r.path === '/api/v1/models').length
    for (let i = 0; i < 3; i++) {
      const ready = await h.fetch('/readyz', { key: null, provider: null })
      t.equal(ready.status, 200, `probe ${i + 1}`)
      t.same(await ready.json(), { status: 'ready', stores: { ...storesOf(engine), upstream: 'ok' } })
    }
    t.equal(listCalls(), 1, 'three probes, one upstream call')

    // Other upstream failures are labelled the same way; the status mapping is unchanged (an upstream 500 is a 502).
    h.mock.enqueue({ status: 500, errorMessage: 'Provider fell over' })
    const e500 = await h.client().chat.completions.create(ask).catch((e: unknown) => e)
    t.match(e500, { status: 502, message: /Upstream returned 500: Provider fell over$/ })
    h.mock.enqueue({ status: 429 })
    const e429 = await h.client().chat.completions.create(ask).catch((e: unknown) => e)
    t.match(e429, { status: 429, code: 'rate_limit_exceeded', message: /Upstream returned 429: / })
  })

  t.test(`${engine.name}: an upstream that wants a key for its model list (401) is reachable: ready, and remembered`, async (t) => {
    let calls = 0
    const upstream = createServer((req, res) => {
      calls++
      res.writeHead(401, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: { message: 'You must provide an API key.', type: 'invalid_request_error', code: 'invalid_api_key' } }))
    })
    upstream.listen(0, '127.0.0.1')
    await once(upstream, 'listening')
    t.teardown(() => new Promise<void>((resolve) => upstream.close(() => resolve())))
    const h = await startHarness(t, { engine })
    await h.restart({ UPSTREAM_BASE_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`, READY_CHECK_UPSTREAM: '1' })
    const before = calls
    for (let i = 0; i < 2; i++) {
      const ready = await h.fetch('/readyz', { key: null, provider: null })
      t.equal(ready.status, 200, `probe ${i + 1}`)
      t.same(await ready.json(), { status: 'ready', stores: { ...storesOf(engine), upstream: 'ok' } })
    }
    t.equal(calls - before, 1, 'two probes, one upstream call')
  })

  t.test(`${engine.name}: a client pointed at /v1 instead of /api/v1: the 404 says where the API is`, async (t) => {
    const h = await startHarness(t, { engine })
    const sdk = new OpenAI({ apiKey: 'sk-or-test', baseURL: `${h.gw.url}/v1`, defaultHeaders: { serviceKey: KEY_A }, maxRetries: 0 })
    const err = await sdk.chat.completions.create(ask).catch((e: unknown) => e)
    t.match(err, { status: 404, code: 'not_found', message: /the API is under \/api\/v1 \(POST \/api\/v1\/chat\/completions\); set the client's base URL to end in \/api\/v1/ })
    const files = await h.fetch('/v1/files/file-x', { method: 'DELETE' })
    t.match(await files.json(), { error: { message: /\(DELETE \/api\/v1\/files\/file-x\)/ } }, 'any route, with its method')
    const none = await h.fetch('/v1/nothing-here', { method: 'POST' })
    t.match(await none.json(), { error: { message: 'No route for POST /v1/nothing-here' } }, 'no hint where there is no such route')
  })
}
