import t, { type Test } from 'tap'
import OpenAI, { APIError, AuthenticationError, InternalServerError, RateLimitError } from 'openai'
import { Agent, request, errors as undiciErrors } from 'undici'
import { encodeChat } from 'gpt-tokenizer'
import {
  startMockUpstream,
  type MockBehaviour,
  type MockUpstream,
  type MockUpstreamOptions,
} from '../src/mock-upstream.js'
import { SseParser, type SseEvent } from '../src/upstream/sse-parser.js'
import { until } from './helpers/until.js'

const user = (content: string) => [{ role: 'user' as const, content }]

async function withMock(t: Test, o?: MockUpstreamOptions): Promise<{ mock: MockUpstream; sdk: OpenAI }> {
  const mock = await startMockUpstream(o)
  t.teardown(() => mock.close())
  return { mock, sdk: new OpenAI({ baseURL: mock.url, apiKey: 'x', maxRetries: 0, logLevel: 'off' }) }
}

/** POST raw through a private undici Agent (closed on teardown) so socket behaviour is observable. */
async function rawPost(t: Test, url: string, body: unknown, opts: ConstructorParameters<typeof Agent>[0] = {}) {
  const agent = new Agent(opts)
  t.teardown(() => agent.destroy())
  return request(`${url}/chat/completions`, {
    method: 'POST',
    dispatcher: agent,
    headers: { authorization: 'Bearer x', 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
}

/** The rejection of `p` (fails the test if it resolves), for assertions on the error's class and fields. */
async function rejection(t: Test, p: Promise<unknown> | (() => Promise<unknown>)): Promise<unknown> {
  try {
    await (typeof p === 'function' ? p() : p)
  } catch (err) {
    return err
  }
  t.fail('expected a rejection')
  return undefined
}

/** Assert `p` rejects with an instance of `cls` carrying `status` (undefined for errors without one). */
async function expectError(
  t: Test,
  p: Promise<unknown> | (() => Promise<unknown>),
  cls: abstract new (...args: never[]) => Error,
  fields: { status?: number; message?: RegExp } = {},
): Promise<void> {
  const err = await rejection(t, p)
  t.ok(err instanceof cls, `rejects with ${cls.name} (got ${String(err)})`)
  if (fields.status !== undefined) t.equal((err as { status?: number }).status, fields.status)
  if (fields.message) t.match((err as Error).message, fields.message)
}

/** Read `body` until it fails with an instance of `cls` (failing the test otherwise); the bytes that came first. */
async function bytesUntilError(
  t: Test,
  body: AsyncIterable<unknown>,
  cls: abstract new (...args: never[]) => Error,
): Promise<Buffer> {
  const got: Buffer[] = []
  await expectError(
    t,
    async () => {
      for await (const c of body) got.push(c as Buffer)
    },
    cls,
  )
  return Buffer.concat(got)
}

function parseSse(bytes: Buffer): { events: SseEvent[]; comments: string[]; discarded: boolean } {
  const events: SseEvent[] = []
  const comments: string[] = []
  const p = new SseParser({
    maxEventBytes: 1 << 20,
    onEvent: (e) => events.push(e),
    onComment: (c) => comments.push(c),
  })
  p.push(bytes)
  return { events, comments, discarded: p.end() }
}

t.test('non-stream completion through the openai SDK', async (t) => {
  const { mock, sdk } = await withMock(t)
  const messages = [{ role: 'system' as const, content: 'Be brief.' }, ...user('Hello there, mock')]
  const r = await sdk.chat.completions.create({ model: 'anthropic/claude-3.5-sonnet', messages, temperature: 0.2 })
  t.equal(r.choices[0]?.message.content, 'Echo: Hello there, mock')
  t.equal(r.choices[0]?.finish_reason, 'stop')
  t.equal(r.object, 'chat.completion')
  t.equal(r.model, 'anthropic/claude-3.5-sonnet')
  t.match(r.id, /^gen-/)
  t.equal((r as unknown as { provider: string }).provider, 'MockProvider')
  t.equal(r.usage?.prompt_tokens, encodeChat(messages, 'gpt-4o').length)
  t.equal(r.usage?.total_tokens, (r.usage?.prompt_tokens ?? 0) + (r.usage?.completion_tokens ?? 0))

  t.same(mock.lastChatBody(), { model: 'anthropic/claude-3.5-sonnet', messages, temperature: 0.2 })
  const rec = mock.requests.at(-1)
  t.equal(rec?.method, 'POST')
  t.equal(rec?.path, '/api/v1/chat/completions')
  t.equal(rec?.headers.authorization, 'Bearer x')
  t.same(JSON.parse(rec?.rawBody ?? ''), rec?.body)
})

t.test('echo keeps only the first 200 characters and uses the last user message', async (t) => {
  const { sdk } = await withMock(t, { promptTokenFactor: 1.5 })
  const long = 'é'.repeat(300)
  const messages = [...user('first'), { role: 'assistant' as const, content: 'ok' }, ...user(long)]
  const r = await sdk.chat.completions.create({ model: 'openai/gpt-4o', messages })
  t.equal(r.choices[0]?.message.content, `Echo: ${'é'.repeat(200)}`)
  t.equal(r.usage?.prompt_tokens, Math.round(encodeChat(messages, 'gpt-4o').length * 1.5), 'promptTokenFactor')
})

t.test('stream through the openai SDK: role first, content, stop, usage-only chunk', async (t) => {
  const { sdk } = await withMock(t, { behaviour: { reply: 'Héllo 🙂 wörld, streamed.', chunkChars: 3 } })
  const stream = await sdk.chat.completions.create({ model: 'openai/gpt-4o', messages: user('hi'), stream: true })
  const chunks: OpenAI.Chat.ChatCompletionChunk[] = []
  for await (const c of stream) chunks.push(c)
  t.equal(chunks[0]?.choices[0]?.delta.role, 'assistant')
  t.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'Héllo 🙂 wörld, streamed.')
  t.equal(chunks.at(-2)?.choices[0]?.finish_reason, 'stop')
  const last = chunks.at(-1)
  t.same(last?.choices, [], 'usage-only chunk has choices: []')
  t.ok((last?.usage?.completion_tokens ?? 0) > 0)
  t.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0]?.id))
})

