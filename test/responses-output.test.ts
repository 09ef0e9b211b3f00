/**
 * The Chat → Responses side of the bridge: output items of a completion, status from the finish reason, usage, and
 * the Response object as OpenAI sends it.
 */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { completionToOutput, ECHO_DEFAULTS, mapUsage, outputJson, ResponseJson, responseObject, statusFromFinish, type ResponseState } from '../src/responses/output.js'
import { parseResponsesRequest } from '../src/responses/request.js'

function counter(): (prefix: string) => string {
  let n = 0
  return (prefix) => `${prefix}_${++n}`
}
const completion = (message: Record<string, unknown>, finish_reason: string | null = 'stop'): Record<string, unknown> => ({
  id: 'gen-1',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason }],
})
const custom = new Set(['apply_patch'])

t.test('completionToOutput: table', async (t) => {
  const cases: Array<[string, Record<string, unknown>, unknown[], string | null]> = [
    [
      'text',
      completion({ content: 'Hello' }),
      [{ id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'Hello' }], role: 'assistant' }],
      'stop',
    ],
    [
      'no content at all: one empty message',
      completion({ content: null }),
      [{ id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: '' }], role: 'assistant' }],
      'stop',
    ],
    [
      'tool calls only: no empty message; ids minted, call ids kept',
      completion(
        {
          content: '',
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } },
            { type: 'function', function: { name: 'time', arguments: '{}' } },
          ],
        },
        'tool_calls',
      ),
      [
        { id: 'fc_1', type: 'function_call', status: 'completed', arguments: '{"city":"Oslo"}', call_id: 'call_a', name: 'weather' },
        { id: 'fc_3', type: 'function_call', status: 'completed', arguments: '{}', call_id: 'call_2', name: 'time' },
      ],
      'tool_calls',
    ],
    [
      'text then custom tool calls (raw text instead of the {"input"} wrapper is the input)',
      completion(
        {
          content: 'Patching.',
          tool_calls: [
            { id: 'call_p', type: 'function', function: { name: 'apply_patch', arguments: '{"input":"*** Begin Patch"}' } },
            { id: 'call_q', type: 'function', function: { name: 'apply_patch', arguments: 'raw' } },
            { id: 'call_r', type: 'custom', custom: { name: 'apply_patch', input: 'patch 2' } },
          ],
        },
        'tool_calls',
      ),
      [
        { id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'Patching.' }], role: 'assistant' },
        { id: 'ctc_2', type: 'custom_tool_call', call_id: 'call_p', name: 'apply_patch', input: '*** Begin Patch' },
        { id: 'ctc_3', type: 'custom_tool_call', call_id: 'call_q', name: 'apply_patch', input: 'raw' },
        { id: 'ctc_4', type: 'custom_tool_call', call_id: 'call_r', name: 'apply_patch', input: 'patch 2' },
      ],
      'tool_calls',
    ],
    [
      'refusal',
      completion({ content: null, refusal: 'I cannot help with that.' }),
      [{ id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'refusal', refusal: 'I cannot help with that.' }], role: 'assistant' }],
      'stop',
    ],
    [
      'OpenRouter citations are flattened; unknown annotation kinds dropped',
      completion({
        content: 'See [x].',
        annotations: [
          { type: 'url_citation', url_citation: { url: 'https://x.org', title: 'X', start_index: 4, end_index: 7, content: 'long' } },
          { type: 'file', file: { hash: 'h' } },
        ],
      }),
      [
        {
          id: 'msg_1',
          type: 'message',
          status: 'completed',
          content: [{ type: 'output_text', annotations: [{ type: 'url_citation', start_index: 4, end_index: 7, url: 'https://x.org', title: 'X' }], logprobs: [], text: 'See [x].' }],
          role: 'assistant',
        },
      ],
      'stop',
    ],
    [
      'reasoning comes first, as a summary',
      completion({ content: '42', reasoning: 'Six times seven.' }),
      [
        { id: 'rs_1', type: 'reasoning', summary: [{ type: 'summary_text', text: 'Six times seven.' }] },
        { id: 'msg_2', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: '42' }], role: 'assistant' },
      ],
      'stop',
    ],
    [
      'cut by length: the message is incomplete',
      completion({ content: 'Once upon a' }, 'length'),
      [{ id: 'msg_1', type: 'message', status: 'incomplete', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'Once upon a' }], role: 'assistant' }],
      'length',
    ],
    [
      'cut by length during a call: the last call is incomplete',
      completion({ content: 'x', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"a":' } }] }, 'length'),
      [
        { id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'x' }], role: 'assistant' },
        { id: 'fc_2', type: 'function_call', status: 'incomplete', arguments: '{"a":', call_id: 'c', name: 'f' },
      ],
      'length',
    ],
    [
      'content as parts is joined',
      completion({ content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }, null),
      [{ id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'ab' }], role: 'assistant' }],
      null,
    ],
    [
      "the upstream's log probabilities (asked for by include or top_logprobs) are the text part's, in OpenAI's shape",
      {
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: 'Hi!' },
            logprobs: {
              content: [
                { token: 'Hi', logprob: -0.1, bytes: [72, 105], top_logprobs: [{ token: 'Hi', logprob: -0.1, bytes: [72, 105] }, { token: 'Hey', logprob: -2.5, bytes: null }] },
                { token: '!', logprob: -0.01, bytes: [33] },
              ],
              refusal: null,
            },
            finish_reason: 'stop',
          },
        ],
      },
      [
        {
          id: 'msg_1',
          type: 'message',
          status: 'completed',
          content: [
            {
              type: 'output_text',
              annotations: [],
              logprobs: [
                { token: 'Hi', logprob: -0.1, bytes: [72, 105], top_logprobs: [{ token: 'Hi', logprob: -0.1, bytes: [72, 105] }, { token: 'Hey', logprob: -2.5, bytes: [] }] },
                { token: '!', logprob: -0.01, bytes: [33], top_logprobs: [] },
              ],
              text: 'Hi!',
            },
          ],
          role: 'assistant',
        },
      ],
      'stop',
    ],
    [
      'no choices: one empty message',
      { choices: [] },
      [{ id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: '' }], role: 'assistant' }],
      null,
    ],
  ]
  for (const [name, c, output, finish] of cases) {
    t.strictSame(completionToOutput(c, { newId: counter(), customTools: custom }), { output, finishReason: finish }, name)
  }
})

