/**
 * The upstream's model list is cached for MODELS_CACHE_TTL_MS (README, endpoints table): within the TTL every
 * `models.list`, `models.retrieve` and chat is answered from one fetch; past it the stale list is served at once and
 * refreshed in the background, after which a model the upstream added is listed. Time is advanced through the
 * gateway's injected clock, never slept.
 * On every store engine (LMDB, and PostgreSQL when the test cluster is there): the keys requests authenticate with,
 * and their usage and traces, are the store's.
 */
import { once } from 'node:events'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import type { MockModel } from '../src/mock-upstream/types.js'
import { UpstreamClient } from '../src/upstream/client.js'
import { ModelCatalog } from '../src/upstream/model-catalog.js'
import { startHarness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'
import { until } from './helpers/until.js'

const TTL_MS = 60_000

for (const engine of testableEngines(t, 'models-cache')) {
  t.test(`${engine.name}: the model list is fetched once per MODELS_CACHE_TTL_MS; past it, the stale list is served and refreshed behind`, async (t) => {
    // The mock reads this array on every GET /models: pushing to it is the upstream adding a model.
    const models: MockModel[] = [
      { id: 'openai/gpt-4o', context_length: 128_000 },
      { id: 'anthropic/claude-3.5-sonnet', context_length: 200_000 },
    ]
    let skipped = 0
    const h = await startHarness(t, {
      engine,
      env: { MODELS_CACHE_TTL_MS: String(TTL_MS) },
      mock: { models },
      gateway: { clock: () => performance.timeOrigin + performance.now() + skipped },
    })
    const client = h.client()
    const fetches = (): number => h.mock.requests.filter((r) => r.method === 'GET' && r.path === '/api/v1/models').length
    const ids = async (): Promise<string[]> => (await client.models.list()).data.map((m) => m.id).sort()

    t.same(await ids(), ['anthropic/claude-3.5-sonnet', 'openai/gpt-4o'])
    t.equal(fetches(), 1, 'the first list is fetched')
    await client.chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }], ...({ useRAG: false } as object) })
    await client.models.retrieve('anthropic/claude-3.5-sonnet')

    models.push({ id: 'mistralai/new-model', context_length: 32_000 })
    skipped += TTL_MS - 1_000
    t.same(await ids(), ['anthropic/claude-3.5-sonnet', 'openai/gpt-4o'], 'within the TTL: the cached list, without the new model')
    t.equal(fetches(), 1, 'a list, a chat, a retrieve and another list within the TTL share one fetch')

    skipped += 2_000
    t.same(await ids(), ['anthropic/claude-3.5-sonnet', 'openai/gpt-4o'], 'past the TTL: the stale list is answered at once')
    await until(() => fetches() === 2, 'the background refresh of the model list')
    await until(async () => (await ids()).includes('mistralai/new-model'), 'the refreshed list to be served')
    t.match(await client.models.retrieve('mistralai/new-model'), { id: 'mistralai/new-model', context_length: 32_000 })
    t.equal(fetches(), 2, 'one refresh, then served from cache again')
  })

  t.test(`${engine.name}: a request that leaves stops waiting on the model list; the shared fetch goes on for the others`, async (t) => {
    // A /models that answers only when told to, so both waiters are in line for the same fetch.
    let answer: () => void = () => undefined
    let seen = 0
    const server = createServer((req, res) => {
      seen++
      answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: [{ id: 'm', context_length: 4096 }] }))
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const upstream = new UpstreamClient({
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`,
      connectTimeout: 5_000,
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
      connections: 2,
    })
    t.teardown(async () => {
      await upstream.close()
      server.closeAllConnections()
      server.close()
    })
    const catalog = new ModelCatalog({ upstream, ttl: 60_000, clock: () => 0 })
    const leaving = new AbortController()
    const gone = catalog.contextLength('m', undefined, { signal: leaving.signal })
    const staying = catalog.contextLength('m', undefined, { signal: new AbortController().signal })
    await until(() => seen === 1, 'the list requested')
    leaving.abort()
    await t.rejects(gone, { name: 'AbortError' }, 'the request that left stops waiting at once')
    answer()
    t.equal(await staying, 4096, 'the other still gets the list from the same fetch')
    t.equal(seen, 1, 'one fetch for both')
  })
}
