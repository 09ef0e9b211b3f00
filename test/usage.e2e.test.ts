/**
 * Usage per tenant (issue 27, item 9): every request the upstream accepted, chat (JSON and streamed) and Responses,
 * counts toward its tenant's row for the model and the UTC day; GET /api/v1/usage returns the caller's own rows and
 * /metrics the sums without a tenant label. The gateway's wall clock is injected, so the day is known. On every store
 * engine (LMDB, and PostgreSQL when the test cluster is there).
 */
import OpenAI from 'openai'
import t from 'tap'
import { KEY_B, startHarness } from './helpers/harness.js'
import { freshDatabase, POSTGRES_SKIP_REASON, testDatabaseUrl } from './helpers/services.js'
import { testableEngines } from './helpers/store-engines.js'

const NOW = Date.UTC(2026, 10, 25, 23, 30)

/** The usage list without its quota report (test/quotas.e2e.test.ts checks that). */
async function listOf(r: Response): Promise<Record<string, unknown>> {
  const body = (await r.json()) as Record<string, unknown>
  delete body.plan
  delete body.quotas
  return body
}

for (const engine of testableEngines(t, 'usage per tenant')) {
  t.test(`${engine.name}: chat and responses count toward the caller own usage per model and day, readable at once and after a restart`, async (t) => {
    const h = await startHarness(t, { engine, gateway: { now: () => NOW } })
    const client = h.client()
    const ask = (content: string) => ({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user' as const, content }] })
    const one = await client.chat.completions.create(ask('hello there'))
    const two = await client.chat.completions.create(ask('hello there again'))
    let streamed: OpenAI.CompletionUsage | undefined
    for await (const chunk of await client.chat.completions.create({ ...ask('a stream'), stream: true, stream_options: { include_usage: true } }))
      streamed = chunk.usage ?? streamed
    const resp = await client.responses.create({ model: 'openai/gpt-4o', input: 'via responses' })

    // The upstream refuses this one: not counted.
    h.mock.enqueue({ status: 400, errorMessage: 'nope' })
    const refused = await client.chat.completions.create(ask('refused')).catch((e: unknown) => e)
    t.type(refused, OpenAI.BadRequestError)
    // Refused by the gateway before the upstream: not counted either.
    await client.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [] }).catch(() => undefined)

    const chats = [one.usage, two.usage, streamed]
    const sum = (f: (u: OpenAI.CompletionUsage) => number): number => chats.reduce((n, u) => n + (u ? f(u) : 0), 0)
    const expected = [
      {
        date: '2026-11-25',
        model: 'openai/gpt-4o',
        requests: 1,
        input_tokens: resp.usage?.input_tokens,
        output_tokens: resp.usage?.output_tokens,
        cached_tokens: resp.usage?.input_tokens_details.cached_tokens ?? 0,
      },
      {
        date: '2026-11-25',
        model: 'openai/gpt-4o-mini',
        requests: 3,
        input_tokens: sum((u) => u.prompt_tokens),
        output_tokens: sum((u) => u.completion_tokens),
        cached_tokens: sum((u) => u.prompt_tokens_details?.cached_tokens ?? 0),
      },
    ]
    t.ok(expected[1]?.input_tokens && expected[1].output_tokens, 'the upstream reported tokens')
    const res = await h.fetch('/api/v1/usage')
    t.equal(res.status, 200)
    t.same(await listOf(res), { object: 'list', data: expected }, "what the SDK was told, summed per model, readable at once")

    t.same(await listOf(await h.fetch('/api/v1/usage?from=2026-11-25&to=2026-11-25')), { object: 'list', data: expected }, 'from and to are inclusive')
    t.same(await listOf(await h.fetch('/api/v1/usage?from=2026-11-26')), { object: 'list', data: [] })
    t.same(await listOf(await h.fetch('/api/v1/usage', { key: KEY_B })), { object: 'list', data: [] }, "another tenant sees none of it")

    const bad = await h.fetch('/api/v1/usage?from=2026-02-30')
    t.equal(bad.status, 400)
    t.same(await bad.json(), {
      error: { message: 'from must be a UTC date as YYYY-MM-DD', type: 'invalid_request_error', param: 'from', code: 'invalid_parameter' },
    })
    const reversed = await h.fetch('/api/v1/usage?from=2026-11-26&to=2026-11-25')
    t.match(await reversed.json(), { error: { param: 'from', code: 'invalid_parameter' } })
    t.equal((await h.fetch('/api/v1/usage', { key: null })).status, 401, 'a service key is needed')

    const metrics = await (await h.fetch('/metrics', { key: null, provider: null })).text()
    t.match(metrics, /recallgate_usage_requests_total\{model="openai\/gpt-4o-mini"\} 3\n/)
    t.match(metrics, /recallgate_usage_requests_total\{model="openai\/gpt-4o"\} 1\n/)
    t.notMatch(metrics, /recallgate_usage_requests_total\{[^}]*tenant/, 'no tenant label')

    // Recorded and not yet flushed by its timer: the graceful stop writes it.
    await client.chat.completions.create(ask('last one'))
    await h.restart()
    const after = (await (await h.fetch('/api/v1/usage')).json()) as { data: Array<{ model: string; requests: number }> }
    t.same(after.data.map((r) => [r.model, r.requests]), [['openai/gpt-4o', 1], ['openai/gpt-4o-mini', 4]], 'kept in the store across a restart')
  })
}

// Two replicas on one database: PostgreSQL's alone (LMDB's processes share a DATA_DIR, not rows across hosts).
const databaseUrl = testDatabaseUrl()
t.test('with DATABASE_URL, usage is kept in PostgreSQL and two replicas add to the same rows', { skip: databaseUrl === undefined ? POSTGRES_SKIP_REASON : false }, async (t) => {
  const url = await freshDatabase(t, databaseUrl as string)
  const a = await startHarness(t, { env: { DATABASE_URL: url }, gateway: { now: () => NOW } })
  const b = await startHarness(t, { env: { DATABASE_URL: url }, gateway: { now: () => NOW } })
  const ask = { model: 'openai/gpt-4o-mini', messages: [{ role: 'user' as const, content: 'hi' }] }
  await a.client().chat.completions.create(ask)
  await b.client().chat.completions.create(ask)
  await b.close()
  const rows = (await (await a.fetch('/api/v1/usage')).json()) as { data: Array<{ date: string; model: string; requests: number }> }
  t.same(rows.data.map((r) => [r.date, r.model, r.requests]), [['2026-11-25', 'openai/gpt-4o-mini', 2]], "one row, both replicas' requests")
})
