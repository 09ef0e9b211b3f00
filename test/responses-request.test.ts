/**
 * `parseResponsesRequest`: good bodies and what they become (Chat fields, echo, state), bad bodies and the field
 * each 400 names.
 */
import t from 'tap'
import { GatewayError } from '../src/errors.js'
import { parseResponsesRequest, type ResponsesRequest } from '../src/responses/request.js'

function counter(): (prefix: string) => string {
  let n = 0
  return (prefix) => `${prefix}_${++n}`
}
const limits = { maxInputItems: 4, maxSessionIdLength: 16 }
const parse = (body: Record<string, unknown>, header?: string): ResponsesRequest =>
  parseResponsesRequest(body, limits, { newId: counter(), sessionIdHeader: header })
const ok = { model: 'openai/gpt-4o', input: 'hi' }

t.test('a minimal body: defaults everywhere', async (t) => {
  const r = parse({ ...ok })
  t.strictSame(r, {
    model: 'openai/gpt-4o',
    instructions: null,
    input: [{ type: 'message', id: 'msg_1', role: 'user', content: [{ type: 'input_text', text: 'hi' }] }],
    previousResponseId: undefined,
    conversationId: undefined,
    store: true,
    stream: false,
    include: [],
    metadata: {},
    fileSearch: undefined,
    customTools: new Set(),
    chatFields: {},
    maxOutputTokens: undefined,
    echo: {
      store: true,
      instructions: null,
      tools: [],
      tool_choice: 'auto',
      parallel_tool_calls: true,
      max_tool_calls: null,
      text: { format: { type: 'text' } },
      max_output_tokens: null,
      temperature: 1,
      top_p: 1,
      reasoning: { effort: null, summary: null },
      top_logprobs: 0,
      user: null,
      safety_identifier: null,
      truncation: 'disabled',
      metadata: {},
      prompt_cache_key: null,
      service_tier: 'default',
    },
    sessionId: undefined,
    saveToMemory: true,
    useRAG: true,
    ragQuery: undefined,
  })
})

t.test('a full body: every field translated', async (t) => {
  const r = parse({
    model: 'anthropic/claude-sonnet-4',
    instructions: 'Be brief.',
    input: [{ role: 'user', content: 'weather in Oslo?' }],
    previous_response_id: 'resp_1',
    store: false,
    stream: true,
    tools: [
      { type: 'function', name: 'weather', description: 'Weather now', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: true },
      { type: 'function', name: 'noargs', parameters: null },
      { type: 'function', name: 'untyped', parameters: { properties: { a: {} } }, strict: null },
      { type: 'custom', name: 'apply_patch', description: 'Edit files', format: { type: 'grammar', syntax: 'lark', definition: 'start: "x"' } },
      { type: 'file_search', vector_store_ids: ['vs_1'], max_num_results: 5 },
    ],
    tool_choice: 'required',
    parallel_tool_calls: false,
    text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true, description: 'the answer' }, verbosity: 'low' },
    max_output_tokens: 300,
    temperature: 0.2,
    top_p: 0.9,
    reasoning: { effort: 'high', summary: 'auto' },
    metadata: { team: 'a', __proto__x: 'b' },
    safety_identifier: 'u-1',
    user: 'legacy',
    top_logprobs: 3,
    include: ['reasoning.encrypted_content'],
    truncation: 'auto',
    prompt_cache_key: 'pck',
    sessionId: ' s1 ',
    saveToMemory: false,
    useRAG: false,
    ragQuery: 'oslo',
    stream_options: { include_obfuscation: false },
    context_management: [{ type: 'x' }],
    some_future_field: 1,
  })
  t.equal(r.previousResponseId, 'resp_1')
  t.equal(r.store, false)
  t.equal(r.stream, true)
  t.equal(r.instructions, 'Be brief.')
  t.strictSame(r.include, ['reasoning.encrypted_content'])
  t.strictSame(r.fileSearch, { maxNumResults: 5 })
  t.strictSame([...r.customTools], ['apply_patch'])
  t.equal(r.maxOutputTokens, 300)
  t.strictSame(r.metadata, { team: 'a', __proto__x: 'b' })
  t.same([r.sessionId, r.saveToMemory, r.useRAG, r.ragQuery], ['s1', false, false, 'oslo'])
  t.strictSame(r.chatFields, {
    tools: [
      {
        type: 'function',
        function: { name: 'weather', description: 'Weather now', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: true },
      },
      { type: 'function', function: { name: 'noargs', parameters: { type: 'object', properties: {} } } },
      { type: 'function', function: { name: 'untyped', parameters: { type: 'object', properties: { a: {} } } } },
      {
        type: 'function',
        function: {
          name: 'apply_patch',
          description: 'Edit files\n\nPass the whole input as the string argument `input`. It must follow this lark grammar:\nstart: "x"',
          parameters: { type: 'object', properties: { input: { type: 'string' } }, required: ['input'], additionalProperties: false },
        },
      },
    ],
    tool_choice: 'required',
    parallel_tool_calls: false,
    response_format: { type: 'json_schema', json_schema: { name: 'out', schema: { type: 'object' }, strict: true, description: 'the answer' } },
    max_tokens: 300,
    temperature: 0.2,
    top_p: 0.9,
    reasoning: { effort: 'high' },
    verbosity: 'low',
    logprobs: true,
    top_logprobs: 3,
    user: 'u-1',
  })
  t.strictSame(r.echo.tools, [
    { type: 'function', name: 'weather', description: 'Weather now', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: true },
    { type: 'function', name: 'noargs', description: null, parameters: null, strict: null },
    { type: 'function', name: 'untyped', description: null, parameters: { properties: { a: {} } }, strict: null },
    { type: 'custom', name: 'apply_patch', description: 'Edit files', format: { type: 'grammar', syntax: 'lark', definition: 'start: "x"' } },
    { type: 'file_search', vector_store_ids: ['vs_1'], max_num_results: 5 },
  ])
  t.match(r.echo, {
    instructions: 'Be brief.',
    store: false,
    tool_choice: 'required',
    parallel_tool_calls: false,
    text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true, description: 'the answer' }, verbosity: 'low' },
    max_output_tokens: 300,
    temperature: 0.2,
    top_p: 0.9,
    reasoning: { effort: 'high', summary: 'auto' },
    user: 'legacy',
    safety_identifier: 'u-1',
    top_logprobs: 3,
    truncation: 'auto',
    metadata: { team: 'a' },
    prompt_cache_key: 'pck',
  })
  t.notOk('some_future_field' in r.chatFields || 'context_management' in r.chatFields, 'unknown fields are not forwarded')
})

