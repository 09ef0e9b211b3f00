/**
 * Conversation memory end to end: sessions saved after completed exchanges, packed back in on the next request,
 * isolated per service key, surviving a restart, and the session API; on every store engine (LMDB, and PostgreSQL
 * when the test cluster is there).
 */
import t from 'tap'
import { encode, encodeChat } from 'gpt-tokenizer'
import OpenAI from 'openai'
import { KEY_A, KEY_B, startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

type Meta = { memory: { sessionId: string | null; historyMessages: number }; context: { totalTokens: number; truncated: boolean; includedMessages: number } }
const metaOf = (r: unknown): Meta => (r as { _metadata: Meta })._metadata

async function ask(h: Harness, sessionId: string, content: string, extra: Record<string, unknown> = {}, key = KEY_A) {
  return h.client(key).chat.completions.create({
    model: 'openai/gpt-4o',
    messages: [{ role: 'user', content }],
    ...({ sessionId, useRAG: false, ...extra } as object),
  })
}

async function session(h: Harness, id: string, key = KEY_A) {
  const r = await h.fetch(`/api/v1/sessions/${encodeURIComponent(id)}`, { key })
  return { status: r.status, body: (await r.json()) as { messages?: Array<{ role: string; content: string; created_at: number }> } }
}

for (const engine of testableEngines(t, 'conversation memory and the sessions API')) {
  t.test(`${engine.name}: multi-turn: each completed exchange is saved and comes back, oldest first, before the new message`, async (t) => {
    const h = await startHarness(t, { engine })
    const r1 = await ask(h, 's-1', 'My name is Ada.')
    t.same(metaOf(r1).memory, { sessionId: 's-1', historyMessages: 0, recalledMessages: 0, recognizedMessages: 0 })
    const r2 = await h.client().chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'What is my name?' },
      ],
      ...({ sessionId: 's-1', useRAG: false } as object),
    })
    t.equal(metaOf(r2).memory.historyMessages, 2)
    const sent = h.mock.lastChatBody()?.messages as Array<{ role: string; content: string }>
    t.same(sent, [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: r1.choices[0]?.message.content },
      { role: 'user', content: 'What is my name?' },
    ])
    t.equal(metaOf(r2).context.totalTokens, encodeChat(sent as Parameters<typeof encodeChat>[0], 'gpt-4o').length, 'exact token count of what was sent')
    t.equal(metaOf(r2).context.includedMessages, 4, '2 request messages + 2 history messages')

    const s = await session(h, 's-1')
    t.equal(s.status, 200)
    t.same(s.body.messages?.map((m) => m.role), ['user', 'assistant', 'user', 'assistant'], 'system messages are not saved')
    t.type(s.body.messages?.[0]?.created_at, 'number')
  })

  t.test(`${engine.name}: streaming replies are saved exactly as the client received them, before [DONE]`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { reply: 'Stréamed ✓ reply, in pieces.', chunkChars: 3, splitWrites: 'random' } } })
    const stream = await h.client().chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [{ role: 'user', content: 'stream please' }],
      stream: true,
      ...({ sessionId: 'st', useRAG: false } as object),
    })
    let text = ''
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? ''
    // The SDK has seen [DONE]; the exchange must already be durable and readable.
    const s = await session(h, 'st')
    t.same(s.body.messages?.map((m) => m.content), ['stream please', text])
    t.equal(text, 'Stréamed ✓ reply, in pieces.')
  })

  t.test(`${engine.name}: saveToMemory:false, upstream errors and mid-stream errors save nothing; earlier memories still used`, async (t) => {
    const h = await startHarness(t, { engine })
    await ask(h, 'keep', 'first fact')
    const r = await ask(h, 'keep', 'not saved', { saveToMemory: false })
    t.equal(metaOf(r).memory.historyMessages, 2, 'earlier memories still used')
    h.mock.enqueue({ status: 503 })
    await t.rejects(ask(h, 'keep', 'fails upstream'))
    h.mock.enqueue({ reply: 'half of it', midStreamError: { afterChunks: 1 } })
    const stream = await h.client().chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [{ role: 'user', content: 'breaks mid-stream' }],
      stream: true,
      ...({ sessionId: 'keep', useRAG: false } as object),
    })
    await t.rejects((async () => { for await (const _ of stream) { /* drain */ } })())
    // OpenRouter reports an error met while generating a JSON reply as a 200 whose choice finished with "error": the
    // client gets it as it came, and the failed exchange is not saved.
    h.mock.enqueue({ reply: 'half of', choiceError: { message: 'Provider disconnected' } })
    const failed = await ask(h, 'keep', 'fails while generating')
    t.match(failed.choices[0], { finish_reason: 'error', error: { message: 'Provider disconnected' } })
    const s = await session(h, 'keep')
    t.equal(s.body.messages?.length, 2, 'only the first exchange is stored')
    t.equal(s.body.messages?.[0]?.content, 'first fact')
  })

  t.test(`${engine.name}: tenants: the same sessionId under two keys is two sessions, through every endpoint`, async (t) => {
    const h = await startHarness(t, { engine })
    await ask(h, 'shared-id', 'secret of A', {}, KEY_A)
    const rb = await ask(h, 'shared-id', 'hello from B', {}, KEY_B)
    t.equal(metaOf(rb).memory.historyMessages, 0, 'B sees no history of A')
    const sentB = JSON.stringify(h.mock.lastChatBody())
    t.notMatch(sentB, /secret of A/)
    const sa = await session(h, 'shared-id', KEY_A)
    const sb = await session(h, 'shared-id', KEY_B)
    t.same(sa.body.messages?.[0]?.content, 'secret of A')
    t.same(sb.body.messages?.[0]?.content, 'hello from B')
    const del = await h.fetch(`/api/v1/sessions/shared-id`, { method: 'DELETE', key: KEY_B })
    t.equal(del.status, 200)
    t.equal((await session(h, 'shared-id', KEY_A)).status, 200, 'B deleting its session leaves A’s')
    const onlyA = await h.fetch('/api/v1/sessions', { key: KEY_A })
    const listA = (await onlyA.json()) as { data: Array<{ id: string }> }
    t.same(listA.data.map((s) => s.id), ['shared-id'])
    const listB = (await (await h.fetch('/api/v1/sessions', { key: KEY_B })).json()) as { data: unknown[] }
    t.same(listB.data, [])
  })

  t.test(`${engine.name}: session API: odd ids, pagination, delete for good, 404`, async (t) => {
    const h = await startHarness(t, { engine })
    const ids = ['a/b c', 'ünïcødé ✓', 'plain', '%2F literally', 'z']
    for (const id of ids) await ask(h, id, `hello ${id}`)
    for (const id of ids) {
      const s = await session(h, id)
      t.equal(s.status, 200, `GET ${id}`)
      t.equal((s.body as { id?: string }).id, id)
    }
    const seen: string[] = []
    let after: string | undefined
    for (let page = 0; page < 10; page++) {
      const r = await h.fetch(`/api/v1/sessions?limit=2${after ? `&after=${encodeURIComponent(after)}` : ''}`)
      const body = (await r.json()) as { data: Array<{ id: string; object: string }>; has_more: boolean }
      t.ok(body.data.length <= 2)
      seen.push(...body.data.map((s) => s.id))
      if (!body.has_more) break
      after = body.data.at(-1)?.id
    }
    t.same([...seen].sort(), [...ids].sort(), 'pages cover every session once')
    const del = await h.fetch(`/api/v1/sessions/${encodeURIComponent('a/b c')}`, { method: 'DELETE' })
    t.same(await del.json(), { id: 'a/b c', object: 'session', deleted: true })
    t.equal((await session(h, 'a/b c')).status, 404)
    const again = await h.fetch(`/api/v1/sessions/${encodeURIComponent('a/b c')}`, { method: 'DELETE' })
    t.equal(again.status, 404)
    const r = await ask(h, 'a/b c', 'fresh start')
    t.equal(metaOf(r).memory.historyMessages, 0, 'a deleted session never comes back into a prompt')
    const bad = await h.fetch('/api/v1/sessions?limit=0')
    t.equal(bad.status, 400)
    t.match(await bad.json(), { error: { param: 'limit' } })
  })

  t.test(`${engine.name}: a restart on the same store (DATA_DIR, or database) keeps every session`, async (t) => {
    const h = await startHarness(t, { engine })
    await ask(h, 'durable', 'remember me')
    await h.restart()
    const s = await session(h, 'durable')
    t.equal(s.status, 200)
    t.equal(s.body.messages?.[0]?.content, 'remember me')
    const r = await ask(h, 'durable', 'again')
    t.equal(metaOf(r).memory.historyMessages, 2)
  })

  t.test(`${engine.name}: packing: a small window keeps the newest history, whole pairs, and says truncated`, async (t) => {
    const h = await startHarness(t, { engine, mock: { models: [{ id: 'test/tiny', context_length: 600 }] }, env: { TOKEN_MARGINS: '*:0' } })
    for (let i = 0; i < 12; i++) {
      await h.client().chat.completions.create({
        model: 'test/tiny',
        max_tokens: 100,
        messages: [{ role: 'user', content: `turn ${i}: ${'lorem ipsum dolor sit amet '.repeat(4)}` }],
        ...({ sessionId: 'long', useRAG: false } as object),
      })
    }
    const r = await h.client().chat.completions.create({
      model: 'test/tiny',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'latest question' }],
      ...({ sessionId: 'long', useRAG: false } as object),
    })
    const meta = metaOf(r)
    t.equal(meta.context.truncated, true)
    t.ok(meta.memory.historyMessages > 0 && meta.memory.historyMessages < 24)
    t.equal(meta.memory.historyMessages % 2, 0, 'whole user/assistant pairs')
    const sent = h.mock.lastChatBody()?.messages as Array<{ role: string; content: string }>
    t.match(sent.at(-2)?.content, /turn 11/, 'the newest turn is kept')
    t.equal(sent[0]?.role, 'user', 'history starts with a user turn')
    const total = encodeChat(sent as Parameters<typeof encodeChat>[0], 'gpt-4o').length
    t.equal(meta.context.totalTokens, total)
    t.ok(total + 100 <= 600, 'prompt + reserve fit the window')

    const e = await h
      .client()
      .chat.completions.create({ model: 'test/tiny', max_tokens: 100, messages: [{ role: 'user', content: 'word '.repeat(700) }] })
      .catch((e: unknown) => e)
    t.type(e, OpenAI.BadRequestError)
    t.match((e as InstanceType<typeof OpenAI.BadRequestError>).error, { code: 'context_length_exceeded' })
  })

  t.test(`${engine.name}: packing with a large response_format schema: the schema takes room, the total stays within the window`, async (t) => {
    const h = await startHarness(t, { engine, mock: { models: [{ id: 'test/tiny', context_length: 900 }] }, env: { TOKEN_MARGINS: '*:0' } })
    const ask = (content: string, extra: Record<string, unknown> = {}) =>
      h.client().chat.completions.create({
        model: 'test/tiny',
        max_tokens: 100,
        messages: [{ role: 'user', content }],
        ...({ sessionId: 'long', useRAG: false, ...extra } as object),
      })
    for (let i = 0; i < 14; i++) await ask(`turn ${i}: ${'lorem ipsum dolor sit amet '.repeat(4)}`)
    const properties = Object.fromEntries(
      Array.from({ length: 12 }, (_, i) => [`field_${i}`, { type: 'string', description: `The ${i}th detail of the answer, in plain words.` }]),
    )
    const jsonSchema = { name: 'answer', strict: true, schema: { type: 'object', properties, required: Object.keys(properties), additionalProperties: false } }
    const schemaTokens = encode(JSON.stringify(jsonSchema)).length
    t.ok(schemaTokens > 250, `a large schema (${schemaTokens} tokens)`)

    const without = metaOf(await ask('latest question', { saveToMemory: false }))
    t.equal(without.context.truncated, true, 'the session fills the window without the schema')
    const r = await ask('latest question', { saveToMemory: false, response_format: { type: 'json_schema', json_schema: jsonSchema } })
    const meta = metaOf(r)
    const up = h.mock.lastChatBody() ?? {}
    t.same(up.response_format, { type: 'json_schema', json_schema: jsonSchema }, 'the schema went upstream as sent')
    const messages = encodeChat(up.messages as Parameters<typeof encodeChat>[0], 'gpt-4o').length
    t.equal(meta.context.totalTokens, messages + schemaTokens, '_metadata counts the schema, as it counts tool definitions')
    t.ok(messages + schemaTokens + 100 <= 900, `prompt (schema included) + reserve fit the window: ${messages} + ${schemaTokens} + 100`)
    t.ok(meta.memory.historyMessages < without.memory.historyMessages, 'older turns made room for it')
    t.equal(meta.memory.historyMessages % 2, 0, 'whole pairs')

    const tooBig = { ...jsonSchema, schema: { ...jsonSchema.schema, description: 'word '.repeat(800) } }
    const e = await ask('latest question', { response_format: { type: 'json_schema', json_schema: tooBig } }).catch((e: unknown) => e)
    t.match((e as InstanceType<typeof OpenAI.BadRequestError>).error, { code: 'context_length_exceeded', message: /response schema/ }, 'a schema alone too large for the window')
  })

  t.test(`${engine.name}: GET /sessions lists the newest session first, and a later message does not move one`, async (t) => {
    // A wall clock that moves on every reading: each session is created later than the one before.
    let wall = 1_700_000_000_000
    const h = await startHarness(t, { engine, gateway: { now: () => (wall += 1000) } })
    for (const id of ['monday', 'tuesday', 'wednesday']) await ask(h, id, `hello ${id}`)
    await ask(h, 'monday', 'back to monday')
    const body = (await (await h.fetch('/api/v1/sessions')).json()) as { data: Array<{ id: string; created_at: number }>; first_id: string }
    t.same(body.data.map((s) => s.id), ['wednesday', 'tuesday', 'monday'])
    t.equal(body.first_id, 'wednesday')
    const page2 = (await (await h.fetch('/api/v1/sessions?limit=1&after=tuesday')).json()) as { data: Array<{ id: string }> }
    t.same(page2.data.map((s) => s.id), ['monday'], 'after pages on in the same order')
  })
}
