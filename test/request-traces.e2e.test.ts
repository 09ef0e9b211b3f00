/**
 * Request traces end to end: what the console's requests view reads. Each chat's prompt as sent upstream, labelled
 * part by part with tokens and sources, what was left out, bounded per tenant, tenant-scoped, deleted with its
 * session, and never holding the provider key. On every store engine (LMDB, and PostgreSQL when the test cluster is
 * there).
 */
import t from 'tap'
import { KEY_A, KEY_B, PROVIDER_KEY, startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'
import { uploadJson } from './helpers/uploads.js'

type Part = { part: string; tokens: number; message: { role: string; content: unknown }; sources?: Array<{ filename: string; score: number }> }
type Trace = { id: string; model: string; session_id: string | null; status: number; prompt_tokens: number; completion_tokens: number; total_tokens_packed: number; parts: Part[]; left_out: { historyMessages: number; chunks: number } }

async function json<T>(h: Harness, path: string, key = KEY_A): Promise<{ status: number; body: T }> {
  const r = await h.fetch(path, { key, provider: null })
  return { status: r.status, body: (await r.json()) as T }
}

async function chat(h: Harness, body: Record<string, unknown>, key = KEY_A): Promise<string> {
  const r = await h.fetch('/api/v1/chat/completions', { method: 'POST', key, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/gpt-4o', ...body }) })
  t.equal(r.status, 200)
  await r.text()
  return r.headers.get('x-request-id') ?? ''
}

for (const engine of testableEngines(t, 'request traces')) {
  t.test(`${engine.name}: a chat with history and an excerpt is traced part by part, by its x-request-id`, async (t) => {
    const h = await startHarness(t, { engine })
    const up = await uploadJson(h, { filename: 'zorbelt.txt', content: 'The walrus colony at Cape Zorbelt numbers 4,217 animals.' }, { provider: null })
    t.equal(up.status, 201)
    await chat(h, { messages: [{ role: 'user', content: 'Hello there, I am Ada.' }], sessionId: 'traced', useRAG: false })
    const id = await chat(h, {
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'How many animals are in the walrus colony at Cape Zorbelt?' }],
      sessionId: 'traced',
    })
    const list = await json<{ data: Array<{ id: string; model: string; session_id: string; status: number }>; enabled: boolean }>(h, '/api/v1/requests')
    t.equal(list.body.enabled, true)
    t.equal(list.body.data.length, 2)
    t.match(list.body.data[0], { id, model: 'openai/gpt-4o', session_id: 'traced', status: 200 }, 'newest first')

    const one = await json<Trace>(h, `/api/v1/requests/${id}`)
    t.equal(one.status, 200)
    t.same(one.body.parts.map((p) => p.part), ['system', 'history', 'history', 'excerpts', 'request'])
    t.equal(one.body.parts[0]?.message.content, 'Be brief.')
    t.equal(one.body.parts[3]?.sources?.[0]?.filename, 'zorbelt.txt', 'excerpts name their file')
    t.ok(JSON.stringify(one.body.parts[3]?.message.content).includes('4,217'), 'and carry the excerpt as sent')
    t.same(h.mock.lastChatBody()?.messages, one.body.parts.map((p) => p.message), 'the messages exactly as sent upstream')
    t.ok(one.body.parts.every((p) => p.tokens > 0), 'each part has its tokens')
    t.ok(one.body.prompt_tokens > 0 && one.body.completion_tokens > 0)
    t.notOk(JSON.stringify(one.body).includes(PROVIDER_KEY), 'never the provider key')

    const other = await json<unknown>(h, `/api/v1/requests/${id}`, KEY_B)
    t.equal(other.status, 404, "another tenant's trace is not found")
    t.same((await json<{ data: unknown[] }>(h, '/api/v1/requests', KEY_B)).body.data, [])

    const del = await h.fetch('/api/v1/sessions/traced', { method: 'DELETE', provider: null })
    t.equal(del.status, 200)
    t.same((await json<{ data: unknown[] }>(h, '/api/v1/requests')).body.data, [], "the session's traces went with it")
  })

  t.test(`${engine.name}: REQUEST_TRACES bounds what a tenant keeps; 0 records nothing`, async (t) => {
    const h = await startHarness(t, { engine, env: { REQUEST_TRACES: '2' } })
    const ids: string[] = []
    for (let i = 0; i < 4; i++) ids.push(await chat(h, { messages: [{ role: 'user', content: `question ${i}` }], useRAG: false }))
    t.same((await json<{ data: Array<{ id: string }> }>(h, '/api/v1/requests')).body.data.map((d) => d.id), [ids[3], ids[2]])
    await h.restart({ REQUEST_TRACES: '0' })
    await chat(h, { messages: [{ role: 'user', content: 'untraced' }], useRAG: false })
    const off = await json<{ data: Array<{ id: string }>; enabled: boolean }>(h, '/api/v1/requests')
    t.equal(off.body.enabled, false)
    t.notOk(off.body.data.some((d) => !ids.includes(d.id)), 'nothing new was recorded')
  })

  t.test(`${engine.name}: a stream that fails after its 200 is traced with its error, not as a success`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { reply: 'a reply long enough to come in several chunks', chunkChars: 5 } } })
    h.mock.enqueue({ midStreamError: { afterChunks: 2, message: 'Provider went away' } })
    const failed = await chat(h, { messages: [{ role: 'user', content: 'tell me a story' }], useRAG: false, stream: true })
    const ok = await chat(h, { messages: [{ role: 'user', content: 'tell me another' }], useRAG: false, stream: true })
    const bad = await json<{ status: number; error: { code: string; message: string } | null }>(h, `/api/v1/requests/${failed}`)
    t.equal(bad.body.status, 200, 'the status the client got')
    t.match(bad.body.error, { code: 'upstream_error', message: String }, 'and the failure it then met')
    t.notOk(JSON.stringify(bad.body.error).includes('Provider went away'), "never the upstream's own words (they may quote the request)")
    t.equal((await json<{ error: unknown }>(h, `/api/v1/requests/${ok}`)).body.error, null, 'a completed stream has none')
  })
}
