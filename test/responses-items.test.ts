/**
 * The item ↔ message mapping of the Responses bridge: tables of input and expected output for `normalizeInput`,
 * `itemsToMessages` and `messagesToItems`, then round-trip properties (fast-check; the seed is fixed and printed on
 * failure, FC_SEED=<n> explores others).
 */
import t, { type Test } from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { deepStrictEqual } from 'node:assert/strict'
import { GatewayError } from '../src/errors.js'
import { itemsToMessages, messagesToItems, normalizeInput, type ResponseItem } from '../src/responses/items.js'
import type { ChatMessage } from '../src/types.js'
import { newId } from '../src/responses/state.js'

const SEED = Number(process.env.FC_SEED ?? 20260822)

/** Predictable ids: `msg_1`, `fc_2`, … in the order they are minted. */
function counter(): (prefix: string) => string {
  let n = 0
  return (prefix) => `${prefix}_${++n}`
}
const norm = (input: unknown): ResponseItem[] => normalizeInput(input, { newId: counter() })

t.test('normalizeInput: every accepted form, normalized', async (t) => {
  const cases: Array<[string, unknown, unknown[]]> = [
    ['a string is one user message', 'hi', [{ type: 'message', id: 'msg_1', role: 'user', content: [{ type: 'input_text', text: 'hi' }] }]],
    ['the empty string too', '', [{ type: 'message', id: 'msg_1', role: 'user', content: [{ type: 'input_text', text: '' }] }]],
    [
      'easy messages, any role, string content',
      [
        { role: 'developer', content: 'be brief' },
        { role: 'user', content: 'knock knock' },
        { role: 'assistant', content: "who's there?" },
      ],
      [
        { type: 'message', id: 'msg_1', role: 'developer', content: [{ type: 'input_text', text: 'be brief' }] },
        { type: 'message', id: 'msg_2', role: 'user', content: [{ type: 'input_text', text: 'knock knock' }] },
        {
          type: 'message',
          id: 'msg_3',
          role: 'assistant',
          content: [{ type: 'output_text', text: "who's there?", annotations: [] }],
          status: 'completed',
        },
      ],
    ],
    [
      'an assistant output message sent back keeps id, status, phase, annotations; drops unknown keys',
      [
        {
          type: 'message',
          id: 'msg_abc',
          role: 'assistant',
          status: 'incomplete',
          phase: 'final_answer',
          providerData: { x: 1 },
          content: [{ type: 'output_text', text: 'a', annotations: [{ type: 'url_citation', url: 'https://x' }], logprobs: [] }],
        },
      ],
      [
        {
          type: 'message',
          id: 'msg_abc',
          role: 'assistant',
          content: [{ type: 'output_text', text: 'a', annotations: [{ type: 'url_citation', url: 'https://x' }], logprobs: [] }],
          status: 'incomplete',
          phase: 'final_answer',
        },
      ],
    ],
    [
      'typed user message with media parts; image detail defaults to auto',
      [
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'what is this?' },
            { type: 'input_image', image_url: 'data:image/png;base64,AAAA' },
            { type: 'input_file', filename: 'a.pdf', file_data: 'data:application/pdf;base64,BBBB', extra: 1 },
            { type: 'input_file', file_id: 'file-1' },
          ],
        },
      ],
      [
        {
          type: 'message',
          id: 'msg_1',
          role: 'user',
          content: [
            { type: 'input_text', text: 'what is this?' },
            { type: 'input_image', detail: 'auto', image_url: 'data:image/png;base64,AAAA' },
            { type: 'input_file', file_data: 'data:application/pdf;base64,BBBB', filename: 'a.pdf' },
            { type: 'input_file', file_id: 'file-1' },
          ],
        },
      ],
    ],
    [
      'text parts are renamed for the role',
      [
        { role: 'user', content: [{ type: 'output_text', text: 'u' }] },
        { role: 'assistant', content: [{ type: 'input_text', text: 'a' }] },
      ],
      [
        { type: 'message', id: 'msg_1', role: 'user', content: [{ type: 'input_text', text: 'u' }] },
        { type: 'message', id: 'msg_2', role: 'assistant', content: [{ type: 'output_text', text: 'a', annotations: [] }], status: 'completed' },
      ],
    ],
    [
      'function call and output get ids; their own are kept',
      [
        { type: 'function_call', call_id: 'call_1', name: 'f', arguments: '{}' },
        { type: 'function_call', id: 'fc_x', call_id: 'call_2', name: 'g', arguments: '{"a":1}', status: 'completed' },
        { type: 'function_call_output', call_id: 'call_1', output: 'one' },
        { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'two' }] },
      ],
      [
        { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'f', arguments: '{}' },
        { type: 'function_call', id: 'fc_x', call_id: 'call_2', name: 'g', arguments: '{"a":1}', status: 'completed' },
        { type: 'function_call_output', id: 'fco_2', call_id: 'call_1', output: 'one' },
        { type: 'function_call_output', id: 'fco_3', call_id: 'call_2', output: [{ type: 'input_text', text: 'two' }] },
      ],
    ],
    [
      'custom tool call and output (Codex apply_patch)',
      [
        { type: 'custom_tool_call', call_id: 'call_p', name: 'apply_patch', input: '*** Begin Patch' },
        { type: 'custom_tool_call_output', call_id: 'call_p', output: 'ok' },
      ],
      [
        { type: 'custom_tool_call', id: 'ctc_1', call_id: 'call_p', name: 'apply_patch', input: '*** Begin Patch' },
        { type: 'custom_tool_call_output', id: 'ctco_2', call_id: 'call_p', output: 'ok' },
      ],
    ],
    [
      'item references with and without type; reasoning kept whole',
      [
        { id: 'msg_old' },
        { type: 'item_reference', id: 'fc_old' },
        { type: null, id: 'rs_old' },
        { type: 'reasoning', summary: [], encrypted_content: 'gAAA' },
      ],
      [
        { type: 'item_reference', id: 'msg_old' },
        { type: 'item_reference', id: 'fc_old' },
        { type: 'item_reference', id: 'rs_old' },
        { type: 'reasoning', summary: [], encrypted_content: 'gAAA', id: 'rs_1' },
      ],
    ],
    ['an empty array is no items', [], []],
  ]
  for (const [name, input, expected] of cases) t.same(norm(input), expected, name)
})

