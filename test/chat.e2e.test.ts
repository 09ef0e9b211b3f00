/**
 * The core proxy end to end: the official `openai` SDK → recallgate → mock OpenRouter, all on loopback sockets. On
 * every store engine (LMDB, and PostgreSQL when the test cluster is there): even a request with no session reads its
 * key and writes its usage and trace there.
 */
import t from 'tap'
import OpenAI from 'openai'
import { KEY_A, KEY_FREE, PROVIDER_KEY, startHarness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

for (const engine of testableEngines(t, 'the core proxy')) {
  t.test(`${engine.name}: non-stream: reply, _metadata with all three groups, and what went upstream`, async (t) => {
    const h = await startHarness(t, { engine })
    const res = await h.client().chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello there' },
      ],
      temperature: 0.2,
      // Extension and pass-through fields ride along in the body.
      ...({ useRAG: false, transforms: ['middle-out'], provider: { sort: 'latency' } } as object),
    })
    t.match(res.choices[0]?.message.content, /Hello there/)
    const meta = (res as unknown as { _metadata: Record<string, Record<string, unknown>> })._metadata
    t.same(meta.memory, { sessionId: null, historyMessages: 0, recalledMessages: 0, recognizedMessages: 0 })
    t.match(meta.rag, { enabled: false, resultsFound: 0 })
    t.match(meta.context, { includedMessages: 2, includedChunks: 0, truncated: false })
    t.type(meta.context?.totalTokens, 'number')

    const sent = h.mock.lastChatBody()
    t.ok(sent)
    t.same(sent?.messages, [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello there' },
    ])
    t.equal(sent?.temperature, 0.2)
    t.same(sent?.transforms, ['middle-out'], 'unknown fields pass through')
    t.same(sent?.provider, { sort: 'latency' })
    for (const ext of ['sessionId', 'saveToMemory', 'useRAG', 'ragQuery']) t.notOk(ext in (sent ?? {}), `${ext} stripped`)
    const last = h.mock.requests.at(-1)
    t.equal(last?.headers.authorization, `Bearer ${PROVIDER_KEY}`, 'Authorization forwarded as is')
    t.notOk(last?.headers.servicekey, 'the service key never goes upstream')
  })

  t.test(`${engine.name}: stream: chunks relayed, _metadata on the first chunk, usage chunk only when asked`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { reply: 'one two three four five', chunkChars: 3 } } })
    const client = h.client()
    const stream = await client.chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [{ role: 'user', content: 'count' }],
      stream: true,
    })
    let text = ''
    let chunks = 0
    let first: Record<string, unknown> | undefined
    let usageChunks = 0
    for await (const c of stream) {
      first ??= c as unknown as Record<string, unknown>
      chunks++
      if (c.choices.length === 0) usageChunks++
      text += c.choices[0]?.delta?.content ?? ''
    }
    t.equal(text, 'one two three four five')
    t.ok(chunks > 5, 'arrived as several chunks')
    t.ok(first?._metadata, 'first chunk carries _metadata')
    t.equal(usageChunks, 0, 'usage-only chunk withheld when not requested')

    const withUsage = await client.chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [{ role: 'user', content: 'count' }],
      stream: true,
      stream_options: { include_usage: true },
    })
    let usage: unknown
    for await (const c of withUsage) if (c.choices.length === 0) usage = c.usage
    t.match(usage, { prompt_tokens: Number, completion_tokens: Number })
  })

  t.test(`${engine.name}: stream quirks: CRLF, byte-split writes and keep-alive comments reach the SDK intact`, async (t) => {
    const h = await startHarness(t, { engine,
      mock: { behaviour: { reply: 'héllo wörld ✓ done', crlf: true, splitWrites: 'bytes', keepAliveComments: 3, chunkChars: 2 } },
    })
    const stream = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }], stream: true })
    let text = ''
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? ''
    t.equal(text, 'héllo wörld ✓ done')

    // Keep-alive comments stay SSE comments on the wire.
    const raw = await h.fetch('/api/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }], stream: true }),
    })
    t.equal(raw.headers.get('content-type'), 'text/event-stream; charset=utf-8')
    t.equal(raw.headers.get('x-accel-buffering'), 'no')
    const body = await raw.text()
    t.match(body, /^: OPENROUTER PROCESSING\n\n/m)
    t.match(body, /data: \[DONE\]\n\n$/)
  })

  t.test(`${engine.name}: errors arrive as the SDK error classes with the OpenAI shape`, async (t) => {
    const h = await startHarness(t, { engine })
    const e401 = await h
      .client('not-a-real-key')
      .chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e)
    t.type(e401, OpenAI.AuthenticationError)
    t.match((e401 as InstanceType<typeof OpenAI.AuthenticationError>).error, { code: 'invalid_service_key' })
    const err400 = await h
      .client()
      .chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }], temperature: 3 })
      .catch((e: unknown) => e)
    t.type(err400, OpenAI.BadRequestError)
    t.match((err400 as InstanceType<typeof OpenAI.BadRequestError>).error, { param: 'temperature', type: 'invalid_request_error' })

    h.mock.enqueue({ status: 429, errorMessage: 'Rate limit exceeded: upstream' })
    const err429 = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
    t.type(err429, OpenAI.RateLimitError)
    t.match((err429 as Error).message, /upstream/, 'upstream message kept')

    h.mock.enqueue({ status: 401, errorMessage: 'No auth credentials found' })
    const up401 = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
    t.type(up401, OpenAI.AuthenticationError, 'an upstream 401 comes back as 401')
    for (const status of [402, 403, 408, 503]) {
      h.mock.enqueue({ status })
      const e = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
      t.equal((e as { status?: number }).status, status, `upstream ${status} passes through`)
    }
    h.mock.enqueue({ invalidJson: true })
    const bad = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
    t.equal((bad as { status?: number }).status, 502, 'invalid upstream JSON → 502')
  })

  t.test(`${engine.name}: upstream unreachable → 502, provider key missing → 401 without an upstream call`, async (t) => {
    const h = await startHarness(t, { engine })
    const before = h.mock.requests.length
    const r = await h.fetch('/api/v1/chat/completions', {
      method: 'POST',
      provider: null,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }] }),
    })
    t.equal(r.status, 401)
    t.match(await r.json(), { error: { code: 'missing_provider_key', type: 'authentication_error' } })
    t.equal(h.mock.requests.length, before, 'nothing sent upstream')

    await h.mock.close()
    const e = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
    t.type(e, OpenAI.InternalServerError)
    t.equal((e as { status?: number }).status, 502)
  })

  t.test(`${engine.name}: mid-stream upstream error is relayed as an SSE error event and the SDK throws`, async (t) => {
    const h = await startHarness(t, { engine,
      mock: { behaviour: { reply: 'partial answer that breaks', chunkChars: 4, midStreamError: { afterChunks: 2, message: 'Provider disconnected' } } },
    })
    const stream = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }], stream: true })
    let text = ''
    const err = await (async () => {
      for await (const c of stream) text += c.choices[0]?.delta?.content ?? ''
    })().catch((e: unknown) => e)
    t.type(err, OpenAI.APIError)
    t.match((err as Error).message, /Provider disconnected/)
    t.ok(text.length > 0, 'tokens before the error were delivered')
  })

  t.test(`${engine.name}: routing: 404 and 405 in the OpenAI shape, x-request-id everywhere, healthz without a key`, async (t) => {
    const h = await startHarness(t, { engine })
    const nf = await h.fetch('/api/v1/nothing')
    t.equal(nf.status, 404)
    t.match(await nf.json(), { error: { type: 'not_found_error', code: 'not_found', param: null } })
    t.ok(nf.headers.get('x-request-id'))
    const na = await h.fetch('/api/v1/chat/completions', { method: 'GET' })
    t.equal(na.status, 405)
    t.equal(na.headers.get('allow'), 'POST')
    t.match(await na.json(), { error: { code: 'method_not_allowed' } })
    const hz = await h.fetch('/healthz', { key: null, provider: null })
    t.equal(hz.status, 200)
    t.ok(hz.headers.get('x-request-id'))
    const noKey = await h.fetch('/api/v1/models', { key: null })
    t.equal(noKey.status, 401)
    t.match(await noKey.json(), { error: { code: 'missing_service_key' } })
    const alias = await h.fetch('/api/v1/models', { key: null, headers: { 'X-Service-Key': KEY_A } })
    t.equal(alias.status, 200, 'x-service-key alias')
    const models = (await alias.json()) as { data: Array<{ id: string; context_length: number }> }
    t.ok(models.data.some((m) => m.id === 'openai/gpt-4o'))
  })

  t.test(`${engine.name}: body checks come before anything else`, async (t) => {
    const h = await startHarness(t, { engine, env: { MAX_BODY_BYTES: '2048' } })
    const post = (body: string, type = 'application/json') =>
      h.fetch('/api/v1/chat/completions', { method: 'POST', headers: { 'content-type': type }, body })
    const bad = await post('{"model":')
    t.equal(bad.status, 400)
    t.match(await bad.json(), { error: { code: 'invalid_json' } })
    const wrongType = await post('{}', 'text/plain')
    t.equal(wrongType.status, 415)
    const big = await post(JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(5000) }] }))
    t.equal(big.status, 413)
    t.match(await big.json(), { error: { code: 'payload_too_large' } })
    t.equal(h.mock.requests.filter((r) => r.path.endsWith('/chat/completions')).length, 0, 'none reached the upstream')
  })

  t.test(`${engine.name}: plans: 429 with Retry-After and rate-limit headers on every response`, async (t) => {
    const h = await startHarness(t, { engine })
    const statuses: number[] = []
    let last: Response | undefined
    for (let i = 0; i < 11; i++) {
      last = await h.fetch('/api/v1/models', { key: KEY_FREE })
      statuses.push(last.status)
      if (i === 0) {
        t.equal(last.headers.get('x-ratelimit-limit-requests'), '10')
        t.equal(last.headers.get('x-ratelimit-remaining-requests'), '9')
        t.ok(last.headers.get('x-ratelimit-reset-requests'))
      }
    }
    t.same(statuses, [...Array(10).fill(200), 429])
    t.equal(last?.headers.get('retry-after'), '6')
    t.match(await last?.json(), { error: { type: 'rate_limit_error', code: 'rate_limit_exceeded' } })
    const e = await h.client(KEY_FREE).chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
    t.type(e, OpenAI.RateLimitError)
  })

  t.test(`${engine.name}: a client that disconnects mid-stream aborts the upstream request at once`, async (t) => {
    // The upstream hangs after its first chunk: its response can only end because the gateway drops it.
    const h = await startHarness(t, { engine, mock: { behaviour: { reply: 'never finishes', hang: 'mid-stream' } } })
    const ac = new AbortController()
    const r = await h.fetch('/api/v1/chat/completions', {
      method: 'POST',
      signal: ac.signal,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }], stream: true, sessionId: 'left' }),
    })
    const reader = r.body!.getReader()
    await reader.read()
    t.equal(h.mock.activeResponses(), 1, 'upstream stream open')
    ac.abort()
    await reader.cancel().catch(() => undefined)
    await h.mock.idle()
    t.equal(h.mock.activeResponses(), 0, 'upstream response gone')
    const s = await h.fetch(`/api/v1/sessions/left`)
    t.equal(s.status, 404, 'an aborted exchange saves nothing')
  })
}