t.test('statusFromFinish', async (t) => {
  t.strictSame(statusFromFinish('stop'), { status: 'completed', incompleteDetails: null })
  t.strictSame(statusFromFinish('tool_calls'), { status: 'completed', incompleteDetails: null })
  t.strictSame(statusFromFinish(null), { status: 'completed', incompleteDetails: null })
  t.strictSame(statusFromFinish(undefined), { status: 'completed', incompleteDetails: null })
  t.strictSame(statusFromFinish('length'), { status: 'incomplete', incompleteDetails: { reason: 'max_output_tokens' } })
  t.strictSame(statusFromFinish('content_filter'), { status: 'incomplete', incompleteDetails: { reason: 'content_filter' } })
  t.strictSame(statusFromFinish('error'), { status: 'failed', incompleteDetails: null })
})

t.test('mapUsage', async (t) => {
  t.strictSame(mapUsage(undefined), {
    input_tokens: 0,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: 0,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 0,
  })
  t.strictSame(
    mapUsage({
      prompt_tokens: 100,
      completion_tokens: 20,
      total_tokens: 120,
      cost: 0.001,
      prompt_tokens_details: { cached_tokens: 64, cache_write_tokens: 8 },
      completion_tokens_details: { reasoning_tokens: 12 },
    }),
    {
      input_tokens: 100,
      input_tokens_details: { cached_tokens: 64, cache_write_tokens: 8 },
      output_tokens: 20,
      output_tokens_details: { reasoning_tokens: 12 },
      total_tokens: 120,
    },
  )
  t.equal(mapUsage({ prompt_tokens: 3, completion_tokens: 4 }).total_tokens, 7, 'total derived when missing')
  t.equal(mapUsage({ prompt_tokens: -1, completion_tokens: 'x' }).input_tokens, 0, 'nonsense is zero')
})

