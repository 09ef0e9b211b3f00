/**
 * The upstream's model list is cached for MODELS_CACHE_TTL_MS (README, endpoints table): within the TTL every
 * `models.list`, `models.retrieve` and chat is answered from one fetch; past it the stale list is served at once and
 * refreshed in the background, after which a model the upstream added is listed. Time is advanced through the
 * gateway's injected clock, never slept.
 */
import t from 'tap'
import type { MockModel } from '../src/mock-upstream/types.js'
import { startHarness } from './helpers/harness.js'
import { until } from './helpers/until.js'

const TTL_MS = 60_000

t.test('the model list is fetched once per MODELS_CACHE_TTL_MS; past it, the stale list is served and refreshed behind', async (t) => {
  // The mock reads this array on every GET /models: pushing to it is the upstream adding a model.
  const models: MockModel[] = [
    { id: 'openai/gpt-4o', context_length: 128_000 },
    { id: 'anthropic/claude-3.5-sonnet', context_length: 200_000 },
  ]
  let skipped = 0
  const h = await startHarness(t, {
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