t.test('normalizeInput: bad input names the field', async (t) => {
  const cases: Array<[string, unknown, string, RegExp]> = [
    ['a number', 5, 'input', /string or an array/],
    ['an item not an object', ['x'], 'input[0]', /must be an object/],
    ['no type, role or id', [{ content: 'x' }], 'input[0].type', /type, a role/],
    ['a bad role', [{ role: 'tool', content: 'x' }], 'input[0].role', /user, system, developer, assistant/],
    ['missing content', [{ role: 'user' }], 'input[0].content', /required/],
    ['content a number', [{ role: 'user', content: 1 }], 'input[0].content', /string or an array/],
    ['unknown part type', [{ role: 'user', content: [{ type: 'input_text', text: 'a' }, { type: 'video' }] }], 'input[0].content[1].type', /video/],
    ['part text not a string', [{ role: 'user', content: [{ type: 'input_text', text: 1 }] }], 'input[0].content[0].text', /string/],
    ['an image in an assistant message', [{ role: 'assistant', content: [{ type: 'input_image', image_url: 'https://x' }] }], 'input[0].content[0].type', /assistant/],
    ['image_url as Chat object', [{ role: 'user', content: [{ type: 'input_image', image_url: { url: 'https://x' } }] }], 'input[0].content[0].image_url', /string/],
    ['bad image detail', [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x', detail: 'max' }] }], 'input[0].content[0].detail', /auto, low, high/],
    ['file without data', [{ role: 'user', content: [{ type: 'input_file', filename: 'a' }] }], 'input[0].content[0].file_data', /file_data/],
    ['an image by file_id only', [{ role: 'user', content: [{ type: 'input_image', file_id: 'file-9' }] }], 'input[0].content[0].file_id', /image_url/],
    ['bad status', [{ role: 'user', content: 'x', status: 'done' }], 'input[0].status', /in_progress/],
    ['function_call missing call_id', [{ type: 'function_call', name: 'f', arguments: '{}' }], 'input[0].call_id', /required/],
    ['function_call arguments an object', [{ role: 'user', content: 'a' }, { type: 'function_call', call_id: 'c', name: 'f', arguments: {} }], 'input[1].arguments', /string/],
    ['function_call_output without output', [{ type: 'function_call_output', call_id: 'c' }], 'input[0].output', /required/],
    ['hosted tool call', [{ type: 'web_search_call', id: 'ws_1', status: 'completed' }], 'input[0].type', /web_search_call.*not supported/],
    ['local shell call', [{ role: 'user', content: 'a' }, { type: 'local_shell_call', call_id: 'c' }], 'input[1].type', /local_shell_call/],
    ['mcp call', [{ type: 'mcp_call' }], 'input[0].type', /mcp_call/],
    ['item_reference without id', [{ type: 'item_reference' }], 'input[0].id', /required/],
    ['id not a string', [{ role: 'user', content: 'x', id: 5 }], 'input[0].id', /string/],
  ]
  for (const [name, input, param, message] of cases) {
    try {
      norm(input)
      t.fail(`${name}: accepted`)
    } catch (err) {
      t.ok(err instanceof GatewayError, name)
      const e = err as GatewayError
      t.equal(e.status, 400, `${name}: 400`)
      t.equal(e.param, param, `${name}: param`)
      t.match(e.message, message, `${name}: message`)
    }
  }
})

t.test('itemsToMessages: table', async (t) => {
  const cases: Array<[string, unknown[], unknown[]]> = [
    [
      'one text part is a string; developer becomes system; several parts stay parts',
      [
        { type: 'message', id: 'm1', role: 'developer', content: [{ type: 'input_text', text: 'rules' }] },
        { type: 'message', id: 'm2', role: 'user', content: [{ type: 'input_text', text: 'a' }, { type: 'input_text', text: 'b' }] },
        { type: 'message', id: 'm3', role: 'user', content: [] },
      ],
      [
        { role: 'system', content: 'rules' },
        { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
        { role: 'user', content: [] },
      ],
    ],
    [
      'media parts become Chat parts',
      [
        {
          type: 'message',
          id: 'm1',
          role: 'user',
          content: [
            { type: 'input_text', text: 'look' },
            { type: 'input_image', image_url: 'https://i/x.png', detail: 'low' },
            { type: 'input_image', image_url: 'https://i/y.png', detail: 'original' },
            { type: 'input_file', filename: 'a.pdf', file_data: 'data:application/pdf;base64,QQ==' },
            { type: 'input_file', file_id: 'file-2' },
            { type: 'input_file', filename: 'r.pdf', file_url: 'https://example.com/r.pdf' },
          ],
        },
      ],
      [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'look' },
            { type: 'image_url', image_url: { url: 'https://i/x.png', detail: 'low' } },
            { type: 'image_url', image_url: { url: 'https://i/y.png', detail: 'high' } },
            { type: 'file', file: { filename: 'a.pdf', file_data: 'data:application/pdf;base64,QQ==' } },
            { type: 'file', file: { file_id: 'file-2' } },
            // Chat has no file_url: OpenRouter fetches a URL given as file_data.
            { type: 'file', file: { filename: 'r.pdf', file_data: 'https://example.com/r.pdf' } },
          ],
        },
      ],
    ],
    [
      'assistant text parts join; refusal goes to its field',
      [
        { type: 'message', id: 'm1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hel', annotations: [] }, { type: 'output_text', text: 'lo', annotations: [] }] },
        { type: 'message', id: 'm2', role: 'assistant', content: [{ type: 'refusal', refusal: 'no' }] },
      ],
      [
        { role: 'assistant', content: 'Hello' },
        { role: 'assistant', content: null, refusal: 'no' },
      ],
    ],
    [
      'an assistant message and the calls after it are one message; outputs follow as tool messages',
      [
        { type: 'message', id: 'u', role: 'user', content: [{ type: 'input_text', text: 'weather?' }] },
        { type: 'reasoning', id: 'rs_1', summary: [] },
        { type: 'message', id: 'm', role: 'assistant', content: [{ type: 'output_text', text: 'Checking.', annotations: [] }] },
        { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'weather', arguments: '{"city":"Oslo"}' },
        { type: 'reasoning', id: 'rs_2', summary: [{ type: 'summary_text', text: 'and Rome' }] },
        { type: 'function_call', id: 'fc_2', call_id: 'call_2', name: 'weather', arguments: '{"city":"Rome"}' },
        { type: 'function_call_output', id: 'o1', call_id: 'call_1', output: 'sun' },
        { type: 'function_call_output', id: 'o2', call_id: 'call_2', output: [{ type: 'input_text', text: 'rain' }, { type: 'input_text', text: '12C' }] },
      ],
      [
        { role: 'user', content: 'weather?' },
        {
          role: 'assistant',
          content: 'Checking.',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } },
            { id: 'call_2', type: 'function', function: { name: 'weather', arguments: '{"city":"Rome"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'sun' },
        { role: 'tool', tool_call_id: 'call_2', content: 'rain\n12C' },
      ],
    ],
    [
      'calls without a message before them get content null; a call after a tool output starts a new message',
      [
        { type: 'function_call', id: 'fc_1', call_id: 'a', name: 'f', arguments: '{}' },
        { type: 'function_call_output', id: 'o1', call_id: 'a', output: [{ type: 'input_image', image_url: 'https://x', detail: 'auto' }] },
        { type: 'function_call', id: 'fc_2', call_id: 'b', name: 'g', arguments: '{}' },
        { type: 'function_call_output', id: 'o2', call_id: 'b', output: '' },
      ],
      [
        { role: 'assistant', content: null, tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'a', content: '{"type":"input_image","image_url":"https://x","detail":"auto"}' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'b', type: 'function', function: { name: 'g', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'b', content: '' },
      ],
    ],
    [
      'a user message between calls ends the run',
      [
        { type: 'message', id: 'm', role: 'assistant', content: [{ type: 'output_text', text: 'x', annotations: [] }] },
        { type: 'message', id: 'u', role: 'user', content: [{ type: 'input_text', text: 'y' }] },
        { type: 'function_call', id: 'fc_1', call_id: 'a', name: 'f', arguments: '{}' },
      ],
      [
        { role: 'assistant', content: 'x' },
        { role: 'user', content: 'y' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      ],
    ],
    [
      'custom tool calls are function calls with the input as {"input"}',
      [
        { type: 'custom_tool_call', id: 'ctc_1', call_id: 'p', name: 'apply_patch', input: '*** Begin Patch\n"x"' },
        { type: 'custom_tool_call_output', id: 'o', call_id: 'p', output: 'Done' },
      ],
      [
        { role: 'assistant', content: null, tool_calls: [{ id: 'p', type: 'function', function: { name: 'apply_patch', arguments: '{"input":"*** Begin Patch\\n\\"x\\""}' } }] },
        { role: 'tool', tool_call_id: 'p', content: 'Done' },
      ],
    ],
    [
      'reasoning and file_search_call items are dropped',
      [
        { type: 'reasoning', id: 'rs', summary: [{ type: 'summary_text', text: 'think' }], encrypted_content: 'gA' },
        { type: 'file_search_call', id: 'fs', status: 'completed', queries: ['q'], results: null },
        { type: 'message', id: 'm', role: 'assistant', content: [{ type: 'output_text', text: 'ok', annotations: [] }] },
      ],
      [{ role: 'assistant', content: 'ok' }],
    ],
  ]
  for (const [name, items, expected] of cases) t.same(itemsToMessages(items as ResponseItem[]), expected, name)
  t.throws(() => itemsToMessages([{ type: 'item_reference', id: 'x' }]), /must be resolved/, 'an unresolved reference is a caller bug')
})

t.test('messagesToItems: table', async (t) => {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'rules' },
    { role: 'developer', content: [{ type: 'text', text: 'dev' }] },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'see' },
        { type: 'image_url', image_url: { url: 'https://i/x.png' } },
        { type: 'file', file: { filename: 'a.txt', file_data: 'data:text/plain;base64,YQ==' } },
      ],
    },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } },
        { id: 'call_2', type: 'function', function: { name: 'apply_patch', arguments: '{"input":"patch"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'call_1', content: 'r1' },
    { role: 'tool', tool_call_id: 'call_2', content: [{ type: 'text', text: 'r2' }] },
    { role: 'assistant', content: 'done', refusal: null },
    { role: 'assistant', content: null, refusal: 'no' },
  ]
  t.same(messagesToItems(messages, { newId: counter(), status: 'completed', customTools: new Set(['apply_patch']) }), [
    { type: 'message', id: 'msg_1', role: 'system', content: [{ type: 'input_text', text: 'rules' }], status: 'completed' },
    { type: 'message', id: 'msg_2', role: 'developer', content: [{ type: 'input_text', text: 'dev' }], status: 'completed' },
    {
      type: 'message',
      id: 'msg_3',
      role: 'user',
      content: [
        { type: 'input_text', text: 'see' },
        { type: 'input_image', detail: 'auto', image_url: 'https://i/x.png' },
        { type: 'input_file', filename: 'a.txt', file_data: 'data:text/plain;base64,YQ==' },
      ],
      status: 'completed',
    },
    { type: 'function_call', id: 'fc_4', call_id: 'call_1', name: 'f', arguments: '{"a":1}', status: 'completed' },
    { type: 'custom_tool_call', id: 'ctc_5', call_id: 'call_2', name: 'apply_patch', input: 'patch', status: 'completed' },
    { type: 'function_call_output', id: 'fco_6', call_id: 'call_1', output: 'r1', status: 'completed' },
    { type: 'function_call_output', id: 'fco_7', call_id: 'call_2', output: 'r2', status: 'completed' },
    { type: 'message', id: 'msg_8', role: 'assistant', content: [{ type: 'output_text', text: 'done', annotations: [] }], status: 'completed' },
    { type: 'message', id: 'msg_9', role: 'assistant', content: [{ type: 'refusal', refusal: 'no' }], status: 'completed' },
  ])
})