t.test('responseObject: the recorded shape, with the echo of a parsed request', async (t) => {
  const req = parseResponsesRequest({ model: 'openai/gpt-4o', input: 'hi', max_output_tokens: 2048, metadata: { a: 'b' } }, { maxInputItems: 10 }, { newId: counter() })
  const body = responseObject({
    id: 'resp_1',
    createdAt: 1749761604,
    model: 'openai/gpt-4o',
    status: 'completed',
    output: [{ id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'Hi!' }], role: 'assistant' }],
    usage: mapUsage({ prompt_tokens: 10, completion_tokens: 16, total_tokens: 26 }),
    error: null,
    incompleteDetails: null,
    echo: req.echo,
    previousResponseId: null,
    conversationId: 'conv_9',
    completedAt: 1749761605,
  })
  t.strictSame(body, {
    id: 'resp_1',
    object: 'response',
    created_at: 1749761604,
    status: 'completed',
    background: false,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: 2048,
    max_tool_calls: null,
    model: 'openai/gpt-4o',
    output: [{ id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'Hi!' }], role: 'assistant' }],
    parallel_tool_calls: true,
    previous_response_id: null,
    prompt_cache_key: null,
    reasoning: { effort: null, summary: null },
    safety_identifier: null,
    service_tier: 'default',
    store: true,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_logprobs: 0,
    top_p: 1,
    truncation: 'disabled',
    usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 16, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 26 },
    user: null,
    metadata: { a: 'b' },
    conversation: { id: 'conv_9' },
    completed_at: 1749761605,
  })
  const failed = responseObject({
    id: 'resp_2',
    createdAt: 1,
    model: 'm',
    status: 'failed',
    output: [],
    usage: null,
    error: { code: 'server_error', message: 'boom' },
    incompleteDetails: null,
    echo: {},
    previousResponseId: 'resp_1',
    conversationId: null,
  })
  t.match(failed, { status: 'failed', error: { code: 'server_error', message: 'boom' }, previous_response_id: 'resp_1', conversation: null, completed_at: null, tool_choice: 'auto', metadata: {} }, 'an empty echo takes the defaults')
})

