/**
 * The Responses API end to end, through the official `openai` SDK against a real gateway and the mock OpenRouter:
 * create (JSON), state kept here (`store`, `previous_response_id` chains and forks, retrieve, delete, input items),
 * function-call round trips across a chain, tenants, conversations, and the errors OpenAI gives. On every store engine
 * (LMDB, and PostgreSQL when the test cluster is there).
 */
import t from 'tap'
import OpenAI from 'openai'
import { encode, encodeChat } from 'gpt-tokenizer'
import { KEY_A, KEY_B, startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'
import { uploadJson } from './helpers/uploads.js'
import { checkResponseStream } from './helpers/responses-stream-checker.js'

type Sent = Array<{ role: string; content?: unknown; tool_calls?: Array<{ id: string; function: { name: string } }>; tool_call_id?: string }>
const sentMessages = (h: Harness): Sent => (h.mock.lastChatBody()?.messages ?? []) as Sent
const texts = (sent: Sent): string[] => sent.map((m) => `${m.role}:${typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? null)}`)

const MODEL = 'openai/gpt-4o'

for (const engine of testableEngines(t, 'the Responses API')) {
  t.test(`${engine.name}: responses.create with a string: the Response object as the SDK parses it, stored and retrievable`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { reply: 'Hello from the model.' } } })
    const client = h.client()
    const r = await client.responses.create({ model: MODEL, input: 'Say hello', useRAG: false } as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    t.equal(r.object, 'response')
    t.match(r.id, /^resp_/)
    t.equal(r.status, 'completed')
    t.equal(r.output_text, 'Hello from the model.', 'the SDK derives output_text from the output items')
    t.match(r.output[0], { type: 'message', role: 'assistant', status: 'completed', id: /^msg_/ })
    t.ok(r.usage && r.usage.input_tokens > 0 && r.usage.output_tokens > 0, 'usage mapped from the upstream')
    t.same(r.usage?.input_tokens_details, { cached_tokens: 0 })
    t.same(r.usage?.output_tokens_details, { reasoning_tokens: 0 })
    t.equal((r as unknown as { store: boolean }).store, true)
    t.type((r as unknown as { _metadata: unknown })._metadata, 'object', '_metadata rides on the response')
    t.same(texts(sentMessages(h)), ['user:Say hello'], 'one user message went upstream')

    const again = await client.responses.retrieve(r.id)
    t.equal(again.id, r.id)
    t.equal(again.output_text, 'Hello from the model.')
    const items = await client.responses.inputItems.list(r.id)
    t.equal(items.data.length, 1)
    t.match(items.data[0], { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Say hello' }], status: 'completed' })
  })

  t.test(`${engine.name}: input_items: each item with its status, as OpenAI populates it when it lists items; the client's own status kept`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { reply: 'ok' } } })
    const client = h.client()
    const r = await client.responses.create({
      model: MODEL,
      input: [
        { role: 'user', content: 'q' },
        { type: 'function_call', call_id: 'call_a', name: 'f', arguments: '{}' },
        { type: 'function_call_output', call_id: 'call_a', output: 'r' },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'half', annotations: [] }], status: 'incomplete', id: 'msg_given' },
        { role: 'user', content: 'go on' },
      ],
    } as never)
    const items = await client.responses.inputItems.list(r.id, { order: 'asc' })
    t.same(
      items.data.map((i) => [i.type, (i as { status?: string }).status]),
      [['message', 'completed'], ['function_call', 'completed'], ['function_call_output', 'completed'], ['message', 'incomplete'], ['message', 'completed']],
    )
  })

  t.test(`${engine.name}: previous_response_id: the second turn carries the first; instructions are not inherited`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const r1 = await client.responses.create({ model: MODEL, instructions: 'Be terse.', input: 'My name is Ada.' })
    t.same(texts(sentMessages(h)), ['system:Be terse.', 'user:My name is Ada.'])
    const r2 = await client.responses.create({ model: MODEL, input: 'What is my name?', previous_response_id: r1.id })
    t.same(
      texts(sentMessages(h)),
      ['user:My name is Ada.', `assistant:${r1.output_text}`, 'user:What is my name?'],
      "the chain's turns come first, and the first turn's instructions do not",
    )
    t.equal(r2.previous_response_id, r1.id)
    t.equal(r2.instructions, null)
    t.ok(r2.usage && r1.usage && r2.usage.input_tokens > r1.usage.input_tokens, 'the whole context is billed again')
  })

  t.test(`${engine.name}: a chain walked before is walked again after a turn of it is deleted: the context ends there`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const r1 = await client.responses.create({ model: MODEL, input: 'one' })
    const r2 = await client.responses.create({ model: MODEL, input: 'two', previous_response_id: r1.id })
    const r3 = await client.responses.create({ model: MODEL, input: 'three', previous_response_id: r2.id })
    // Asked twice: the second time the chain comes from the gateway's cache of walked chains.
    for (const round of ['walked', 'cached']) {
      await client.responses.create({ model: MODEL, input: 'four', previous_response_id: r3.id, store: false })
      t.same(texts(sentMessages(h)).filter((s) => s.startsWith('user:')), ['user:one', 'user:two', 'user:three', 'user:four'], round)
    }
    await client.responses.delete(r2.id)
    await client.responses.create({ model: MODEL, input: 'four', previous_response_id: r3.id, store: false })
    t.same(texts(sentMessages(h)).filter((s) => s.startsWith('user:')), ['user:three', 'user:four'], 'the deleted turn and everything before it are gone')
    const gone = await client.responses.create({ model: MODEL, input: 'x', previous_response_id: r2.id }).then(() => undefined, (e: unknown) => e)
    t.ok(gone instanceof OpenAI.BadRequestError, 'the deleted response itself is not found')
  })

  t.test(`${engine.name}: forks: two responses off one parent each see only their own branch`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const root = await client.responses.create({ model: MODEL, input: 'root question' })
    const a = await client.responses.create({ model: MODEL, input: 'branch A', previous_response_id: root.id })
    const b = await client.responses.create({ model: MODEL, input: 'branch B', previous_response_id: root.id })
    t.same(texts(sentMessages(h)).filter((s) => s.startsWith('user:')), ['user:root question', 'user:branch B'])
    await client.responses.create({ model: MODEL, input: 'after A', previous_response_id: a.id })
    t.same(texts(sentMessages(h)).filter((s) => s.startsWith('user:')), ['user:root question', 'user:branch A', 'user:after A'])
    t.not(a.id, b.id)
  })

  t.test(`${engine.name}: previous_response_not_found for unknown, deleted, unstored and other tenants' ids`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const kept = await client.responses.create({ model: MODEL, input: 'kept' })
    const unstored = await client.responses.create({ model: MODEL, input: 'not kept', store: false })
    const gone = await client.responses.create({ model: MODEL, input: 'deleted' })
    await client.responses.delete(gone.id)
    const before = h.mock.requests.length
    for (const [why, id, key] of [
      ['unknown', 'resp_doesnotexist', KEY_A],
      ['store: false', unstored.id, KEY_A],
      ['deleted', gone.id, KEY_A],
      ["another tenant's", kept.id, KEY_B],
    ] as const) {
      const err = await h
        .client(key)
        .responses.create({ model: MODEL, input: 'hi', previous_response_id: id })
        .then(() => undefined, (e: unknown) => e)
      t.ok(err instanceof OpenAI.BadRequestError, `${why}: 400`)
      t.match((err as InstanceType<typeof OpenAI.BadRequestError>).error, {
        code: 'previous_response_not_found',
        param: 'previous_response_id',
        message: `Previous response with id '${id}' not found.`,
      })
    }
    t.equal(h.mock.requests.length, before, 'the upstream was never called')
    const notFound = await client.responses.retrieve(unstored.id).then(() => undefined, (e: unknown) => e)
    t.ok(notFound instanceof OpenAI.NotFoundError, 'store: false leaves nothing to retrieve')
    const other = await h.client(KEY_B).responses.retrieve(kept.id).then(() => undefined, (e: unknown) => e)
    t.ok(other instanceof OpenAI.NotFoundError, "another tenant's response is not found")
  })

  t.test(`${engine.name}: a function-call round trip where the second request carries only the function_call_output`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { toolCalls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] } } })
    const client = h.client()
    const tools: OpenAI.Responses.Tool[] = [
      { type: 'function', name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: null },
    ]
    const r1 = await client.responses.create({ model: MODEL, input: 'Weather in Paris?', tools })
    const call = r1.output.find((i) => i.type === 'function_call')
    t.match(call, { type: 'function_call', name: 'get_weather', arguments: '{"city":"Paris"}', status: 'completed', id: /^fc_/ })
    const upstreamTools = h.mock.lastChatBody()?.tools
    t.match(upstreamTools, [{ type: 'function', function: { name: 'get_weather', description: 'Weather for a city' } }], 'flat tools became Chat tools')

    h.mock.setDefault({ reply: 'It is sunny in Paris.' })
    const callId = (call as OpenAI.Responses.ResponseFunctionToolCall).call_id
    const r2 = await client.responses.create({
      model: MODEL,
      previous_response_id: r1.id,
      input: [{ type: 'function_call_output', call_id: callId, output: '{"sky":"clear"}' }],
      tools,
    })
    t.equal(r2.output_text, 'It is sunny in Paris.')
    const sent = sentMessages(h)
    t.same(
      sent.map((m) => m.role),
      ['user', 'assistant', 'tool'],
      'the stored call and its result went upstream as one unit',
    )
    t.equal(sent[1]?.tool_calls?.[0]?.id, callId)
    t.equal(sent[2]?.tool_call_id, callId)

    const missing = await client.responses
      .create({ model: MODEL, previous_response_id: r1.id, input: 'never mind', tools })
      .then(() => undefined, (e: unknown) => e)
    t.ok(missing instanceof OpenAI.BadRequestError, 'a chain whose calls are unanswered is a 400, as OpenAI checks it')
  })

  t.test(`${engine.name}: a call and its output that do not pair are OpenAI's 400 naming input, in its words (not a chat message's)`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { reply: 'ok' } } })
    const r1 = await h.client().responses.create({ model: MODEL, input: 'hello' })
    const call = { type: 'function_call', call_id: 'call_a', name: 'f', arguments: '{}' }
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['an output with no call', { input: [{ type: 'function_call_output', call_id: 'call_x', output: 'r' }] }, 'No tool call found for function call output with call_id call_x.'],
      [
        'an output for no call of the chain',
        { previous_response_id: r1.id, input: [{ type: 'function_call_output', call_id: 'call_x', output: 'r' }] },
        'No tool call found for function call output with call_id call_x.',
      ],
      ['a call with no output', { input: [{ role: 'user', content: 'q' }, call] }, 'No tool output found for function call call_a.'],
      [
        'a custom tool call with no output',
        { input: [{ role: 'user', content: 'q' }, { type: 'custom_tool_call', call_id: 'call_c', name: 'apply_patch', input: 'x' }] },
        'No tool output found for function call call_c.',
      ],
    ]
    const before = h.mock.requests.length
    for (const [why, body, message] of cases) {
      const r = await h.fetch('/api/v1/responses', { method: 'POST', body: JSON.stringify({ model: MODEL, ...body }), headers: { 'content-type': 'application/json' } })
      t.equal(r.status, 400, why)
      t.match(((await r.json()) as { error: unknown }).error, { message, type: 'invalid_request_error', param: 'input' }, why)
    }
    t.equal(h.mock.requests.length, before, 'nothing reached the upstream')
    const paired = await h.client().responses.create({ model: MODEL, input: [{ role: 'user', content: 'q' }, call, { type: 'function_call_output', call_id: 'call_a', output: 'r' }] } as never)
    t.equal(paired.status, 'completed', 'a call answered in the same input is fine')
  })

  t.test(`${engine.name}: a conversation's unanswered calls are checked as a chain's: OpenAI's 400s, not a silent drop`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { toolCalls: [{ name: 'f', arguments: '{}' }] } } })
    const client = h.client()
    const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'f', parameters: null, strict: null }]
    const conv = await client.conversations.create({})
    const r1 = await client.responses.create({ model: MODEL, conversation: conv.id, input: 'q', tools })
    const callId = (r1.output.find((i) => i.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall).call_id
    h.mock.setDefault({ reply: 'ok' })
    const before = h.mock.requests.length
    const cases: Array<[string, OpenAI.Responses.ResponseInput | string, string]> = [
      ['a new message while a call waits', 'never mind', `No tool output found for function call ${callId}.`],
      ['an output for no call', [{ type: 'function_call_output', call_id: 'call_zz', output: 'x' }], 'No tool call found for function call output with call_id call_zz.'],
    ]
    for (const [why, input, message] of cases) {
      const e = await client.responses.create({ model: MODEL, conversation: conv.id, input, tools }).then(() => undefined, (err: unknown) => err)
      t.ok(e instanceof OpenAI.BadRequestError, why)
      t.match((e as { error: unknown }).error, { message, param: 'input' }, why)
    }
    t.equal(h.mock.requests.length, before, 'nothing reached the upstream')
    const r2 = await client.responses.create({ model: MODEL, conversation: conv.id, input: [{ type: 'function_call_output', call_id: callId, output: 'x' }], tools })
    t.equal(r2.output_text, 'ok', 'answering the call goes through')
  })

  t.test(`${engine.name}: conversations are sessions: items, the sessions API and a second turn that sees the first`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const conv = await client.conversations.create({ metadata: { topic: 'names' } })
    t.match(conv, { object: 'conversation', metadata: { topic: 'names' } })
    const r1 = await client.responses.create({ model: MODEL, input: 'My name is Ada.', conversation: conv.id })
    t.same(r1.conversation, { id: conv.id })
    await client.responses.create({ model: MODEL, input: 'What is my name?', conversation: conv.id })
    t.same(
      texts(sentMessages(h)),
      ['user:My name is Ada.', `assistant:${r1.output_text}`, 'user:What is my name?'],
      "the conversation's items come before the input",
    )
    const items = await client.conversations.items.list(conv.id, { order: 'asc' })
    t.same(
      items.data.map((i) => (i.type === 'message' ? `${i.role}` : i.type)),
      ['user', 'assistant', 'user', 'assistant'],
    )
    const viaSessions = await h.fetch(`/api/v1/sessions/${encodeURIComponent(conv.id)}`)
    t.equal(((await viaSessions.json()) as { messages: unknown[] }).messages.length, 4, 'the same thread through /sessions')

    const first = items.data[0]
    t.ok(first?.id)
    const one = await client.conversations.items.retrieve(first?.id ?? '', { conversation_id: conv.id })
    t.equal(one.id, first?.id)
    await client.conversations.items.delete(first?.id ?? '', { conversation_id: conv.id })
    const after = await client.conversations.items.list(conv.id, { order: 'asc' })
    t.equal(after.data.length, 3, 'an item deleted')
    const added = await client.conversations.items.create(conv.id, { items: [{ type: 'message', role: 'user', content: 'one more' }] })
    t.equal(added.data.length, 1)

    const updated = await client.conversations.update(conv.id, { metadata: { topic: 'renamed' } })
    t.same(updated.metadata, { topic: 'renamed' })
    const deleted = await client.conversations.delete(conv.id)
    t.match(deleted, { id: conv.id, deleted: true })
    const gone = await client.conversations.retrieve(conv.id).then(() => undefined, (e: unknown) => e)
    t.ok(gone instanceof OpenAI.NotFoundError)
    const unknown = await client.responses.create({ model: MODEL, input: 'x', conversation: 'conv_nope' }).then(() => undefined, (e: unknown) => e)
    t.ok(unknown instanceof OpenAI.NotFoundError, 'a response in an unknown conversation is a 404')
  })

  t.test(`${engine.name}: stateless clients (full history every turn, store: false) leave nothing and double nothing`, async (t) => {
    const h = await startHarness(t, { engine })
    const client = h.client()
    const history: OpenAI.Responses.ResponseInputItem[] = [{ role: 'user', content: 'first' }]
    const r1 = await client.responses.create({ model: MODEL, input: history, store: false })
    history.push({ role: 'assistant', content: r1.output_text }, { role: 'user', content: 'second' })
    await client.responses.create({ model: MODEL, input: history, store: false })
    t.same(texts(sentMessages(h)), ['user:first', `assistant:${r1.output_text}`, 'user:second'], 'sent once, as given')
    const sessions = await h.fetch('/api/v1/sessions')
    t.same(((await sessions.json()) as { data: unknown[] }).data, [], 'no session was made')
  })

  t.test(`${engine.name}: bad input gets OpenAI-shaped errors naming the field`, async (t) => {
    const h = await startHarness(t, { engine })
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['hosted tool', { model: MODEL, input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      ['no model', { input: 'x' }, 'model'],
      ['both chain and conversation', { model: MODEL, input: 'x', previous_response_id: 'resp_1', conversation: 'conv_1' }, 'conversation'],
      ['bad item', { model: MODEL, input: [{ type: 'function_call_output', output: 'x' }] }, 'input[0].call_id'],
    ]
    const before = h.mock.requests.length
    for (const [why, body, param] of cases) {
      const r = await h.fetch('/api/v1/responses', { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } })
      t.equal(r.status, 400, why)
      const e = ((await r.json()) as { error: { param: string; type: string } }).error
      t.equal(e.param, param, `${why}: names ${param}`)
      t.equal(e.type, 'invalid_request_error')
    }
    t.equal(h.mock.requests.length, before, 'nothing reached the upstream')
    const cancel = await h.fetch('/api/v1/responses/resp_x/cancel', { method: 'POST' })
    t.equal(cancel.status, 404)
  })

  async function streamEvents(client: OpenAI, body: Record<string, unknown>): Promise<Array<Record<string, unknown>>> {
    const stream = await client.responses.create({ ...body, stream: true } as unknown as OpenAI.Responses.ResponseCreateParamsStreaming)
    const events: Array<Record<string, unknown>> = []
    for await (const e of stream) events.push(e as unknown as Record<string, unknown>)
    return events
  }

  t.test(`${engine.name}: streaming: the event sequence passes the independent checker, and the response is stored before its last event`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { reply: 'Streamed, in small pieces ✓.', chunkChars: 3, splitWrites: 'random', crlf: true } } })
    const client = h.client()
    const events = await streamEvents(client, { model: MODEL, input: 'stream please' })
    t.same(checkResponseStream(events), [], 'no violations')
    t.same(
      [...new Set(events.map((e) => e.type))],
      [
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        'response.output_text.delta',
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ],
    )
    const done = events.at(-1)?.response as { id: string; output: Array<{ content: Array<{ text: string }> }>; usage: { input_tokens: number } }
    t.equal(done.output[0]?.content[0]?.text, 'Streamed, in small pieces ✓.')
    t.ok(done.usage.input_tokens > 0, 'usage in the terminal event')
    // The terminal event carries the response as retrieve gives it: completed_at set, the in-progress snapshots' null.
    t.type((done as unknown as { completed_at: unknown }).completed_at, 'number')
    t.equal((events[0]?.response as { completed_at: unknown }).completed_at, null)
    const { _metadata: _, ...terminal } = done as unknown as Record<string, unknown>
    const { output_text: __, ...stored } = (await client.responses.retrieve(done.id)) as unknown as Record<string, unknown>
    t.same(terminal, stored, 'the terminal response is the stored one')
    // The very next request chains: the response was durable before response.completed left.
    await client.responses.create({ model: MODEL, input: 'and then?', previous_response_id: done.id })
    t.same(texts(sentMessages(h)), ['user:stream please', 'assistant:Streamed, in small pieces ✓.', 'user:and then?'])
  })

  t.test(`${engine.name}: streaming: the responses.stream() helper runs to its final response, tool calls included`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { toolCalls: [{ name: 'lookup', arguments: '{"q":"a"}' }, { name: 'lookup', arguments: '{"q":"b"}' }] } } })
    const client = h.client()
    const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } }, strict: null }]
    const final = await client.responses.stream({ model: MODEL, input: 'look both up', tools }).finalResponse()
    const calls = final.output.filter((i) => i.type === 'function_call')
    t.same(calls.map((c) => c.arguments), ['{"q":"a"}', '{"q":"b"}'])
    h.mock.setDefault({ reply: 'Both found.' })
    const next = await client.responses
      .stream({
        model: MODEL,
        previous_response_id: final.id,
        input: calls.map((c) => ({ type: 'function_call_output' as const, call_id: c.call_id, output: 'ok' })),
        tools,
      })
      .finalResponse()
    t.equal(next.output_text, 'Both found.')
  })

  t.test(`${engine.name}: log probabilities asked for with include come back on the output text, JSON and streamed, as the upstream gave them`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { reply: 'Hello there', chunkChars: 4 } } })
    const client = h.client()
    const body = { model: MODEL, input: 'hi', include: ['message.output_text.logprobs'], top_logprobs: 2 }
    const tokens = ['Hell', 'o th', 'ere']
    const r = await client.responses.create(body as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    t.match(h.mock.lastChatBody(), { logprobs: true, top_logprobs: 2 }, 'asked of the upstream')
    const part = (r.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText
    t.same(part.logprobs?.map((l) => l.token), tokens, 'JSON: on the output_text part')

    const events = await streamEvents(client, body)
    t.same(checkResponseStream(events), [])
    t.same(events.filter((e) => e.type === 'response.output_text.delta').map((e) => (e.logprobs as Array<{ token: string }>).map((l) => l.token)), tokens.map((x) => [x]), 'each delta its own')
    const done = events.find((e) => e.type === 'response.output_text.done') as { logprobs: Array<{ token: string }> }
    t.same(done.logprobs.map((l) => l.token), tokens, 'output_text.done: all')
    const final = (events.at(-1) as { response: OpenAI.Responses.Response }).response
    t.same(((final.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText).logprobs?.map((l) => l.token), tokens, 'the terminal output too')
  })

  t.test(`${engine.name}: streaming: an upstream failure midway ends with error and response.failed, and nothing is stored`, async (t) => {
    const h = await startHarness(t, { engine, mock: { behaviour: { reply: 'This will break halfway through', chunkChars: 4, midStreamError: { afterChunks: 2 } } } })
    const client = h.client()
    const stream = await client.responses.create({ model: MODEL, input: 'x', stream: true })
    const events: Array<Record<string, unknown>> = []
    const err = await (async () => {
      for await (const e of stream) events.push(e as unknown as Record<string, unknown>)
    })().then(() => undefined, (e: unknown) => e)
    t.ok(err instanceof OpenAI.APIError, 'the SDK raises the error event')
    t.equal(events[0]?.type, 'response.created')
    const created = events[0]?.response as { id: string }
    const retrieved = await client.responses.retrieve(created.id).then(() => undefined, (e: unknown) => e)
    t.ok(retrieved instanceof OpenAI.NotFoundError, 'a failed response is not stored')
  })

  t.test(`${engine.name}: a text.format schema takes room in the packed prompt, as tools do: a long conversation stays within the window`, async (t) => {
    const h = await startHarness(t, { engine, mock: { models: [{ id: 'test/tiny', context_length: 900 }] }, env: { TOKEN_MARGINS: '*:0' } })
    const client = h.client()
    const ask = (input: string, extra: Record<string, unknown> = {}) =>
      client.responses.create({ model: 'test/tiny', input, max_output_tokens: 100, sessionId: 'long', useRAG: false, ...extra } as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    for (let i = 0; i < 14; i++) await ask(`turn ${i}: ${'lorem ipsum dolor sit amet '.repeat(4)}`)
    const properties = Object.fromEntries(
      Array.from({ length: 12 }, (_, i) => [`field_${i}`, { type: 'string', description: `The ${i}th detail of the answer, in plain words.` }]),
    )
    const schema = { type: 'object', properties, required: Object.keys(properties), additionalProperties: false }
    type Meta = { context: { totalTokens: number }; memory: { historyMessages: number } }
    const without = (await ask('latest question', { saveToMemory: false, store: false })) as unknown as { _metadata: Meta }
    const r = (await ask('latest question', {
      saveToMemory: false,
      store: false,
      text: { format: { type: 'json_schema', name: 'answer', strict: true, schema } },
    })) as unknown as { _metadata: Meta }
    const up = h.mock.lastChatBody() ?? {}
    const jsonSchema = { name: 'answer', schema, strict: true }
    t.same(up.response_format, { type: 'json_schema', json_schema: jsonSchema })
    const schemaTokens = encode(JSON.stringify(jsonSchema)).length
    const messages = encodeChat(up.messages as Parameters<typeof encodeChat>[0], 'gpt-4o').length
    t.equal(r._metadata.context.totalTokens, messages + schemaTokens, '_metadata counts the schema')
    t.ok(messages + schemaTokens + 100 <= 900, `prompt (schema included) + reserve fit the window: ${messages} + ${schemaTokens} + 100`)
    t.ok(r._metadata.memory.historyMessages < without._metadata.memory.historyMessages, 'older turns made room for it')
  })

  t.test(`${engine.name}: file_search searches the caller's knowledge base and reports a file_search_call item (JSON and stream)`, async (t) => {
    const h = await startHarness(t, { engine })
    const up = await uploadJson(h, { filename: 'walrus.txt', content: 'The walrus colony at Cape Zorbelt numbers 4,217 animals.' }, { provider: null })
    t.equal(up.status, 201)
    const client = h.client()
    const r = await client.responses.create({
      model: MODEL,
      input: 'How many animals are in the walrus colony at Cape Zorbelt?',
      tools: [{ type: 'file_search', vector_store_ids: [] }],
      include: ['file_search_call.results'],
    })
    const fs = r.output[0] as OpenAI.Responses.ResponseFileSearchToolCall
    t.equal(fs.type, 'file_search_call')
    t.same(fs.queries, ['How many animals are in the walrus colony at Cape Zorbelt?'])
    t.match(fs.results?.[0], { filename: 'walrus.txt', text: /4,217/ })
    t.ok(JSON.stringify(sentMessages(h)).includes('4,217'), 'the excerpt went upstream')
    t.equal(r.output[1]?.type, 'message', 'the reply after the search')

    const events = await streamEvents(client, { model: MODEL, input: 'animals in the walrus colony at Cape Zorbelt', tools: [{ type: 'file_search', vector_store_ids: [] }] })
    t.same(checkResponseStream(events), [], 'no violations with the search item first')
    const final = events.at(-1)?.response as { output: Array<{ type: string; results: unknown }> }
    t.same(final.output.map((i) => i.type), ['file_search_call', 'message'])
    t.equal(final.output[0]?.results, null, 'no results unless include asks for them')
  })
}