// ---- round trips ---------------------------------------------------------------------------------------------

const text = fc.string({ maxLength: 12 })
const callId = fc.string({ minLength: 1, maxLength: 6 }).map((s) => `call_${s}`)
const toolCall = fc.record({ id: callId, name: fc.constantFrom('f', 'g', 'apply_patch'), args: fc.json({ maxDepth: 1 }) })

/**
 * A valid chat history in the form the mapping keeps: string content; assistant text, or tool calls (content text or
 * null) with their results right after; no assistant message with null content straight after another assistant
 * (it would merge into it, which is the same conversation but not the same list).
 */
const chatHistory = fc
  .array(
    fc.oneof(
      fc.record({ kind: fc.constant('user' as const), text }),
      fc.record({ kind: fc.constant('system' as const), text }),
      fc.record({ kind: fc.constant('assistant' as const), text }),
      fc.record({
        kind: fc.constant('tools' as const),
        text: fc.option(fc.string({ minLength: 1, maxLength: 12 }), { nil: null }),
        calls: fc.uniqueArray(toolCall, { minLength: 1, maxLength: 3, selector: (c) => c.id }),
        results: fc.array(text, { minLength: 3, maxLength: 3 }),
      }),
    ),
    { maxLength: 8 },
  )
  .map((units) => {
    const out: ChatMessage[] = []
    for (const u of units) {
      const prev = out.at(-1)
      if (u.kind === 'tools') {
        const content = u.text === null && prev?.role === 'assistant' ? 'x' : u.text
        out.push({
          role: 'assistant',
          content,
          tool_calls: u.calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.args } })),
        })
        u.calls.forEach((c, k) => out.push({ role: 'tool', tool_call_id: c.id, content: u.results[k] ?? '' }))
      } else {
        out.push({ role: u.kind, content: u.text })
      }
    }
    return out
  })