t.test('ResponseJson renders the text JSON.stringify makes of the Response object, for every kind of request and state', async (t) => {
  const requests: Record<string, unknown>[] = [
    { model: 'openai/gpt-4o', input: 'hi' },
    { model: 'openai/gpt-4o', input: 'hi', store: false, instructions: 'Be "brief".\n', max_output_tokens: 9, temperature: 0.2, top_p: 0.5 },
    // Text that looks like the renderer's markers without their per-process nonce is only text.
    { model: '\u0000recallgate-slot-0', input: 'hi', instructions: '\u0000recallgate-slot-', metadata: { m: '"\u0000recallgate-slot-3"' } },
    {
      model: 'a/b',
      input: 'x',
      tools: [{ type: 'function', name: 'f', parameters: { type: 'object' }, strict: true }],
      tool_choice: 'required',
      parallel_tool_calls: false,
      text: { format: { type: 'json_schema', name: 's', schema: { type: 'object' } }, verbosity: 'low' },
      reasoning: { effort: 'high', summary: 'auto' },
      metadata: { k: 'v', __proto__: 'p' },
      user: 'u',
      safety_identifier: 'sid',
      prompt_cache_key: 'pck',
      truncation: 'auto',
      top_logprobs: 3,
    },
  ]
  const states: ResponseState[] = [
    { status: 'in_progress', output: [], usage: null, error: null, incompleteDetails: null, completedAt: null },
    {
      status: 'completed',
      output: [{ id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'Hi \u2028 "there"' }], role: 'assistant' }],
      usage: mapUsage({ prompt_tokens: 10, completion_tokens: 16, prompt_tokens_details: { cached_tokens: 4, cache_write_tokens: 2 } }),
      error: null,
      incompleteDetails: null,
      completedAt: 1749761605,
    },
    { status: 'incomplete', output: [], usage: mapUsage({}), error: null, incompleteDetails: { reason: 'max_output_tokens' }, completedAt: 7 },
    { status: 'failed', output: [], usage: null, error: { code: 'server_error', message: 'boom' }, incompleteDetails: null },
  ]
  const metadata = JSON.stringify({ memory: { sessionId: null }, rag: { enabled: false } })
  for (const [i, body] of requests.entries()) {
    const req = parseResponsesRequest(body, { maxInputItems: 10 }, { newId: counter() })
    for (const [previousResponseId, conversationId] of [[null, null], ['resp_0', null], [null, 'conv_1']] as const) {
      const fixed = { id: `resp_${i}`, createdAt: 1749761604, model: req.model, echo: req.echo, previousResponseId, conversationId }
      const plain = new ResponseJson(fixed)
      const withMetadata = new ResponseJson(fixed, metadata)
      for (const s of states) {
        const object = responseObject({ ...fixed, ...s })
        t.equal(plain.render(s), JSON.stringify(object), `request ${i}, ${s.status}, ${previousResponseId ?? conversationId ?? 'no state'}`)
        t.equal(withMetadata.render(s), JSON.stringify({ ...object, _metadata: JSON.parse(metadata) as unknown }), `the same with _metadata last`)
      }
    }
  }
  // An echo field with no JSON form is left out, as JSON.stringify leaves it out.
  const odd = new ResponseJson({ id: 'r', createdAt: 1, model: 'm', echo: { user: undefined }, previousResponseId: null, conversationId: null })
  const s = states[0] as ResponseState
  t.equal(odd.render(s), JSON.stringify(responseObject({ id: 'r', createdAt: 1, model: 'm', echo: { user: undefined }, previousResponseId: null, conversationId: null, ...s })))
})

t.test('ResponseJson: responses of one shape (the same echo) each render their own id, time, model and ids', async (t) => {
  const echo = parseResponsesRequest({ model: 'a/b', input: 'hi', store: false }, { maxInputItems: 10 }, { newId: counter() }).echo
  const s: ResponseState = { status: 'completed', output: [], usage: mapUsage({ prompt_tokens: 1 }), error: null, incompleteDetails: null, completedAt: 3 }
  const turns = [
    { id: 'resp_a', createdAt: 1, model: 'a/b', echo, previousResponseId: null, conversationId: null },
    { id: 'resp_b', createdAt: 2, model: 'c/"d"', echo: { ...echo }, previousResponseId: 'resp_a', conversationId: null },
    { id: 'resp_c', createdAt: 2, model: 'c/d', echo: { ...echo }, previousResponseId: null, conversationId: 'conv_1' },
    { id: 'resp_d', createdAt: 4, model: 'c/d', echo: { ...echo }, previousResponseId: null, conversationId: null },
  ]
  for (const fixed of turns) {
    t.equal(new ResponseJson(fixed, '{"m":1}').render(s), JSON.stringify({ ...responseObject({ ...fixed, ...s }), _metadata: { m: 1 } }), fixed.id)
  }
})