t.test('tool_choice forms', async (t) => {
  const tools = [
    { type: 'function', name: 'a' },
    { type: 'function', name: 'b' },
    { type: 'custom', name: 'c' },
    { type: 'file_search' },
  ]
  const cases: Array<[string, unknown, unknown, string[]]> = [
    ['a string passes', 'none', 'none', ['a', 'b', 'c']],
    ['a named function nests', { type: 'function', name: 'b' }, { type: 'function', function: { name: 'b' } }, ['a', 'b', 'c']],
    ['a named custom tool is its function', { type: 'custom', name: 'c' }, { type: 'function', function: { name: 'c' } }, ['a', 'b', 'c']],
    ['allowed_tools filters and sets the mode', { type: 'allowed_tools', mode: 'required', tools: [{ type: 'function', name: 'b' }, { type: 'custom', name: 'c' }] }, 'required', ['b', 'c']],
    ['file_search is auto', { type: 'file_search' }, 'auto', ['a', 'b', 'c']],
  ]
  for (const [name, choice, chat, kept] of cases) {
    const r = parse({ ...ok, tools, tool_choice: choice })
    t.strictSame(r.chatFields.tool_choice, chat, name)
    t.strictSame((r.chatFields.tools as Array<{ function: { name: string } }>).map((x) => x.function.name), kept, `${name}: tools`)
    t.strictSame(r.echo.tool_choice, choice, `${name}: echoed as sent`)
  }
  const none = parse({ ...ok, tools: [], tool_choice: 'auto', parallel_tool_calls: true })
  t.strictSame(none.chatFields, {}, 'tools: [] sends no tools, tool_choice or parallel_tool_calls')
  const onlySearch = parse({ ...ok, tools: [{ type: 'file_search' }], tool_choice: 'required' })
  t.strictSame(onlySearch.chatFields, {}, 'file_search alone sends no tools')
  t.strictSame(onlySearch.fileSearch, { maxNumResults: undefined })
  const allowedNone = parse({ ...ok, tools, tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'file_search' }] } })
  t.notOk('tools' in allowedNone.chatFields || 'tool_choice' in allowedNone.chatFields, 'allowed_tools keeping no function sends none')
})