function holds<Ts extends [unknown, ...unknown[]]>(t: Test, property: fc.IProperty<Ts>): void {
  const details = fc.check(property, { seed: SEED, numRuns: 300 })
  if (details.failed) t.fail(`FC_SEED=${SEED}: ${fc.defaultReportMessage(details) ?? 'property failed'}`)
  else t.pass(`holds for ${details.numRuns} runs (FC_SEED=${SEED})`)
}

t.test('messages → items → messages is the identity', async (t) => {
  holds(
    t,
    fc.property(chatHistory, (messages) => {
      const items = messagesToItems(messages, { newId: counter() })
      deepStrictEqual(itemsToMessages(items), messages)
    }),
  )
})

t.test('custom tools survive the round trip too', async (t) => {
  holds(
    t,
    fc.property(chatHistory, (messages) => {
      // Custom tool calls always carry {"input": string}: make apply_patch's arguments so.
      const custom = messages.map((m) =>
        m.tool_calls === undefined
          ? m
          : { ...m, tool_calls: m.tool_calls.map((c) => (c.function?.name === 'apply_patch' ? { ...c, function: { name: 'apply_patch', arguments: JSON.stringify({ input: c.function.arguments }) } } : c)) },
      )
      const items = messagesToItems(custom, { newId: counter(), customTools: new Set(['apply_patch']) })
      deepStrictEqual(itemsToMessages(items), custom)
    }),
  )
})

t.test('items the client sends → messages → items keeps everything but ids', async (t) => {
  const withoutIds = (items: ResponseItem[]): unknown[] => items.map(({ id: _id, status: _status, ...rest }) => rest)
  holds(
    t,
    fc.property(chatHistory, (messages) => {
      // The client's view: the items a listing showed it, sent back as input (ids dropped: they are the server's).
      const listed = messagesToItems(messages, { newId: counter() })
      const sent = normalizeInput(withoutIds(listed), { newId: counter() })
      deepStrictEqual(withoutIds(messagesToItems(itemsToMessages(sent), { newId: counter() })), withoutIds(listed))
    }),
  )
})

t.test('ids: the prefix and 24 hex digits, never repeated across the pool refills', async (t) => {
  const seen = new Set<string>()
  for (let i = 0; i < 2000; i++) {
    const id = newId('resp')
    if (!/^resp_[0-9a-f]{24}$/.test(id)) t.fail(`malformed id ${id}`)
    seen.add(id)
  }
  t.equal(seen.size, 2000)
})