t.test('ResponseJson: echoes that differ in any field never share a cached shape; the defaults, set or left out, render alike', async (t) => {
  const echoes: Record<string, unknown>[] = [
    {},
    { ...ECHO_DEFAULTS },
    JSON.parse(JSON.stringify(ECHO_DEFAULTS)) as Record<string, unknown>,
    { instructions: null },
    { instructions: 'null' },
    { instructions: '' },
    { instructions: ',' },
    { instructions: ',', store: false },
    { instructions: null, store: ',false' },
    { store: false },
    { store: 'false' },
    { temperature: '1' },
    { temperature: 0.5, top_p: 0.5 },
    { top_p: 0.5 },
    { tools: [] },
    { tools: [{ type: 'function', name: 'f' }] },
    { metadata: { a: '1' } },
    { metadata: {} },
    { text: { format: { type: 'text' } } },
    { text: { format: { type: 'text' }, verbosity: 'low' } },
    { reasoning: { effort: 'low', summary: null } },
    { user: 'u' },
    { safety_identifier: 'u' },
    { not_an_echo_field: 1 },
  ]
  const s: ResponseState = { status: 'completed', output: [], usage: mapUsage({ prompt_tokens: 1 }), error: null, incompleteDetails: null, completedAt: 3 }
  // Twice: the second pass renders every echo from the shape the first one cached.
  for (const pass of [1, 2]) {
    for (const [i, echo] of echoes.entries()) {
      for (const conversationId of [null, 'conv_1']) {
        const fixed = { id: `resp_${i}`, createdAt: 1, model: 'a/b', echo, previousResponseId: null, conversationId }
        t.equal(new ResponseJson(fixed).render(s), JSON.stringify(responseObject({ ...fixed, ...s })), `pass ${pass}: ${JSON.stringify(echo)}${conversationId === null ? '' : ', in a conversation'}`)
      }
    }
  }
  const req = parseResponsesRequest({ model: 'a/b', input: 'hi' }, { maxInputItems: 10 }, { newId: counter() })
  for (const k of ['tools', 'text', 'reasoning', 'metadata'] as const) t.equal(req.echo[k], ECHO_DEFAULTS[k], `a request that sets no ${k} echoes the default itself`)
})

t.test("outputJson writes completionToOutput's items as JSON.stringify does, for any reply", async (t) => {
  const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('', '"quoted"', 'a\\b', 'line\nbreak', '\u2028'))
  const annotation = fc.record({
    type: fc.constant('url_citation'),
    url_citation: fc.record({ url: text, title: text, start_index: fc.nat(), end_index: fc.nat() }),
  })
  const logprobs = fc.record({
    content: fc.array(fc.record({ token: text, logprob: fc.double({ noNaN: true, max: 0 }), bytes: fc.option(fc.array(fc.nat(255))), top_logprobs: fc.constant([]) }), { maxLength: 3 }),
  })
  const call = fc.record({ id: text, type: fc.constant('function'), function: fc.record({ name: fc.constantFrom('get_weather', 'apply_patch'), arguments: text }) })
  const reply = fc.record(
    {
      content: fc.oneof(fc.constant(null), text, fc.array(fc.record({ type: fc.constant('text'), text }), { maxLength: 2 })),
      refusal: fc.option(text),
      reasoning: fc.option(text),
      annotations: fc.array(annotation, { maxLength: 2 }),
      tool_calls: fc.array(call, { maxLength: 2 }),
      logprobs: fc.option(logprobs),
      finish: fc.constantFrom('stop', 'length', 'tool_calls', 'content_filter', null),
    },
    { requiredKeys: ['finish'] },
  )
  const custom = new Set(['apply_patch'])
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(reply, ({ logprobs: lp, finish, ...message }) => {
        const c = { choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish, ...(lp === undefined ? {} : { logprobs: lp }) }] }
        const { output } = completionToOutput(c, { newId: counter(), customTools: custom })
        return outputJson(output) === JSON.stringify(output)
      }),
      { numRuns: 1000 },
    ),
  )
  // An item it does not build (another kind, or a message without a status) goes through JSON.stringify whole.
  const other = [
    { id: 'fs_1', type: 'file_search_call', status: 'completed', queries: ['q'], results: null },
    { id: 'msg_2', type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'x' }] },
  ]
  t.equal(outputJson(other), JSON.stringify(other))
})
