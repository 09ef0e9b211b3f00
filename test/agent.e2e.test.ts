/**
 * Agent apps end to end, through the official `openai` SDK: tool round trips with and without a session, streamed
 * tool calls assembled into memory, multi-part content, the developer role, max_completion_tokens, OpenAI's pairing
 * errors, and clients that resend their whole history. The mock provider refuses a conversation that breaks the
 * pairing rule exactly as OpenAI does, so every 200 here also says the prompt the gateway built was valid. On every
 * store engine (LMDB, and PostgreSQL when the test cluster is there).
 */
import t from 'tap'
import type OpenAI from 'openai'
import { startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'
import { uploadJson } from './helpers/uploads.js'

type Msg = OpenAI.Chat.Completions.ChatCompletionMessageParam
type Sent = Array<Record<string, unknown> & { role: string }>
type Meta = {
  memory: { historyMessages: number; recognizedMessages: number }
  context: { totalTokens: number; includedMessages: number }
}
const metaOf = (r: unknown): Meta => (r as { _metadata: Meta })._metadata
const sent = (h: Harness): Sent => (h.mock.lastChatBody()?.messages ?? []) as Sent
const chatCalls = (h: Harness): number => h.mock.requests.filter((r) => r.path.endsWith('/chat/completions')).length

const WEATHER: OpenAI.Chat.Completions.ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}

async function create(h: Harness, body: Record<string, unknown>) {
  return h.client().chat.completions.create({ model: 'openai/gpt-4o', useRAG: false, ...body } as never) as Promise<OpenAI.Chat.Completions.ChatCompletion>
}

async function storedSession(h: Harness, id: string): Promise<Sent> {
  const r = await h.fetch(`/api/v1/sessions/${encodeURIComponent(id)}`)
  return ((await r.json()) as { messages: Sent }).messages.map(({ created_at: _, ...m }) => m as Sent[number])
}

