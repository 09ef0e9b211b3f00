/**
 * POST /api/v1/responses/input_tokens through the official SDK's `responses.inputTokens.count`, against a real gateway
 * and the mock OpenRouter: the count is the prompt `responses.create` sends for the same body (as `_metadata` reports
 * it), through chains, conversations and retrieval; its errors are /responses' own; and it neither calls the upstream
 * nor leaves anything behind (no response, no session, no usage, no trace, no moved prompt-cache prefix). On every
 * store engine (LMDB, and PostgreSQL when the test cluster is there).
 */
import t from 'tap'
import OpenAI from 'openai'
import { startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

const MODEL = 'openai/gpt-4o'

type Meta = { context: { totalTokens: number; includedChunks: number; stablePrefixTokens: number }; memory: { historyMessages: number } }
const metaOf = (r: unknown): Meta => (r as { _metadata: Meta })._metadata
type Body = OpenAI.Responses.ResponseCreateParamsNonStreaming & Record<string, unknown>

const WEATHER: OpenAI.Responses.FunctionTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Weather for a city',
  parameters: { type: 'object', properties: { city: { type: 'string', description: 'the city' } }, required: ['city'] },
  strict: false,
}

/** The count for a body, and the prompt the same body then sends (its `_metadata.context.totalTokens`). */
async function countThenCreate(h: Harness, body: Body): Promise<{ counted: number; sent: number; meta: Meta }> {
  const client = h.client()
  const answer = await client.responses.inputTokens.count(body as OpenAI.Responses.InputTokenCountParams)
  const r = await client.responses.create(body)
  return { counted: answer.input_tokens, sent: metaOf(r).context.totalTokens, meta: metaOf(r) }
}

const upstreamCalls = (h: Harness): number => h.mock.requests.length