t.test('other accepted forms', async (t) => {
  t.equal(parse({ ...ok, conversation: 'conv_1' }).conversationId, 'conv_1')
  t.equal(parse({ ...ok, conversation: { id: 'conv_2' } }).conversationId, 'conv_2')
  t.strictSame(parse({ model: 'm', previous_response_id: 'resp_1' }).input, [], 'no input with a chain')
  t.strictSame(parse({ model: 'm', conversation: 'conv_1', input: [] }).input, [], 'empty input with a conversation')
  t.equal(parse({ ...ok, background: false }).stream, false)
  t.strictSame(parse({ ...ok, text: { format: { type: 'json_object' } } }).chatFields, { response_format: { type: 'json_object' } })
  t.strictSame(parse({ ...ok, text: { format: { type: 'text' } } }).chatFields, {})
  t.strictSame(parse({ ...ok, include: ['message.output_text.logprobs'] }).chatFields, { logprobs: true })
  t.strictSame(parse({ ...ok, top_logprobs: 0 }).chatFields, {}, 'top_logprobs 0 asks for nothing')
  t.strictSame(parse({ ...ok, user: 'u' }).chatFields, { user: 'u' })
  // OpenRouter's own field, not a misspelling of sessionId: forwarded as the chat path forwards it.
  t.strictSame(parse({ ...ok, session_id: 'workflow-7' }).chatFields, { session_id: 'workflow-7' })
  t.equal(parse({ ...ok, session_id: 'workflow-7' }).sessionId, undefined, 'not a recallgate session')
  t.strictSame(parse({ ...ok, reasoning: { summary: 'auto' } }).chatFields, {}, 'a summary alone sends no reasoning')
  t.equal(parse({ ...ok }, 'from-header').sessionId, 'from-header')
  t.equal(parse({ ...ok, sessionId: 'body' }, 'from-header').sessionId, 'body')
  t.equal(parse({ ...ok, input: [1, 2, 3, 4].map((i) => ({ role: 'user', content: `${i}` })) }).input.length, 4)
})