t.test('firstTokenGapMs: the first content chunk arrives on its own, the rest after a pause', async (t) => {
  const { sdk } = await withMock(t, { behaviour: { reply: 'one two three four', chunkChars: 4, firstTokenGapMs: 150 } })
  const stream = await sdk.chat.completions.create({ model: 'openai/gpt-4o', messages: user('hi'), stream: true })
  const at: Array<{ text: string; ms: number }> = []
  for await (const c of stream) {
    const text = c.choices[0]?.delta.content
    if (text) at.push({ text, ms: performance.now() })
  }
  t.equal(at.map((a) => a.text).join(''), 'one two three four')
  t.ok((at[1]?.ms ?? 0) - (at[0]?.ms ?? 0) >= 100, 'a pause between the first and the second token')
})

t.test('raw stream wire format: keep-alive comments, frames, [DONE]', async (t) => {
  const { mock } = await withMock(t)
  for (const crlf of [false, true]) {
    mock.enqueue({ reply: 'abcdefghij', keepAliveComments: 2, crlf })
    const res = await rawPost(t, mock.url, { model: 'openai/gpt-4o', messages: user('x'), stream: true })
    t.equal(res.statusCode, 200)
    t.match(res.headers['content-type'], /^text\/event-stream/)
    const bytes = Buffer.from(await res.body.arrayBuffer())
    const nl = crlf ? '\r\n' : '\n'
    t.ok(bytes.toString().startsWith(`: OPENROUTER PROCESSING${nl}${nl}: OPENROUTER PROCESSING${nl}${nl}data: {`))
    t.ok(bytes.toString().endsWith(`data: [DONE]${nl}${nl}`))
    const { events, comments, discarded } = parseSse(bytes)
    t.same(comments, ['OPENROUTER PROCESSING', 'OPENROUTER PROCESSING'])
    t.equal(discarded, false)
    // role chunk + ceil(10 / 4) content chunks + stop chunk + usage chunk + [DONE]
    t.equal(events.length, 1 + 3 + 1 + 1 + 1)
  }
})

