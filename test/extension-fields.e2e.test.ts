/**
 * The four extension fields: near-miss spellings are refused with the right one named (they used to go upstream and
 * the request ran without memory), and session ids are normalised (NFC, trimmed) and refused when blank. On every
 * store engine (LMDB, and PostgreSQL when the test cluster is there).
 */
import t from 'tap'
import type OpenAI from 'openai'
import { startHarness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

type Meta = { memory: { sessionId: string | null; historyMessages: number } }
const metaOf = (r: unknown): Meta => (r as { _metadata: Meta })._metadata

for (const engine of testableEngines(t, 'extension fields')) {
  t.test(`${engine.name}: a field that differs from an extension by case or separators is a 400 naming the right spelling`, async (t) => {
    const h = await startHarness(t, { engine })
    const before = h.mock.requests.length
    const pairs: Array<[string, string]> = [['sessionID', 'sessionId'], ['Session-Id', 'sessionId'], ['use_rag', 'useRAG'], ['SaveToMemory', 'saveToMemory'], ['rag-query', 'ragQuery']]
    for (const [field, right] of pairs) {
      const body = { model: 'openai/gpt-4o-mini', messages: [{ role: 'user' as const, content: 'hi' }], [field]: 'x' }
      const err = await h.client().chat.completions.create(body).catch((e: unknown) => e)
      t.match(err, { status: 400, error: { code: 'invalid_parameter', param: field, message: new RegExp(`did you mean "${right}"`) } }, field)
    }
    t.equal(h.mock.requests.length, before, 'nothing went upstream')
    const ok = await h.client().chat.completions.create({
      model: 'openai/gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      // @ts-expect-error provider fields pass through as before
      user: 'u-1', provider: { order: ['openai'] },
    })
    t.ok(ok.id, 'ordinary provider fields still pass')
  })

  t.test(`${engine.name}: OpenRouter's own session_id (its broadcast grouping) passes upstream unchanged; it is not a recallgate session`, async (t) => {
    const h = await startHarness(t, { engine })
    // LangChain's ChatOpenRouter sends it (from OPENROUTER_SESSION_ID too): refusing it broke every such request.
    const res = await h.client().chat.completions.create({
      model: 'openai/gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      // @ts-expect-error OpenRouter's field
      session_id: 'workflow-7',
    })
    t.equal(h.mock.lastChatBody()?.session_id, 'workflow-7', 'sent upstream as it came')
    t.equal(metaOf(res).memory.sessionId, null, 'no memory: that is sessionId')
    const list = (await (await h.fetch('/api/v1/sessions', { provider: null })).json()) as { data: unknown[] }
    t.same(list.data, [], 'no session made')
  })

  t.test(`${engine.name}: the Responses path takes session_id too and forwards it as chat does; near misses of sessionId are still refused`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    // LangChain's ChatOpenRouter with `use_responses_api` sends it on /responses as on /chat/completions.
    const body = { model: 'openai/gpt-4o-mini', input: 'hi', session_id: 'workflow-7' } as OpenAI.Responses.ResponseCreateParamsNonStreaming
    const res = await client.responses.create(body)
    t.equal(h.mock.lastChatBody()?.session_id, 'workflow-7', 'sent upstream as it came')
    t.equal(metaOf(res).memory.sessionId, null, 'no memory: that is sessionId')
    const stream = await client.responses.create({ ...body, session_id: 'workflow-8', stream: true } as OpenAI.Responses.ResponseCreateParamsStreaming)
    for await (const _ of stream);
    t.equal(h.mock.lastChatBody()?.session_id, 'workflow-8', 'streamed too')
    const list = (await (await h.fetch('/api/v1/sessions', { provider: null })).json()) as { data: unknown[] }
    t.same(list.data, [], 'no session made')

    const before = h.mock.requests.length
    const wrongType = await client.responses.create({ ...body, session_id: 7 } as never).catch((e: unknown) => e)
    t.match(wrongType, { status: 400, error: { code: 'invalid_parameter', param: 'session_id' } }, 'a session_id that is not a string')
    const nearMiss = await client.responses.create({ model: 'openai/gpt-4o-mini', input: 'hi', sessionID: 's' } as never).catch((e: unknown) => e)
    t.match(nearMiss, { status: 400, error: { param: 'sessionID', message: /did you mean "sessionId"/ } })
    t.equal(h.mock.requests.length, before, 'nothing refused went upstream')
  })

  t.test(`${engine.name}: session ids: NFC and NFD are one session, surrounding spaces are dropped, blank is refused`, async (t) => {
    const h = await startHarness(t, { engine })
    const chat = (sessionId: string, content: string) =>
      // @ts-expect-error recallgate's extensions
      h.client().chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content }], sessionId })
    const nfc = 'caf\u00e9'
    const nfd = 'cafe\u0301'
    await chat(nfc, 'first')
    const second = await chat(nfd, 'second')
    t.same(metaOf(second).memory, { ...metaOf(second).memory, sessionId: nfc, historyMessages: 2 }, 'NFD found the NFC session')
    const third = await chat(`  ${nfc}\t`, 'third')
    t.equal(metaOf(third).memory.historyMessages, 4, 'surrounding white space is not part of the id')
    const list = (await (await h.fetch('/api/v1/sessions', { provider: null })).json()) as { data: Array<{ id: string }> }
    t.same(list.data.map((s) => s.id), [nfc], 'one session in the list')
    for (const path of [encodeURIComponent(nfc), encodeURIComponent(nfd)]) {
      const got = await h.fetch(`/api/v1/sessions/${path}`, { provider: null })
      t.equal(got.status, 200, `GET /sessions/${path}`)
    }
    for (const blank of ['   ', '\t\n', '\u3000']) {
      const err = await chat(blank, 'x').catch((e: unknown) => e)
      t.match(err, { status: 400, error: { param: 'sessionId', message: /white space/ } }, JSON.stringify(blank))
    }
  })
}