t.test('bad bodies name the field', async (t) => {
  const cases: Array<[string, Record<string, unknown>, string, RegExp]> = [
    ['missing model', { input: 'x' }, 'model', /required/],
    ['model not a string', { ...ok, model: 1 }, 'model', /string/],
    ['no input and no state', { model: 'm' }, 'input', /required/],
    ['empty input and no state', { model: 'm', input: [] }, 'input', /required/],
    ['input an object', { ...ok, input: { role: 'user' } }, 'input', /string or an array/],
    ['too many items', { ...ok, input: [1, 2, 3, 4, 5].map(() => ({ role: 'user', content: 'x' })) }, 'input', /at most 4/],
    ['an item field', { ...ok, input: [{ role: 'user', content: 'x' }, { type: 'function_call_output', output: 'x' }] }, 'input[1].call_id', /required/],
    ['hosted input item', { ...ok, input: [{ type: 'computer_call', id: 'c' }] }, 'input[0].type', /computer_call/],
    ['conversation with previous_response_id', { ...ok, conversation: 'conv_1', previous_response_id: 'resp_1' }, 'conversation', /Mutually exclusive.*previous_response_id.*conversation/],
    ['conversation a number', { ...ok, conversation: 5 }, 'conversation', /conversation id/],
    ['conversation without id', { ...ok, conversation: {} }, 'conversation', /conversation id/],
    ['previous_response_id empty', { ...ok, previous_response_id: '' }, 'previous_response_id', /non-empty/],
    ['instructions a number', { ...ok, instructions: 3 }, 'instructions', /string or null/],
    ['background', { ...ok, background: true }, 'background', /not supported/],
    ['prompt template', { ...ok, prompt: { id: 'pmpt_1' } }, 'prompt', /not supported/],
    ['store not boolean', { ...ok, store: 'no' }, 'store', /boolean/],
    ['stream not boolean', { ...ok, stream: 1 }, 'stream', /boolean/],
    ['tools not an array', { ...ok, tools: {} }, 'tools', /array/],
    ['a tool not an object', { ...ok, tools: ['f'] }, 'tools[0]', /object/],
    ['web_search', { ...ok, tools: [{ type: 'function', name: 'f' }, { type: 'web_search' }] }, 'tools[1].type', /"web_search" is not supported/],
    ['code_interpreter', { ...ok, tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] }, 'tools[0].type', /code_interpreter/],
    ['local_shell', { ...ok, tools: [{ type: 'local_shell' }] }, 'tools[0].type', /local_shell/],
    ['mcp', { ...ok, tools: [{ type: 'mcp', server_label: 'x' }] }, 'tools[0].type', /mcp/],
    ['function without name', { ...ok, tools: [{ type: 'function' }] }, 'tools[0].name', /non-empty/],
    ['duplicate names', { ...ok, tools: [{ type: 'function', name: 'f' }, { type: 'custom', name: 'f' }] }, 'tools[1].name', /repeats/],
    ['parameters an array', { ...ok, tools: [{ type: 'function', name: 'f', parameters: [] }] }, 'tools[0].parameters', /JSON Schema/],
    ['strict a string', { ...ok, tools: [{ type: 'function', name: 'f', strict: 'yes' }] }, 'tools[0].strict', /boolean/],
    ['custom format unknown', { ...ok, tools: [{ type: 'custom', name: 'c', format: { type: 'regex' } }] }, 'tools[0].format', /grammar/],
    ['file_search max too big', { ...ok, tools: [{ type: 'file_search', max_num_results: 51 }] }, 'tools[0].max_num_results', /1 to 50/],
    ['tool_choice unknown string', { ...ok, tool_choice: 'any' }, 'tool_choice', /none.*auto.*required/],
    ['tool_choice unknown function', { ...ok, tools: [{ type: 'function', name: 'f' }], tool_choice: { type: 'function', name: 'g' } }, 'tool_choice', /"g"/],
    ['tool_choice hosted', { ...ok, tool_choice: { type: 'web_search_preview' } }, 'tool_choice', /web_search_preview/],
    ['allowed_tools bad mode', { ...ok, tool_choice: { type: 'allowed_tools', mode: 'none', tools: [] } }, 'tool_choice', /mode/],
    ['parallel_tool_calls a string', { ...ok, parallel_tool_calls: 'true' }, 'parallel_tool_calls', /boolean/],
    ['text a string', { ...ok, text: 'json' }, 'text', /object/],
    ['text.format unknown', { ...ok, text: { format: { type: 'yaml' } } }, 'text.format.type', /json_schema/],
    ['json_schema without name', { ...ok, text: { format: { type: 'json_schema', schema: {} } } }, 'text.format.name', /non-empty/],
    ['json_schema without schema', { ...ok, text: { format: { type: 'json_schema', name: 'x' } } }, 'text.format.schema', /JSON Schema/],
    ['verbosity unknown', { ...ok, text: { verbosity: 'loud' } }, 'text.verbosity', /low, medium, high/],
    ['max_output_tokens zero', { ...ok, max_output_tokens: 0 }, 'max_output_tokens', /positive integer/],
    ['max_output_tokens fractional', { ...ok, max_output_tokens: 1.5 }, 'max_output_tokens', /positive integer/],
    ['temperature too high', { ...ok, temperature: 3 }, 'temperature', /0 to 2/],
    ['top_p a string', { ...ok, top_p: '1' }, 'top_p', /0 to 1/],
    ['reasoning a string', { ...ok, reasoning: 'high' }, 'reasoning', /object/],
    ['reasoning effort unknown', { ...ok, reasoning: { effort: 'extreme' } }, 'reasoning.effort', /minimal/],
    ['reasoning summary unknown', { ...ok, reasoning: { summary: 'long' } }, 'reasoning.summary', /concise/],
    ['metadata an array', { ...ok, metadata: [] }, 'metadata', /object/],
    ['metadata 17 keys', { ...ok, metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata', /16/],
    ['metadata key too long', { ...ok, metadata: { ['k'.repeat(65)]: 'v' } }, 'metadata', /64/],
    ['metadata value too long', { ...ok, metadata: { k: 'v'.repeat(513) } }, 'metadata', /512/],
    ['metadata value a number', { ...ok, metadata: { k: 1 } }, 'metadata', /string/],
    ['safety_identifier too long', { ...ok, safety_identifier: 'x'.repeat(65) }, 'safety_identifier', /64/],
    ['user a number', { ...ok, user: 5 }, 'user', /string/],
    ['top_logprobs 21', { ...ok, top_logprobs: 21 }, 'top_logprobs', /0 to 20/],
    ['include not strings', { ...ok, include: [1] }, 'include', /array of strings/],
    ['truncation unknown', { ...ok, truncation: 'middle' }, 'truncation', /auto.*disabled/],
    ['prompt_cache_key a number', { ...ok, prompt_cache_key: 1 }, 'prompt_cache_key', /string/],
    ['max_tool_calls zero', { ...ok, max_tool_calls: 0 }, 'max_tool_calls', /positive integer/],
    ['sessionId misspelled', { ...ok, sessionID: 's' }, 'sessionID', /did you mean "sessionId"/],
    ['session_id a number', { ...ok, session_id: 7 }, 'session_id', /string/],
    ['sessionId too long', { ...ok, sessionId: 'x'.repeat(17) }, 'sessionId', /at most 16/],
    ['sessionId blank', { ...ok, sessionId: '  ' }, 'sessionId', /white space/],
    ['useRAG a string', { ...ok, useRAG: 'no' }, 'useRAG', /boolean/],
    ['saveToMemory a number', { ...ok, saveToMemory: 0 }, 'saveToMemory', /boolean/],
    ['ragQuery an object', { ...ok, ragQuery: {} }, 'ragQuery', /string/],
  ]
  for (const [name, body, param, message] of cases) {
    try {
      parse(body)
      t.fail(`${name}: accepted`)
    } catch (err) {
      if (!(err instanceof GatewayError)) throw err
      t.equal(err.status, 400, `${name}: 400`)
      t.equal(err.type, 'invalid_request_error', `${name}: type`)
      t.equal(err.param, param, `${name}: param`)
      t.match(err.message, message, `${name}: message`)
    }
  }
})