t.test('edge replies: empty reply, error before any content, no usage chunk', async (t) => {
  const { mock } = await withMock(t)
  const stream = async (b: MockBehaviour) => {
    mock.enqueue(b)
    const res = await rawPost(t, mock.url, { model: 'm/x', messages: user('x'), stream: true })
    return parseSse(Buffer.from(await res.body.arrayBuffer())).events.map((e) => e.data)
  }
  const empty = await stream({ reply: '' })
  t.equal(empty.length, 4, 'role, stop, usage, [DONE]')
  t.match(empty[1], /"finish_reason":"stop"/)
  const early = await stream({ reply: 'abcdefgh', midStreamError: { afterChunks: 0 } })
  t.equal(early.length, 2, 'role chunk, then the error event')
  t.match(early[1], /"error":\{"code":502/)
  const noUsage = await stream({ reply: 'abcd', usage: false })
  t.notMatch(noUsage.join(), /"choices":\[\]/)
  t.equal(noUsage.at(-1), '[DONE]')
})

t.test('split writes: one byte per write (and random pieces) still parse in the SDK', async (t) => {
  const { mock, sdk } = await withMock(t)
  const reply = 'Grüße aus 東京 🙂 — split'
  for (const b of [{ splitWrites: 'bytes' as const, chunkChars: 8 }, { splitWrites: 'random' as const, crlf: true }]) {
    mock.enqueue({ reply, ...b })
    const stream = await sdk.chat.completions.create({ model: 'openai/gpt-4o', messages: user('hi'), stream: true })
    let text = ''
    for await (const c of stream) text += c.choices[0]?.delta.content ?? ''
    t.equal(text, reply, b.splitWrites)
  }
  mock.enqueue({ reply, splitWrites: 'bytes' })
  const r = await sdk.chat.completions.create({ model: 'openai/gpt-4o', messages: user('hi') })
  t.equal(r.choices[0]?.message.content, reply, 'non-stream body written byte by byte')
})

t.test('error statuses come back as the SDK APIError subclasses', async (t) => {
  const { mock, sdk } = await withMock(t)
  const ask = () => sdk.chat.completions.create({ model: 'openai/gpt-4o', messages: user('x') })
  const askStream = () => sdk.chat.completions.create({ model: 'openai/gpt-4o', messages: user('x'), stream: true })

  mock.enqueue({ status: 429 })
  await expectError(t, ask(), RateLimitError, { status: 429 })
  mock.enqueue({ status: 502, errorMessage: 'Upstream model down' })
  await expectError(t, askStream(), InternalServerError, { status: 502, message: /Upstream model down/ })
  mock.enqueue({ status: 402 })
  await expectError(t, ask(), APIError, { status: 402, message: /Insufficient credits/ })
  t.equal((await ask()).choices[0]?.message.content, 'Echo: x', 'one-shot behaviours are consumed, then the default')

  const res = await fetch(`${mock.url}/chat/completions`, { method: 'POST', body: '{}' })
  t.equal(res.status, 401)
  t.same(await res.json(), { error: { code: 401, message: 'No auth credentials found' } })
  mock.enqueue({ status: 401, errorMessage: 'User not found.' })
  await expectError(t, ask(), AuthenticationError, { status: 401, message: /User not found/ })
})

t.test('enqueue is FIFO and setDefault changes the fallback', async (t) => {
  const { mock, sdk } = await withMock(t, { behaviour: { reply: 'default' } })
  mock.enqueue({ reply: 'one' })
  mock.enqueue({ reply: 'two' })
  const say = async () =>
    (await sdk.chat.completions.create({ model: 'm/x', messages: user('q') })).choices[0]?.message.content
  t.same([await say(), await say(), await say()], ['one', 'two', 'default'])
  mock.setDefault({ reply: 'new default' })
  t.equal(await say(), 'new default')
})

t.test('mid-stream error: OpenRouter error event, no [DONE], SDK throws after partial content', async (t) => {
  const { mock, sdk } = await withMock(t)
  const midStreamError = { afterChunks: 2, message: 'Provider disconnected', code: 502 }
  mock.enqueue({ reply: 'aaaabbbbccccdddd', midStreamError })
  const res = await rawPost(t, mock.url, { model: 'openai/gpt-4o', messages: user('x'), stream: true })
  const { events } = parseSse(Buffer.from(await res.body.arrayBuffer()))
  t.notOk(events.some((e) => e.data === '[DONE]'))
  const last = JSON.parse(events.at(-1)?.data ?? '{}') as { error: unknown; choices: Array<{ finish_reason: string }> }
  t.same(last.error, { code: 502, message: 'Provider disconnected' })
  t.equal(last.choices[0]?.finish_reason, 'error')

  mock.enqueue({ reply: 'aaaabbbbccccdddd', midStreamError: { afterChunks: 2 } })
  const stream = await sdk.chat.completions.create({ model: 'openai/gpt-4o', messages: user('x'), stream: true })
  let text = ''
  await expectError(
    t,
    async () => {
      for await (const c of stream) text += c.choices[0]?.delta.content ?? ''
    },
    APIError,
  )
  t.equal(text, 'aaaabbbb')
})

t.test('a choice that finishes with error and no error event: usage chunk and [DONE] follow, on the real wire format', async (t) => {
  const { mock } = await withMock(t)
  const events = async (b: MockBehaviour) => {
    mock.enqueue(b)
    const res = await rawPost(t, mock.url, { model: 'openai/gpt-4o', messages: user('x'), stream: true, tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] })
    const bytes = Buffer.from(await res.body.arrayBuffer())
    t.ok(bytes.toString().startsWith(': OPENROUTER PROCESSING\r\n\r\n'), 'keep-alive comment, CRLF')
    return parseSse(bytes).events.map((e) => e.data)
  }
  const bare = await events({ reply: 'aaaabbbbcccc', toolCalls: [], crlf: true, splitWrites: 'random', choiceError: { afterChunks: 2 } })
  t.same(bare.slice(1, 3).map((d) => (JSON.parse(d) as { choices: Array<{ delta: { content: string } }> }).choices[0]?.delta.content), ['aaaa', 'bbbb'])
  const finish = JSON.parse(bare[3] ?? '{}') as Record<string, unknown> & { choices: Array<Record<string, unknown>> }
  t.notOk('error' in finish, 'no top-level error')
  t.match(finish.choices[0], { index: 0, finish_reason: 'error', delta: { content: '' } })
  t.notOk('error' in (finish.choices[0] ?? {}), 'nor one in the choice')
  t.match(JSON.parse(bare[4] ?? '{}'), { choices: [], usage: { prompt_tokens: Number } }, 'the usage chunk, choices empty')
  t.equal(bare[5], '[DONE]')
  t.equal(bare.length, 6)

  const inChoice = await events({ reply: 'aaaa', toolCalls: [], crlf: true, choiceError: { message: 'Provider went away', inChoice: true } })
  t.match(JSON.parse(inChoice.at(-3) ?? '{}'), { choices: [{ finish_reason: 'error', error: { code: 502, message: 'Provider went away' } }] })
  t.notOk('error' in (JSON.parse(inChoice.at(-3) ?? '{}') as object))

  const stopped = await events({ reply: 'aaaa', toolCalls: [], crlf: true, choiceError: { inChoice: true, finishReason: 'stop' } })
  t.match(JSON.parse(stopped.at(-3) ?? '{}'), { choices: [{ finish_reason: 'stop', error: { code: 502 } }] }, 'finishReason: the error object beside another finish')

  const calls = await events({ crlf: true, choiceError: {} })
  t.match(JSON.parse(calls.at(-3) ?? '{}'), { choices: [{ finish_reason: 'error', delta: {} }] }, 'tool calls, then a finish with error')
  t.match(calls.at(-4), /"tool_calls"/)
})