for (const engine of testableEngines(t, 'responses input_tokens')) {
  t.test(`${engine.name}: the count is the prompt the same request sends: instructions, items, tools, text.format; no upstream call`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const before = upstreamCalls(h)
    const first = await client.responses.inputTokens.count({ model: MODEL, input: 'Say hello' })
    t.same(first, { object: 'response.input_tokens', input_tokens: first.input_tokens }, "OpenAI's answer, as the SDK types it")
    t.ok(first.input_tokens > 0)
    t.equal(h.mock.requests.slice(before).filter((r) => r.path.endsWith('/chat/completions')).length, 0, 'no completion asked for')

    const bodies: Array<[string, Body]> = [
      ['a string', { model: MODEL, input: 'Say hello' }],
      ['instructions and typed items', {
        model: MODEL,
        instructions: 'Be terse.',
        input: [
          { role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] },
          { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
          { type: 'function_call_output', call_id: 'call_1', output: 'Sunny' },
        ],
        tools: [WEATHER],
      }],
      ['a json_schema output format', {
        model: MODEL,
        input: 'A person, please',
        text: { format: { type: 'json_schema', name: 'person', schema: { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } } } } },
      }],
      ['max_output_tokens', { model: MODEL, input: 'Short, please', max_output_tokens: 50 }],
    ]
    for (const [what, body] of bodies) {
      const { counted, sent } = await countThenCreate(h, body)
      t.equal(counted, sent, `${what}: counted as sent`)
    }

    // The model list is cached by now: a count asks the upstream for nothing at all.
    const warm = upstreamCalls(h)
    await client.responses.inputTokens.count({ model: MODEL, input: 'Say hello', tools: [WEATHER] })
    t.equal(upstreamCalls(h), warm, 'the mock upstream received nothing')
  })

  t.test(`${engine.name}: a chain: the count grows with previous_response_id, and is what the chained turn sends`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const r1 = await client.responses.create({ model: MODEL, instructions: 'Be terse.', input: 'My name is Ada.' })
    const alone = await client.responses.inputTokens.count({ model: MODEL, input: 'What is my name?' })
    const chained = await countThenCreate(h, { model: MODEL, input: 'What is my name?', previous_response_id: r1.id })
    t.ok(chained.counted > alone.input_tokens, 'the first turn counts')
    t.equal(chained.counted, chained.sent)
    t.equal(chained.meta.memory.historyMessages, 2)
    const r2 = await client.responses.create({ model: MODEL, input: 'And my age?', previous_response_id: r1.id })
    const longer = await countThenCreate(h, { model: MODEL, input: 'What is my name?', previous_response_id: r2.id })
    t.ok(longer.counted > chained.counted, 'one more turn, more tokens')
    t.equal(longer.counted, longer.sent)
  })

  t.test(`${engine.name}: a conversation and retrieval are counted as they are sent`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const up = await h.fetch('/api/v1/files', {
      method: 'POST',
      provider: null,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ filename: 'walrus.txt', content: 'The walrus colony at Cape Zorbelt numbers 4,217 animals.' }),
    })
    t.equal(up.status, 201)
    const retrieving = await countThenCreate(h, { model: MODEL, input: 'How many animals are in the walrus colony at Cape Zorbelt?' })
    t.ok(retrieving.meta.context.includedChunks > 0, 'an excerpt went into the prompt')
    t.equal(retrieving.counted, retrieving.sent, 'and into the count')
    const searching = await countThenCreate(h, {
      model: MODEL,
      input: 'walrus colony at Cape Zorbelt',
      useRAG: false,
      tools: [{ type: 'file_search', vector_store_ids: [] }],
    })
    t.equal(searching.counted, searching.sent, 'file_search')

    const conv = await client.conversations.create({})
    await client.responses.create({ model: MODEL, input: 'I live in Oslo.', conversation: conv.id, useRAG: false } as Body)
    const next = await countThenCreate(h, { model: MODEL, input: 'Where do I live?', conversation: conv.id, useRAG: false })
    t.equal(next.meta.memory.historyMessages, 2)
    t.equal(next.counted, next.sent)
  })

  t.test(`${engine.name}: errors are /responses' own, naming the field; nothing reaches the upstream`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const before = upstreamCalls(h)
    const failure = async (p: Promise<unknown>): Promise<{ status?: number; error?: unknown }> =>
      p.then(() => ({}), (e: unknown) => (e instanceof OpenAI.APIError ? { status: e.status, error: e.error } : { error: e }))
    const cases: Array<[string, Body]> = [
      ['unknown previous_response_id', { model: MODEL, input: 'hi', previous_response_id: 'resp_doesnotexist' }],
      ['unknown conversation', { model: MODEL, input: 'hi', conversation: 'conv_doesnotexist' }],
      ['no model', { input: 'hi' } as Body],
      ['a bad tool', { model: MODEL, input: 'hi', tools: [{ type: 'nonsense' }] } as unknown as Body],
      ['a bad text.format', { model: MODEL, input: 'hi', text: { format: { type: 'json_schema', name: 'x' } } } as unknown as Body],
      ['an unanswered call', { model: MODEL, input: [{ type: 'function_call', call_id: 'call_x', name: 'f', arguments: '{}' }, { role: 'user', content: 'go on' }] }],
    ]
    for (const [what, body] of cases) {
      const counted = await failure(client.responses.inputTokens.count(body as OpenAI.Responses.InputTokenCountParams))
      const created = await failure(client.responses.create(body))
      t.ok(counted.status !== undefined && counted.status >= 400, `${what}: refused (${counted.status})`)
      t.same(counted, created, `${what}: the same error as /responses`)
    }
    const unknown = await failure(client.responses.inputTokens.count({ model: MODEL, input: 'hi', previous_response_id: 'resp_doesnotexist' }))
    t.match(unknown, { status: 400, error: { code: 'previous_response_not_found', param: 'previous_response_id' } })
    t.equal(upstreamCalls(h), before, 'the upstream was never called')

    const noKey = await h.fetch('/api/v1/responses/input_tokens', { method: 'POST', key: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, input: 'hi' }) })
    t.equal(noKey.status, 401, 'a service key is required')
    const noProvider = await h.fetch('/api/v1/responses/input_tokens', { method: 'POST', provider: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, input: 'hi' }) })
    t.equal(noProvider.status, 401, 'and a provider key, as for /responses')
    const get = await h.fetch('/api/v1/responses/input_tokens')
    t.equal(get.status, 405, 'GET is the wrong method, not a response named input_tokens')
  })

  t.test(`${engine.name}: a count leaves nothing behind: no response, session, usage or trace, and no moved prompt prefix`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const usage = async (): Promise<unknown> => (await h.fetch('/api/v1/usage')).json()
    const traces = async (): Promise<unknown> => (await h.fetch('/api/v1/requests')).json()
    // Two sessions the same so far; one of them is counted between its turns.
    for (const s of ['plain', 'counted']) await client.responses.create({ model: MODEL, input: 'My name is Ada.', sessionId: s, useRAG: false } as Body)
    const usageBefore = await usage()
    const tracesBefore = await traces()

    await client.responses.inputTokens.count({ model: MODEL, input: 'What is my name?', sessionId: 'counted', useRAG: false } as OpenAI.Responses.InputTokenCountParams)
    await client.responses.inputTokens.count({ model: MODEL, input: 'hello', sessionId: 'never-made', useRAG: false } as OpenAI.Responses.InputTokenCountParams)
    t.equal((await h.fetch('/api/v1/sessions/never-made')).status, 404, 'no session created')
    const session = (await (await h.fetch('/api/v1/sessions/counted')).json()) as { messages: unknown[] }
    t.equal(session.messages.length, 2, 'no message added')
    t.same(await usage(), usageBefore, 'no usage recorded')
    t.same(await traces(), tracesBefore, 'no request trace')

    const plain = await client.responses.create({ model: MODEL, input: 'What is my name?', sessionId: 'plain', useRAG: false } as Body)
    const counted = await client.responses.create({ model: MODEL, input: 'What is my name?', sessionId: 'counted', useRAG: false } as Body)
    t.ok(metaOf(plain).context.stablePrefixTokens > 0)
    t.equal(metaOf(counted).context.stablePrefixTokens, metaOf(plain).context.stablePrefixTokens, 'the prefix is measured against the last prompt sent')
    t.equal(h.mock.requests.filter((r) => r.path.endsWith('/chat/completions')).length, 4, 'the four creates, and only they, reached the upstream')
  })
}