for (const engine of testableEngines(t, 'agent apps')) {
  t.test(`${engine.name}: stateless tool round trip: the call comes back, the result goes up with it, tools and extras pass through`, async (t) => {
    const h = await startHarness(t, { engine })
    const question: Msg = { role: 'user', content: 'Weather in Paris?' }
    const first = await create(h, { messages: [question], tools: [WEATHER], tool_choice: 'auto', parallel_tool_calls: false, seed: 7 })
    const call = first.choices[0]?.message.tool_calls?.[0]
    t.equal(first.choices[0]?.finish_reason, 'tool_calls')
    if (call?.type !== 'function') return t.fail('no function call')
    t.equal(call.function.name, 'get_weather')
    const up = h.mock.lastChatBody() ?? {}
    t.same(up.tools, [WEATHER], 'tools sent as they came')
    t.same([up.tool_choice, up.parallel_tool_calls, up.seed], ['auto', false, 7])

    const second = await create(h, {
      messages: [question, first.choices[0]?.message as Msg, { role: 'tool', tool_call_id: call.id, content: '18°C and sunny' }],
      tools: [WEATHER],
    })
    t.match(second.choices[0]?.message.content, /Weather in Paris/)
    t.same(
      sent(h).map((m) => m.role),
      ['user', 'assistant', 'tool'],
    )
    t.same(sent(h)[1]?.tool_calls, first.choices[0]?.message.tool_calls, 'the call is sent exactly as it was returned')
  })

  t.test(`${engine.name}: developer role, image and text parts, max_completion_tokens: accepted, counted, sent as they came`, async (t) => {
    const h = await startHarness(t, { engine })
    // A 1×1 PNG: its size is read from the data URL, so it counts as 85 + 170 × 1 tile at detail high.
    const png =
      'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
    const messages: Msg[] = [
      { role: 'developer', content: 'Answer in French.' },
      { role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, { type: 'image_url', image_url: { url: png, detail: 'high' } }] },
    ]
    const r = await create(h, { messages, max_completion_tokens: 300 })
    t.equal(r.choices[0]?.finish_reason, 'stop')
    const up = h.mock.lastChatBody() ?? {}
    t.same(up.messages, messages, 'parts and the developer message unchanged')
    t.equal(up.max_completion_tokens, 300)
    t.notOk('max_tokens' in up, 'no max_tokens invented')
    const textOnly = await create(h, { messages: [messages[0], { role: 'user', content: 'What is in this picture?' }], max_completion_tokens: 300 })
    t.equal(metaOf(r).context.totalTokens - metaOf(textOnly).context.totalTokens, 255, 'the image counts 255 tokens')
    t.equal((metaOf(r) as unknown as { context: { reserved: number } }).context.reserved, 300, 'max_completion_tokens is the reply reserve')

    const withTools = await create(h, { messages: [{ role: 'user', content: 'What is in this picture?' }], tools: [WEATHER], tool_choice: 'none' })
    const plain = await create(h, { messages: [{ role: 'user', content: 'What is in this picture?' }] })
    t.ok(metaOf(withTools).context.totalTokens > metaOf(plain).context.totalTokens + 10, 'tool definitions take room in the budget')
    // The deprecated `functions` parameter carries the same definitions, passed through: counted alike.
    const withFunctions = await create(h, { messages: [{ role: 'user', content: 'What is in this picture?' }], functions: [WEATHER.function], function_call: 'none' })
    t.same(h.mock.lastChatBody()?.functions, [WEATHER.function], 'functions passed through')
    t.equal(metaOf(withFunctions).context.totalTokens, metaOf(withTools).context.totalTokens, 'functions take the room the same tools take')
  })

  t.test(`${engine.name}: broken pairing: OpenAI's 400 and texts, naming the message; nothing reaches the upstream`, async (t) => {
    const h = await startHarness(t, { engine })
    const before = chatCalls(h)
    const orphan = await h.fetch('/api/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }, { role: 'tool', tool_call_id: 'call_1', content: 'x' }] }),
    })
    t.equal(orphan.status, 400)
    const e1 = ((await orphan.json()) as { error: { message: string; param: string; type: string } }).error
    t.equal(e1.message, "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
    t.equal(e1.param, 'messages[1].role')
    t.equal(e1.type, 'invalid_request_error')

    const call = { id: 'call_9', type: 'function', function: { name: 'get_weather', arguments: '{}' } }
    const unanswered = await h.fetch('/api/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'openai/gpt-4o',
        messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'user', content: 'and?' }],
      }),
    })
    t.equal(unanswered.status, 400)
    t.match(((await unanswered.json()) as { error: { message: string } }).error.message, /did not have response messages: call_9$/)

    const badField = await h.fetch('/api/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'assistant', content: null, tool_calls: [{ type: 'function', function: { name: 'f', arguments: '{}' } }] }] }),
    })
    t.equal(badField.status, 400)
    t.equal(((await badField.json()) as { error: { param: string } }).error.param, 'messages[0].tool_calls[0].id')
    t.equal(chatCalls(h), before, 'nothing invalid reached the upstream')
  })

  t.test(`${engine.name}: a tool call remembered in a session: the next request carries only the results`, async (t) => {
    const h = await startHarness(t, { engine })
    const first = await create(h, { messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools: [WEATHER], sessionId: 'agent-1' })
    const calls = first.choices[0]?.message.tool_calls ?? []
    t.equal(calls.length, 1)
    const result: Msg = { role: 'tool', tool_call_id: calls[0]?.id ?? '', content: '-3°C, snow' }
    const second = await create(h, { messages: [result], tools: [WEATHER], sessionId: 'agent-1' })
    t.equal(second.choices[0]?.finish_reason, 'stop', 'a text answer after the tool result')
    t.same(
      sent(h).map((m) => m.role),
      ['user', 'assistant', 'tool'],
      'the upstream saw the question, the call from memory, then the result',
    )
    t.same(sent(h)[1]?.tool_calls, calls)
    t.equal(metaOf(second).memory.historyMessages, 2)

    const stored = await storedSession(h, 'agent-1')
    t.same(
      stored.map((m) => m.role),
      ['user', 'assistant', 'tool', 'assistant'],
    )
    t.same(stored[1]?.tool_calls, calls, 'the call is stored as the client saw it')
    t.equal(stored[1]?.content, null)
    t.same(stored[2], result)

    // A session whose last reply called tools, answered by a result for another call: OpenAI's 400, nothing saved.
    await create(h, { messages: [{ role: 'user', content: 'And in Rome?' }], tools: [WEATHER], sessionId: 'agent-1' })
    const wrong = await h.fetch('/api/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', sessionId: 'agent-1', messages: [{ role: 'tool', tool_call_id: 'call_nope', content: 'x' }] }),
    })
    t.equal(wrong.status, 400)
    t.match(((await wrong.json()) as { error: { message: string; param: string } }).error, {
      message: "Invalid parameter: 'tool_call_id' of 'call_nope' not found in 'tool_calls' of previous message.",
      param: 'messages[0].tool_call_id',
    })
    t.equal((await storedSession(h, 'agent-1')).length, 6)

    // The client gives up on that call and asks something else: the unanswered call is never sent again.
    await create(h, { messages: [{ role: 'user', content: 'Never mind. Hello!' }], sessionId: 'agent-1' })
    t.notOk(sent(h).some((m) => m.role === 'assistant' && JSON.stringify(m.tool_calls ?? []).includes('And in Rome')), 'no unanswered call')
    t.equal(
      sent(h).filter((m) => Array.isArray(m.tool_calls)).length,
      1,
      'only the answered call is in the prompt',
    )
  })

  t.test(`${engine.name}: a tool loop with memory and files: the turn that carries only the results is searched with the stored question`, async (t) => {
    const h = await startHarness(t, { engine })
    const up = await uploadJson(h, { filename: 'travel.md', content: '# Travel policy\n\nIn snow, staff travelling to Oslo take the airport train, never a taxi.' })
    t.equal(up.status, 201)
    type Rag = { query: string | null; reason: string | null; sources: Array<{ filename: string }> }
    const ragOf = (r: unknown): Rag => (r as { _metadata: { rag: Rag } })._metadata.rag
    const question = 'How should staff travel to Oslo if it snows?'
    const first = await create(h, { messages: [{ role: 'user', content: question }], tools: [WEATHER], sessionId: 'agent-rag', useRAG: true })
    t.equal(ragOf(first).sources[0]?.filename, 'travel.md', 'the question turn got the excerpt')
    const call = first.choices[0]?.message.tool_calls?.[0]
    const second = await create(h, {
      messages: [{ role: 'tool', tool_call_id: call?.id ?? '', content: '-3°C, snow' }],
      tools: [WEATHER],
      sessionId: 'agent-rag',
      useRAG: true,
    })
    // The answer is written on this turn: without the excerpt it would answer from the weather alone.
    t.match(ragOf(second), { query: question, reason: null })
    t.equal(ragOf(second).sources[0]?.filename, 'travel.md')
    t.match(JSON.stringify(sent(h)), /airport train/, 'the excerpt went upstream with the results')
  })

  t.test(`${engine.name}: a streamed tool call is assembled from its deltas and remembered`, async (t) => {
    const h = await startHarness(t, { engine })
    h.mock.enqueue({ chunkChars: 3, toolCalls: [{ name: 'get_weather', arguments: '{"city":"Lisbon"}' }, { name: 'get_weather', arguments: '{"city":"Porto"}' }] })
    const stream = await h.client().chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [{ role: 'user', content: 'Weather in Lisbon and Porto?' }],
      tools: [WEATHER],
      stream: true,
      ...({ sessionId: 'agent-stream', useRAG: false } as object),
    })
    const args = ['', '']
    let finish: string | null | undefined
    for await (const chunk of stream) {
      for (const c of chunk.choices[0]?.delta.tool_calls ?? []) args[c.index] += c.function?.arguments ?? ''
      finish = chunk.choices[0]?.finish_reason ?? finish
    }
    t.same(args, ['{"city":"Lisbon"}', '{"city":"Porto"}'], 'the client got the arguments in pieces')
    t.equal(finish, 'tool_calls')
    const stored = await storedSession(h, 'agent-stream')
    const calls = stored[1]?.tool_calls as Array<{ id: string; function: { name: string; arguments: string } }>
    t.same(calls.map((c) => c.function), [
      { name: 'get_weather', arguments: '{"city":"Lisbon"}' },
      { name: 'get_weather', arguments: '{"city":"Porto"}' },
    ])
    t.ok(calls.every((c) => c.id.startsWith('call_')))

    // Both results in the next request, by the ids the stream carried.
    const r = await create(h, {
      sessionId: 'agent-stream',
      tools: [WEATHER],
      messages: calls.map((c, i) => ({ role: 'tool', tool_call_id: c.id, content: i === 0 ? '22°C' : '19°C' })),
    })
    t.equal(r.choices[0]?.finish_reason, 'stop')
    t.same(sent(h).map((m) => m.role), ['user', 'assistant', 'tool', 'tool'])
  })

  t.test(`${engine.name}: a client that resends its whole history: sent and saved once; edits and regenerations are followed`, async (t) => {
    const h = await startHarness(t, { engine })
    const u1: Msg = { role: 'user', content: 'My name is Ada.' }
    const r1 = await create(h, { messages: [u1], sessionId: 'full' })
    const a1: Msg = { role: 'assistant', content: r1.choices[0]?.message.content ?? '' }
    const u2: Msg = { role: 'user', content: 'What is my name?' }
    // As LangChain sends it: the whole conversation, content as text parts this time.
    const r2 = await create(h, { messages: [{ role: 'system', content: 'Be brief.' }, u1, { role: 'assistant', content: [{ type: 'text', text: a1.content as string }] }, u2], sessionId: 'full' })
    t.same(
      sent(h).map((m) => m.content),
      ['Be brief.', 'My name is Ada.', a1.content, 'What is my name?'],
      'each earlier message once',
    )
    t.equal(metaOf(r2).memory.recognizedMessages, 2)
    t.equal(metaOf(r2).memory.historyMessages, 2)
    t.equal(metaOf(r2).context.includedMessages, 4)
    const a2 = r2.choices[0]?.message.content
    t.same((await storedSession(h, 'full')).map((m) => m.content), ['My name is Ada.', a1.content, 'What is my name?', a2])

    // Regenerate: the same conversation up to the last question again. The old answer is replaced, not kept beside it.
    h.mock.enqueue({ reply: 'Your name is Ada.' })
    await create(h, { messages: [u1, a1, u2], sessionId: 'full' })
    t.same(sent(h).map((m) => m.content), ['My name is Ada.', a1.content, 'What is my name?'])
    t.same((await storedSession(h, 'full')).map((m) => m.content), ['My name is Ada.', a1.content, 'What is my name?', 'Your name is Ada.'])

    // Edit the second question: the conversation continues from the edit.
    await create(h, { messages: [u1, a1, { role: 'user', content: 'How long is my name?' }], sessionId: 'full' })
    t.same(sent(h).map((m) => m.content), ['My name is Ada.', a1.content, 'How long is my name?'])
    const now = await storedSession(h, 'full')
    t.same(now.slice(0, 3).map((m) => m.content), ['My name is Ada.', a1.content, 'How long is my name?'])
    t.equal(now.length, 4)

    // A lone repeated message is new, not a rewind: "yes" twice is two turns.
    await create(h, { messages: [{ role: 'user', content: 'yes' }], sessionId: 'yes' })
    await create(h, { messages: [{ role: 'user', content: 'yes' }], sessionId: 'yes' })
    t.same((await storedSession(h, 'yes')).map((m) => m.role), ['user', 'assistant', 'user', 'assistant'])
  })

  t.test(`${engine.name}: the x-session-id header names the session for SDKs that cannot add a body field`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    await client.chat.completions.create(
      { model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'remember me' }] },
      { headers: { 'x-session-id': 'from-header' } },
    )
    t.equal((await storedSession(h, 'from-header')).length, 2)
    const bad = await h.fetch('/api/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': '..' },
      body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'x' }] }),
    })
    t.equal(bad.status, 400)
    t.equal(((await bad.json()) as { error: { param: string } }).error.param, 'sessionId')
  })

  t.test(`${engine.name}: a small window drops old tool exchanges whole; image and audio parts are remembered and counted`, async (t) => {
    const h = await startHarness(t, { engine })
    const model = 'test/tiny' // a 4,096-token window
    const filler = 'The tool returned a long report about harbour traffic, tides and cargo. '.repeat(40)
    for (let i = 0; i < 12; i++) {
      const first = await create(h, { model, messages: [{ role: 'user', content: `Check harbour ${i}` }], tools: [WEATHER], sessionId: 'small' })
      const call = first.choices[0]?.message.tool_calls?.[0]
      if (call === undefined) return t.fail('no call')
      await create(h, { model, messages: [{ role: 'tool', tool_call_id: call.id, content: `${i}: ${filler}` }], tools: [WEATHER], sessionId: 'small' })
    }
    const r = await create(h, { model, messages: [{ role: 'user', content: 'Summarise.' }], sessionId: 'small' })
    const prompt = sent(h)
    t.ok(metaOf(r).memory.historyMessages > 0 && metaOf(r).memory.historyMessages < 48, 'some history, not all of it')
    t.equal(prompt[0]?.role, 'user', 'the kept history opens with a user message')
    // Every call in the prompt is followed by its results, and every result follows its call (the mock checks too).
    prompt.forEach((m, i) => {
      if (m.role === 'tool') t.ok(prompt.slice(0, i).some((p) => JSON.stringify(p.tool_calls ?? []).includes(String(m.tool_call_id))))
      if (Array.isArray(m.tool_calls)) t.equal(prompt[i + 1]?.role, 'tool', 'a call is followed by its result')
    })

    // Parts are saved as they were sent and come back in the session API; the next prompt counts them again.
    const png =
      'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
    // 1 s of 16-bit mono 8 kHz silence as WAV: 10 tokens at gpt-4o's 10 tokens a second.
    const wav = Buffer.alloc(44 + 16000)
    wav.write('RIFF', 0)
    wav.writeUInt32LE(36 + 16000, 4)
    wav.write('WAVEfmt ', 8)
    wav.writeUInt32LE(16, 16)
    wav.writeUInt16LE(1, 20)
    wav.writeUInt16LE(1, 22)
    wav.writeUInt32LE(8000, 24)
    wav.writeUInt32LE(16000, 28)
    wav.writeUInt16LE(2, 32)
    wav.writeUInt16LE(16, 34)
    wav.write('data', 36)
    wav.writeUInt32LE(16000, 40)
    const parts = [
      { type: 'text', text: 'Look and listen.' },
      { type: 'image_url', image_url: { url: png, detail: 'low' } },
      { type: 'input_audio', input_audio: { data: wav.toString('base64'), format: 'wav' } },
    ]
    const a = await create(h, { messages: [{ role: 'user', content: parts }], sessionId: 'media' })
    const stored = await storedSession(h, 'media')
    t.same(stored[0], { role: 'user', content: parts }, 'saved exactly as sent')
    const b = await create(h, { messages: [{ role: 'user', content: 'And now?' }], sessionId: 'media' })
    t.same(sent(h)[0], { role: 'user', content: parts }, 'sent again from memory as it was')
    const plain = await create(h, { messages: [{ role: 'user', content: 'Look and listen.' }] })
    t.equal(metaOf(a).context.totalTokens - metaOf(plain).context.totalTokens, 85 + 10, 'image (low: 85) and audio (1 s: 10) counted')
    t.ok(metaOf(b).context.totalTokens > metaOf(a).context.totalTokens, 'and counted again as history')
  })
}