t.test('reset before headers and mid-stream are seen as socket errors', async (t) => {
  const { mock } = await withMock(t)
  mock.enqueue({ reset: 'before-headers' })
  const dropped = rawPost(t, mock.url, { model: 'm/x', messages: user('x'), stream: true })
  await expectError(t, dropped, undiciErrors.SocketError)

  mock.enqueue({ reset: 'mid-stream', reply: 'first-chunk-then-gone' })
  const res = await rawPost(t, mock.url, { model: 'm/x', messages: user('x'), stream: true })
  t.equal(res.statusCode, 200)
  const { events } = parseSse(await bytesUntilError(t, res.body, undiciErrors.SocketError))
  t.match(events.at(-1)?.data, /"content":"firs"/, 'the first content chunk arrived before the reset')
})

t.test('hang before headers and mid-stream are seen as undici timeouts', async (t) => {
  // undici's header/body timers tick at 1 s granularity, so both hangs run at once to keep the file fast.
  const [before, mid] = await Promise.all([
    withMock(t, { behaviour: { hang: 'before-headers' } }),
    withMock(t, { behaviour: { hang: 'mid-stream', reply: 'abcdefgh' } }),
  ])
  const headersTimedOut = expectError(
    t,
    rawPost(t, before.mock.url, { model: 'm/x', messages: user('x') }, { headersTimeout: 150 }),
    undiciErrors.HeadersTimeoutError,
  )
  const bodyTimedOut = (async () => {
    const body = { model: 'm/x', messages: user('x'), stream: true }
    const res = await rawPost(t, mid.mock.url, body, { bodyTimeout: 150 })
    t.equal(res.statusCode, 200)
    const got = await bytesUntilError(t, res.body, undiciErrors.BodyTimeoutError)
    t.match(parseSse(got).events.at(-1)?.data, /"content":"abcd"/, 'first content chunk, then silence')
  })()
  await Promise.all([headersTimedOut, bodyTimedOut])
})

t.test('close() frees hanging requests and every socket', async (t) => {
  const { mock } = await withMock(t, { behaviour: { hang: 'before-headers' } })
  const pending = ['x', 'y'].map((q) => rawPost(t, mock.url, { model: 'm/x', messages: user(q) }))
  // Handlers attached now: both reject together when the mock closes.
  const failed = Promise.all(pending.map((p) => expectError(t, p, undiciErrors.SocketError)))
  await until(() => mock.requests.length >= 2, 'the mock to receive both hanging requests')
  t.equal(mock.openConnections(), 2)
  await mock.close()
  await failed
  // Each socket's 'close' comes on a later turn than the client's error: wait for it (bounded), not for a tick count.
  await until(() => mock.openConnections() === 0, 'close() to free both sockets of the hanging requests')
  await mock.close() // idempotent
})

t.test('a finished keep-alive connection stays open until the client closes it', async (t) => {
  const { mock } = await withMock(t)
  const agent = new Agent()
  const res = await request(`${mock.url}/models`, { dispatcher: agent })
  await res.body.dump()
  t.equal(mock.openConnections(), 1)
  await agent.close()
  await until(() => mock.openConnections() === 0, 'the mock to see the keep-alive socket close')
  t.pass('the mock saw the socket close')
})

t.test('invalid JSON and invalid SSE bodies with status 200', async (t) => {
  const { mock, sdk } = await withMock(t)
  mock.enqueue({ invalidJson: true })
  const res = await rawPost(t, mock.url, { model: 'm/x', messages: user('x') })
  t.equal(res.statusCode, 200)
  const text = await res.body.text()
  t.throws(() => JSON.parse(text))

  mock.enqueue({ invalidSse: true })
  const stream = await sdk.chat.completions.create({ model: 'm/x', messages: user('x'), stream: true })
  await expectError(
    t,
    async () => {
      for await (const c of stream) t.notOk(c, 'no valid chunk')
    },
    SyntaxError,
  )
})

t.test('400 for bodies that are not JSON or have no messages, 404 elsewhere, 401 on embeddings', async (t) => {
  const { mock } = await withMock(t)
  const post = (path: string, body: string, auth = true) =>
    fetch(`${mock.url}${path}`, { method: 'POST', body, headers: auth ? { authorization: 'Bearer k' } : {} })
  for (const body of ['{not json', '[]', '{"model":"m/x"}', '{"messages":[]}']) {
    const r = await post('/chat/completions', body)
    t.equal(r.status, 400, body)
    t.match(await r.json(), { error: { code: 400, message: String } })
  }
  const nf = await fetch(`${mock.url}/nope`)
  t.equal(nf.status, 404)
  t.same(await nf.json(), { error: { code: 404, message: 'Not Found' } })
  t.equal((await post('/embeddings', '{"input":"x"}', false)).status, 401)
  t.equal(mock.requests.length, 6, 'every request is recorded')
})

t.test('GET /models in OpenRouter shape, defaults and custom', async (t) => {
  const { sdk } = await withMock(t)
  const ids = []
  for await (const m of sdk.models.list()) ids.push(m.id)
  t.ok(ids.includes('openai/gpt-4o') && ids.includes('test/tiny'))
  const { mock } = await withMock(t, { models: [{ id: 'acme/big', context_length: 1_000_000 }], requireAuth: false })
  const body = (await (await fetch(`${mock.url}/models`)).json()) as { data: Array<Record<string, unknown>> }
  t.match(body.data, [
    { id: 'acme/big', context_length: 1_000_000, top_provider: { context_length: 1_000_000 }, pricing: Object },
  ])
})

t.test('embeddings: deterministic unit vectors, float and base64, configurable dimension', async (t) => {
  const { sdk } = await withMock(t, { embeddingDimensions: 32 })
  const a = await sdk.embeddings.create({ model: 'mock/e', input: ['alpha', 'beta', 'alpha'] })
  const [x, y, z] = a.data.map((d) => Array.from(d.embedding))
  t.equal(x?.length, 32)
  t.same(x, z, 'equal texts, equal vectors')
  t.not(JSON.stringify(x), JSON.stringify(y))
  t.ok(Math.abs(Math.hypot(...(x ?? [])) - 1) < 1e-5, 'unit length')
  const f = await sdk.embeddings.create({ model: 'mock/e', input: 'alpha', encoding_format: 'float', dimensions: 8 })
  t.equal(f.data[0]?.embedding.length, 8)
  t.ok(f.usage.prompt_tokens > 0)
})

t.test('bounded request ring, error rate and generated replies', async (t) => {
  const { mock, sdk } = await withMock(t, { maxRecorded: 2, errorRate: 1, seed: 7 })
  const ask = (q: string) => sdk.chat.completions.create({ model: 'm/x', messages: user(q) })
  await expectError(t, ask('1'), InternalServerError, { status: 502 })
  mock.enqueue({ replyTokens: { min: 5, max: 9 } })
  const r = await ask('2')
  const n = r.choices[0]?.message.content?.split(' ').length ?? 0
  t.ok(n >= 5 && n <= 9, `${n} words`)
  await expectError(t, ask('3'), InternalServerError, { status: 502 })
  const asked = mock.requests.map((q) => (q.body as { messages: Array<{ content: string }> }).messages[0]?.content)
  t.same(asked, ['2', '3'], 'only the newest maxRecorded requests are kept')
})
