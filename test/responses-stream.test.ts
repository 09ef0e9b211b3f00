/**
 * The stream translator driven by chunk sequences, each result checked by the independent checker
 * (helpers/responses-stream-checker.ts) and by assertions on the final output; then the checker itself shown to catch
 * broken streams.
 */
import t from 'tap'
import OpenAI, { APIError } from 'openai'
import { createServer } from 'node:http'
import { once } from 'node:events'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { isDeepStrictEqual } from 'node:util'
import { JsonText, ResponseStreamTranslator, encodeEvent, type ResponseEvent } from '../src/responses/stream-translator.js'
import { completionToOutput, ResponseJson, responseObject } from '../src/responses/output.js'
import * as ev from '../src/responses/stream-events.js'
import { checkResponseStream } from './helpers/responses-stream-checker.js'
import { contentDelta } from '../src/chat/content-delta.js'

function counter(): (prefix: string) => string {
  let n = 0
  return (prefix) => `${prefix}_${++n}`
}

const FIXED = { id: 'resp_1', createdAt: 1, model: 'openai/gpt-4o', echo: {}, previousResponseId: null, conversationId: null }

/**
 * `asText`: the snapshots rendered as JSON text, as the handler renders them (ResponseJson, with the output's text the
 * translator made); otherwise the Response object itself, serialized whole.
 */
function translator(customTools: ReadonlySet<string> = new Set(), asText = false): ResponseStreamTranslator {
  const json = new ResponseJson(FIXED)
  return new ResponseStreamTranslator({
    newId: counter(),
    customTools,
    base: (status, output, usage, error, incompleteDetails, outputJson) =>
      asText
        ? new JsonText(json.render({ status, output, usage, error, incompleteDetails }, outputJson))
        : responseObject({ ...FIXED, status, output, usage, error, incompleteDetails }),
  })
}

const chunk = (delta: Record<string, unknown>, finish_reason: string | null = null): Record<string, unknown> => ({
  id: 'gen-1',
  object: 'chat.completion.chunk',
  choices: [{ index: 0, delta, finish_reason }],
})
const usageChunk = (prompt = 10, completion = 5): Record<string, unknown> => ({
  id: 'gen-1',
  choices: [],
  usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: 4 } },
})
const call = (index: number, fields: { id?: string; name?: string; args?: string }): Record<string, unknown> => {
  const c: Record<string, unknown> = { index }
  if (fields.id !== undefined) Object.assign(c, { id: fields.id, type: 'function' })
  const f: Record<string, unknown> = {}
  if (fields.name !== undefined) f.name = fields.name
  if (fields.args !== undefined) f.arguments = fields.args
  c.function = f
  return c
}

/**
 * The whole stream as the client receives it: start, every chunk, finish, terminal; JSON-parsed as on the wire.
 * `unparsed`: each chunk goes over the wire as the relay gets it (JSON text), and the ones that are only a piece of text
 * are translated without a parse (contentDelta → pushText), as the relay does; `fast` counts them.
 */
function run(
  chunks: Record<string, unknown>[],
  customTools?: ReadonlySet<string>,
  unparsed = false,
  asText = false,
): { events: Record<string, unknown>[]; finish: ReturnType<ResponseStreamTranslator['finish']>; fast: number; text: string } {
  const tr = translator(customTools, asText)
  const wire: string[] = tr.start().map(encodeEvent)
  let fast = 0
  for (const c of chunks) {
    const piece = unparsed ? contentDelta(JSON.stringify(c)) : undefined
    const encoded = piece === undefined ? undefined : tr.pushText(piece)
    if (encoded !== undefined) {
      fast++
      wire.push(encoded)
    } else wire.push(...tr.push(c).map(encodeEvent))
  }
  const finish = tr.finish()
  wire.push(...finish.events.map(encodeEvent), encodeEvent(tr.terminal()))
  const events = wire.flatMap((frame) => frame.split('\n\n').filter((f) => f !== '').map((f) => {
    const [event, data] = f.split('\n')
    const parsed = JSON.parse((data ?? '').slice('data: '.length)) as Record<string, unknown>
    if (event !== `event: ${String(parsed.type)}`) throw new Error(`frame's event line ${event} does not match its type ${String(parsed.type)}`)
    return parsed
  }))
  return { events, finish, fast, text: wire.join('') }
}

const types = (events: Record<string, unknown>[]): string[] => events.map((e) => String(e.type))
const terminalResponse = (events: Record<string, unknown>[]): Record<string, unknown> => events.at(-1)?.response as Record<string, unknown>
const text = (s: string): Record<string, unknown> => chunk({ content: s })

t.test('text only: the recorded order and payloads', async (t) => {
  const { events, finish } = run([chunk({ role: 'assistant', content: '' }), text('Hel'), text('lo'), chunk({}, 'stop'), usageChunk()])
  t.strictSame(checkResponseStream(events), [])
  t.strictSame(types(events), [
    'response.created',
    'response.in_progress',
    'response.output_item.added',
    'response.content_part.added',
    'response.output_text.delta',
    'response.output_text.delta',
    'response.output_text.done',
    'response.content_part.done',
    'response.output_item.done',
    'response.completed',
  ])
  t.strictSame(events[2], { type: 'response.output_item.added', sequence_number: 2, output_index: 0, item: { id: 'msg_1', type: 'message', status: 'in_progress', content: [], role: 'assistant' } })
  t.strictSame(events[3], {
    type: 'response.content_part.added',
    sequence_number: 3,
    item_id: 'msg_1',
    output_index: 0,
    content_index: 0,
    part: { type: 'output_text', annotations: [], logprobs: [], text: '' },
  })
  t.strictSame(events[4], { type: 'response.output_text.delta', sequence_number: 4, item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Hel', logprobs: [] })
  t.strictSame(events[6], { type: 'response.output_text.done', sequence_number: 6, item_id: 'msg_1', output_index: 0, content_index: 0, text: 'Hello', logprobs: [] })
  const item = { id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'Hello' }], role: 'assistant' }
  t.strictSame(finish.output, [item])
  t.equal(finish.status, 'completed')
  t.match(terminalResponse(events), {
    id: 'resp_1',
    object: 'response',
    status: 'completed',
    output: [item],
    usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 4 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 },
  })
  t.match(events[0], { response: { status: 'in_progress', output: [], usage: null } })
})

t.test("log probabilities: each delta carries its own tokens; the done events, the item and the terminal output all of them", async (t) => {
  const lp = (token: string, logprob: number): Record<string, unknown> => ({ token, logprob, bytes: [...Buffer.from(token)], top_logprobs: [] })
  const withLogprobs = (s: string, logprob: number): Record<string, unknown> => ({
    id: 'gen-1',
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta: { content: s }, logprobs: { content: [lp(s, logprob)], refusal: null }, finish_reason: null }],
  })
  const chunks = [withLogprobs('Hel', -0.5), withLogprobs('lo', -0.25), chunk({}, 'stop'), usageChunk()]
  const all = [lp('Hel', -0.5), lp('lo', -0.25)]
  for (const asText of [false, true]) {
    const { events, finish } = run(chunks, undefined, false, asText)
    t.strictSame(checkResponseStream(events), [])
    t.strictSame(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.logprobs), [[all[0]], [all[1]]], 'each delta its own')
    t.strictSame(events.find((e) => e.type === 'response.output_text.done')?.logprobs, all, 'output_text.done: all')
    const part = { type: 'output_text', annotations: [], logprobs: all, text: 'Hello' }
    t.strictSame(events.find((e) => e.type === 'response.content_part.done')?.part, part, 'content_part.done: all')
    t.strictSame(finish.output, [{ id: 'msg_1', type: 'message', status: 'completed', content: [part], role: 'assistant' }])
    t.strictSame(terminalResponse(events).output, finish.output, 'the terminal output is the items')
  }
})

t.test('text pieces are translated without a parse, into the events a parse gives', async (t) => {
  const chunks = [chunk({ role: 'assistant', content: '' }), text('Hel'), text('lo "quoted" \\ é\n'), text('!'), chunk({}, 'stop'), usageChunk()]
  const parsed = run(chunks)
  const unparsed = run(chunks, undefined, true)
  // The role's event (no text) makes nothing, the first text piece opens the message and the next two continue it,
  // all four without a parse.
  t.equal(unparsed.fast, 4)
  t.strictSame(unparsed.events, parsed.events)
  t.strictSame(checkResponseStream(unparsed.events), [])
  t.equal(unparsed.finish.output.length, 1)
})

t.test('tools only: one call after the other', async (t) => {
  const { events, finish } = run([
    chunk({ role: 'assistant', content: null, tool_calls: [call(0, { id: 'call_a', name: 'weather', args: '' })] }),
    chunk({ tool_calls: [call(0, { args: '{"city":' })] }),
    chunk({ tool_calls: [call(0, { args: '"Oslo"}' })] }),
    chunk({ tool_calls: [call(1, { id: 'call_b', name: 'time', args: '{}' })] }),
    chunk({}, 'tool_calls'),
    usageChunk(),
  ])
  t.strictSame(checkResponseStream(events), [])
  t.strictSame(finish.output, [
    { id: 'fc_1', type: 'function_call', status: 'completed', arguments: '{"city":"Oslo"}', call_id: 'call_a', name: 'weather' },
    { id: 'fc_2', type: 'function_call', status: 'completed', arguments: '{}', call_id: 'call_b', name: 'time' },
  ])
  t.strictSame(types(events).slice(2, 9), [
    'response.output_item.added',
    'response.function_call_arguments.delta',
    'response.function_call_arguments.delta',
    'response.function_call_arguments.done',
    'response.output_item.done',
    'response.output_item.added',
    'response.function_call_arguments.delta',
  ])
  t.strictSame(events[2], {
    type: 'response.output_item.added',
    sequence_number: 2,
    output_index: 0,
    item: { id: 'fc_1', type: 'function_call', status: 'in_progress', arguments: '', call_id: 'call_a', name: 'weather' },
  })
  t.strictSame(events[5], { type: 'response.function_call_arguments.done', sequence_number: 5, item_id: 'fc_1', output_index: 0, arguments: '{"city":"Oslo"}', name: 'weather' })
  t.equal(events[7]?.output_index, 1, 'the second call is output 1, no gap')
})

t.test('text then two parallel calls with interleaved deltas', async (t) => {
  const { events, finish } = run([
    text('Let me check.'),
    chunk({ tool_calls: [call(0, { id: 'call_a', name: 'weather' }), call(1, { id: 'call_b', name: 'weather' })] }),
    chunk({ tool_calls: [call(0, { args: '{"city":"Os' })] }),
    chunk({ tool_calls: [call(1, { args: '{"city":"Ro' })] }),
    chunk({ tool_calls: [call(0, { args: 'lo"}' })] }),
    chunk({ tool_calls: [call(1, { args: 'me"}' })] }),
    chunk({}, 'tool_calls'),
    usageChunk(),
  ])
  t.strictSame(checkResponseStream(events), [])
  t.strictSame(finish.output, [
    { id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'Let me check.' }], role: 'assistant' },
    { id: 'fc_2', type: 'function_call', status: 'completed', arguments: '{"city":"Oslo"}', call_id: 'call_a', name: 'weather' },
    { id: 'fc_3', type: 'function_call', status: 'completed', arguments: '{"city":"Rome"}', call_id: 'call_b', name: 'weather' },
  ])
  // Call 1 waited (buffered) until call 0's arguments were complete JSON, then streamed what it had.
  const added = events.filter((e) => e.type === 'response.output_item.added').map((e) => e.sequence_number)
  const firstDone = events.find((e) => e.type === 'response.function_call_arguments.done')?.sequence_number
  t.ok(Number(added[2]) > Number(firstDone), 'the second call opens after the first closes')
})

t.test('whole calls in one chunk, later deltas without id or name, a first delta without a name', async (t) => {
  const whole = run([
    chunk({ tool_calls: [call(0, { id: 'call_a', name: 'f', args: '{"a":1}' }), call(1, { id: 'call_b', name: 'g', args: '{"b":2}' })] }, 'tool_calls'),
  ])
  t.strictSame(checkResponseStream(whole.events), [])
  t.strictSame(
    whole.finish.output.map((i) => [i.call_id, i.name, i.arguments]),
    [
      ['call_a', 'f', '{"a":1}'],
      ['call_b', 'g', '{"b":2}'],
    ],
  )
  const nameLate = run([
    chunk({ tool_calls: [{ index: 0, id: 'call_x', type: 'function', function: { arguments: '' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { name: 'late', arguments: '{"q":' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] }),
    chunk({}, 'tool_calls'),
  ])
  t.strictSame(checkResponseStream(nameLate.events), [])
  t.strictSame(nameLate.finish.output, [{ id: 'fc_1', type: 'function_call', status: 'completed', arguments: '{"q":1}', call_id: 'call_x', name: 'late' }])
  const noId = run([chunk({ tool_calls: [{ index: 0, function: { name: 'f', arguments: '{}' } }] }, 'tool_calls')])
  t.strictSame(checkResponseStream(noId.events), [])
  t.match(noId.finish.output, [{ type: 'function_call', call_id: 'call_2', id: 'fc_1' }], 'a call id is minted when the upstream sends none')
  const reused = run([
    chunk({ tool_calls: [call(0, { id: 'call_a', name: 'f', args: '{}' })] }),
    chunk({ tool_calls: [call(0, { id: 'call_b', name: 'g', args: '{}' })] }),
    chunk({}, 'tool_calls'),
  ])
  t.strictSame(checkResponseStream(reused.events), [])
  t.strictSame(
    reused.finish.output.map((i) => i.call_id),
    ['call_a', 'call_b'],
    'an index reused with a new id is a new call',
  )
})

t.test('refusal', async (t) => {
  const { events, finish } = run([chunk({ role: 'assistant', refusal: "I can't" }), chunk({ refusal: ' help.' }), chunk({}, 'stop')])
  t.strictSame(checkResponseStream(events), [])
  t.ok(types(events).includes('response.refusal.delta') && types(events).includes('response.refusal.done'))
  t.match(events[3], { type: 'response.content_part.added', part: { type: 'refusal', refusal: '' } })
  t.strictSame(finish.output, [{ id: 'msg_1', type: 'message', status: 'completed', content: [{ type: 'refusal', refusal: "I can't help." }], role: 'assistant' }])
})

t.test('cut by length: response.incomplete, the message incomplete', async (t) => {
  const { events, finish } = run([text('Once upon'), text(' a'), chunk({}, 'length'), usageChunk(3, 2)])
  t.strictSame(checkResponseStream(events), [])
  t.equal(finish.status, 'incomplete')
  t.strictSame(finish.incompleteDetails, { reason: 'max_output_tokens' })
  t.equal(events.at(-1)?.type, 'response.incomplete')
  t.match(terminalResponse(events), { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output: [{ status: 'incomplete' }], usage: { total_tokens: 5 } })
  const duringCall = run([text('x'), chunk({ tool_calls: [call(0, { id: 'c', name: 'f', args: '{"a":' })] }), chunk({}, 'length')])
  t.strictSame(checkResponseStream(duringCall.events), [])
  t.match(duringCall.finish.output, [{ type: 'message', status: 'completed' }, { type: 'function_call', status: 'incomplete', arguments: '{"a":' }])
})

t.test('no usage chunk: usage is zeros, never null', async (t) => {
  const { events, finish } = run([text('hi'), chunk({}, 'stop')])
  t.strictSame(checkResponseStream(events), [])
  t.strictSame(finish.usage, { input_tokens: 0, input_tokens_details: { cached_tokens: 0 }, output_tokens: 0, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 0 })
})

t.test('reasoning first, then text; reasoning after the answer began is not shown', async (t) => {
  const { events, finish } = run([chunk({ reasoning: 'Six ' }), chunk({ reasoning: 'times seven.' }), text('42'), chunk({ reasoning: 'late' }), chunk({}, 'stop')])
  t.strictSame(checkResponseStream(events), [])
  t.strictSame(finish.output, [
    { id: 'rs_1', type: 'reasoning', summary: [{ type: 'summary_text', text: 'Six times seven.' }] },
    { id: 'msg_2', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: '42' }], role: 'assistant' },
  ])
  t.strictSame(types(events).slice(2, 9), [
    'response.output_item.added',
    'response.reasoning_summary_part.added',
    'response.reasoning_summary_text.delta',
    'response.reasoning_summary_text.delta',
    'response.reasoning_summary_text.done',
    'response.reasoning_summary_part.done',
    'response.output_item.done',
  ])
  const only = run([chunk({ reasoning: 'hmm' }), chunk({}, 'length')])
  t.strictSame(checkResponseStream(only.events), [])
  t.match(only.finish.output, [{ type: 'reasoning' }, { type: 'message', status: 'incomplete', content: [{ text: '' }] }], 'cut while reasoning: an empty incomplete message')
})

t.test('custom tool call (apply_patch): input unwrapped and sent whole', async (t) => {
  const { events, finish } = run(
    [
      chunk({ tool_calls: [call(0, { id: 'call_p', name: 'apply_patch', args: '{"input":"*** Begin' })] }),
      chunk({ tool_calls: [call(0, { args: ' Patch\\n"}' })] }),
      chunk({}, 'tool_calls'),
    ],
    new Set(['apply_patch']),
  )
  t.strictSame(checkResponseStream(events), [])
  t.strictSame(finish.output, [{ id: 'ctc_1', type: 'custom_tool_call', call_id: 'call_p', name: 'apply_patch', input: '*** Begin Patch\n' }])
  t.ok(types(events).includes('response.custom_tool_call_input.done'))
  t.notOk(types(events).includes('response.function_call_arguments.delta'))
})

t.test('text after the tool calls becomes a message after them; annotations are flattened', async (t) => {
  const { events, finish } = run([
    chunk({ tool_calls: [call(0, { id: 'c', name: 'f', args: '{}' })] }),
    text('Also this.'),
    chunk({ annotations: [{ type: 'url_citation', url_citation: { url: 'https://x', title: 'X', start_index: 0, end_index: 4 } }] }),
    chunk({}, 'stop'),
  ])
  t.strictSame(checkResponseStream(events), [])
  t.match(finish.output, [
    { type: 'function_call' },
    { type: 'message', content: [{ type: 'output_text', text: 'Also this.', annotations: [{ type: 'url_citation', url: 'https://x', title: 'X', start_index: 0, end_index: 4 }] }] },
  ])
  const cited = run([text('See X.'), chunk({ annotations: [{ type: 'url_citation', url_citation: { url: 'https://x', title: 'X', start_index: 4, end_index: 5 } }] }, 'stop')])
  t.strictSame(checkResponseStream(cited.events), [])
  t.match(
    cited.events.find((e) => e.type === 'response.output_text.annotation.added'),
    { item_id: 'msg_1', output_index: 0, content_index: 0, annotation_index: 0, annotation: { type: 'url_citation', url: 'https://x' } },
  )
})

t.test('nothing at all: one empty message', async (t) => {
  const { events, finish } = run([chunk({ role: 'assistant', content: '' }, 'stop')])
  t.strictSame(checkResponseStream(events), [])
  t.match(finish.output, [{ type: 'message', content: [{ type: 'output_text', text: '' }] }])
})

t.test('mid-stream failure: error, then response.failed with the items done so far', async (t) => {
  const tr = translator()
  const events: ResponseEvent[] = [...tr.start(), ...tr.push(chunk({ tool_calls: [call(0, { id: 'c', name: 'f', args: '{}' })] })), ...tr.push(text('and'))]
  events.push(...tr.push(chunk({ tool_calls: [call(1, { id: 'd', name: 'g', args: '{"x"' })] })))
  events.push(...tr.fail({ code: 'server_error', message: 'upstream went away' }))
  const wire = JSON.parse(JSON.stringify(events)) as Record<string, unknown>[]
  t.strictSame(checkResponseStream(wire), [])
  t.strictSame(wire.at(-2), {
    type: 'error',
    sequence_number: wire.length - 2,
    code: 'server_error',
    message: 'upstream went away',
    param: null,
    error: { type: 'server_error', code: 'server_error', message: 'upstream went away', param: null },
  })
  t.match(terminalResponse(wire), { status: 'failed', error: { code: 'server_error', message: 'upstream went away' }, output: [{ call_id: 'c' }] })
  t.equal((terminalResponse(wire).output as unknown[]).length, 1)
  t.throws(() => tr.push(text('x')), /phase ended/)
})

t.test('mid-stream failure with a message or reasoning open: it is closed as incomplete and is in response.failed', async (t) => {
  // OpenAI gives the item a length limit cut status "incomplete"; a failure cuts the open item the same way, and the
  // terminal output must equal the output_item.done items, so the text the client was shown is kept in both.
  for (const asText of [false, true]) {
    const tr = translator(new Set(), asText)
    const wire = [...tr.start(), ...tr.push(text('par')), ...tr.push(text('tial')), ...tr.fail({ code: 'upstream_error', message: 'gone' })]
    // As the client parses it (a snapshot rendered as text is only JSON once encoded).
    const events = wire.map(encodeEvent).map((f) => JSON.parse(f.split('\n')[1]?.slice('data: '.length) ?? '{}') as Record<string, unknown>)
    t.strictSame(checkResponseStream(events), [], `asText ${asText}: a well-formed stream`)
    t.strictSame(types(events).slice(-5), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'error', 'response.failed'])
    t.match(events.at(-3), { output_index: 0, item: { id: 'msg_1', type: 'message', status: 'incomplete', content: [{ type: 'output_text', text: 'partial' }] } })
    t.match(terminalResponse(events), { status: 'failed', error: { code: 'upstream_error', message: 'gone' } })
    t.strictSame(terminalResponse(events).output, [(events.at(-3) as { item: unknown }).item], `asText ${asText}: the output is that item`)
  }

  const tr = translator()
  const events = JSON.parse(JSON.stringify([...tr.start(), ...tr.push(chunk({ reasoning: 'Thinking' })), ...tr.fail({ code: 'upstream_error', message: 'gone' })])) as Record<string, unknown>[]
  t.strictSame(checkResponseStream(events), [])
  t.match(terminalResponse(events), { status: 'failed', output: [{ type: 'reasoning', summary: [{ type: 'summary_text', text: 'Thinking' }] }] })

  // A call the model was still writing is left open and out: clients run a call when its output_item.done comes.
  const calls = translator()
  const withCall = JSON.parse(JSON.stringify([
    ...calls.start(),
    ...calls.push(text('Let me look.')),
    ...calls.push(chunk({ tool_calls: [call(0, { id: 'c', name: 'f', args: '{"q":"par' })] })),
    ...calls.fail({ code: 'upstream_error', message: 'gone' }),
  ])) as Record<string, unknown>[]
  t.strictSame(checkResponseStream(withCall), [])
  t.notOk(withCall.some((e) => e.type === 'response.output_item.done' && (e.item as { type: string }).type === 'function_call'), 'no done event for the unfinished call')
  t.match(terminalResponse(withCall), { output: [{ type: 'message', status: 'completed', content: [{ text: 'Let me look.' }] }] })
  t.equal((terminalResponse(withCall).output as unknown[]).length, 1)
})

t.test('an OpenRouter error chunk: finish() ends with the error event, the terminal is response.failed', async (t) => {
  const { events, finish } = run([text('Hi'), { id: 'gen-1', error: { code: 502, message: 'Provider disconnected' }, choices: [{ index: 0, delta: { content: '' }, finish_reason: 'error' }] }])
  t.strictSame(checkResponseStream(events), [])
  t.equal(finish.status, 'failed')
  t.strictSame(types(events).slice(-2), ['error', 'response.failed'])
  t.match(terminalResponse(events), { error: { code: 'server_error', message: 'Provider disconnected' }, output: [{ type: 'message' }] })
})

t.test('encodeEvent frames one event', async (t) => {
  t.equal(encodeEvent({ type: 'response.output_text.delta', sequence_number: 4, delta: 'a\nb' }), 'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":4,"delta":"a\\nb"}\n\n')
  t.throws(() => encodeEvent({ type: 'x\ny', sequence_number: 0 }))
})

t.test('a response rendered as JSON text frames as the same bytes as the object would', async (t) => {
  const response = responseObject({ id: 'resp_1', createdAt: 1, model: 'm', status: 'in_progress', output: [], usage: null, error: null, incompleteDetails: null, echo: {}, previousResponseId: null, conversationId: null })
  const asText = new JsonText(JSON.stringify(response))
  t.equal(encodeEvent({ type: 'response.created', sequence_number: 0, response: asText }), encodeEvent({ type: 'response.created', sequence_number: 0, response }))
  // Beside other fields, or serialized by anything else, it is still the same JSON (not `{}`).
  t.equal(encodeEvent({ type: 'x', sequence_number: 1, response: asText, extra: 1 }), encodeEvent({ type: 'x', sequence_number: 1, response, extra: 1 }))
  t.equal(JSON.stringify({ response: asText }), JSON.stringify({ response }))
})

t.test('the checker catches broken streams', async (t) => {
  const good = run([text('Hi'), chunk({ tool_calls: [call(0, { id: 'c', name: 'f', args: '{}' })] }, 'tool_calls')]).events
  t.strictSame(checkResponseStream(good), [], 'the unbroken stream passes')
  const clone = (): Record<string, unknown>[] => JSON.parse(JSON.stringify(good)) as Record<string, unknown>[]
  const renumber = (es: Record<string, unknown>[]): Record<string, unknown>[] => es.map((e, i) => ({ ...e, sequence_number: i }))
  const broken: Array<[string, Record<string, unknown>[], RegExp]> = []

  const gap = clone()
  for (const e of gap) if (e.type !== 'response.created' && e.type !== 'response.in_progress' && e.output_index === 1) e.output_index = 2
  broken.push(['a gap in output_index', gap, /output_index 2, expected 1/])

  const early = clone()
  const added = early.findIndex((e) => e.type === 'response.content_part.added')
  const [part] = early.splice(added, 1)
  early.splice(added + 1, 0, part as Record<string, unknown>)
  broken.push(['a delta before content_part.added', renumber(early), /part 0 was not added/])

  const differs = clone()
  const resp = differs.at(-1)?.response as { output: Array<Record<string, unknown>> }
  resp.output[1] = { ...resp.output[1], arguments: '{"changed":true}' }
  broken.push(['a terminal output that differs', differs, /output differs from the output_item.done items/])

  const seq = clone()
  seq.splice(4, 1)
  broken.push(['a missing sequence number', seq, /sequence_number 5, expected 4/])

  broken.push(['an event before response.created', renumber([{ type: 'response.in_progress', response: {} }, ...clone()]), /first event must be response.created/])
  broken.push(['an unknown event type', renumber([...clone().slice(0, 3), { type: 'response.thinking', item_id: 'msg_1', output_index: 0 }, ...clone().slice(3)]), /not an official event type/])

  const topError = clone()
  ;(topError[4] as Record<string, unknown>).error = null
  broken.push(['a top-level error key', topError, /top-level error key/])

  const wrongItem = clone()
  const delta = wrongItem.find((e) => e.type === 'response.output_text.delta') as Record<string, unknown>
  delta.item_id = 'msg_other'
  broken.push(['a delta naming another item', wrongItem, /names msg_other/])

  const twoOpen = clone()
  const firstDone = twoOpen.findIndex((e) => e.type === 'response.output_item.done')
  twoOpen.splice(firstDone, 1)
  broken.push(['two items open at once', renumber(twoOpen), /still open/])

  const noUsage = clone()
  ;(noUsage.at(-1)?.response as Record<string, unknown>).usage = null
  broken.push(['a terminal without usage', noUsage, /usage is null/])

  broken.push(['no terminal event', clone().slice(0, -1), /does not end with a terminal event/])

  for (const [name, events, expected] of broken) {
    const violations = checkResponseStream(events)
    t.ok(violations.some((v) => expected.test(v)), `${name}: ${violations.join('; ') || 'no violation found'}`)
  }
})

// ---- the official SDK's own accumulator ------------------------------------------------------------------------

t.test("openai-node's responses.stream() accumulates our events into the same response", async (t) => {
  let body = ''
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.end(body)
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => server.close())
  const { port } = server.address() as { port: number }
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'test', maxRetries: 0 })

  const custom = new Set(['apply_patch'])
  const scenarios: Array<[string, Record<string, unknown>[], string]> = [
    ['text', [text('Hel'), text('lo'), chunk({}, 'stop'), usageChunk()], 'Hello'],
    [
      'text and interleaved calls',
      [
        text('Checking.'),
        chunk({ tool_calls: [call(0, { id: 'call_a', name: 'w' }), call(1, { id: 'call_b', name: 'w' })] }),
        chunk({ tool_calls: [call(1, { args: '{"c":' })] }),
        chunk({ tool_calls: [call(0, { args: '{"c":1}' })] }),
        chunk({ tool_calls: [call(1, { args: '2}' })] }),
        chunk({}, 'tool_calls'),
      ],
      'Checking.',
    ],
    ['reasoning then text', [chunk({ reasoning: 'think' }), text('42'), chunk({}, 'stop')], '42'],
    ['refusal', [chunk({ refusal: 'No.' }), chunk({}, 'stop')], ''],
    ['custom tool', [chunk({ tool_calls: [call(0, { id: 'call_p', name: 'apply_patch', args: '{"input":"p"}' })] }, 'tool_calls')], ''],
    ['text after calls, with a citation', [chunk({ tool_calls: [call(0, { id: 'c', name: 'f', args: '{}' })] }), text('tail'), chunk({ annotations: [{ type: 'url_citation', url_citation: { url: 'https://x', title: 'X', start_index: 0, end_index: 4 } }] }), chunk({}, 'stop')], 'tail'],
    ['cut by length', [text('Once'), chunk({}, 'length')], 'Once'],
  ]
  for (const [name, chunks, outputText] of scenarios) {
    const { events, finish } = run(chunks, custom)
    body = events.map((e) => encodeEvent(e as ResponseEvent)).join('')
    const stream = client.responses.stream({ model: 'openai/gpt-4o', input: 'hi' })
    const final = await stream.finalResponse()
    // The SDK adds `parsed` / `parsed_arguments` (structured-output helpers) to what it received; the rest must be ours.
    const received = JSON.parse(JSON.stringify(final.output, (k, v: unknown) => (k === 'parsed' || k === 'parsed_arguments' ? undefined : v))) as unknown
    t.strictSame(received, finish.output, `${name}: the SDK's output is ours`)
    t.equal(final.output_text, outputText, `${name}: output_text`)
    t.equal(final.status, finish.status, `${name}: status`)
  }

  const tr = translator()
  const failed = [...tr.start(), ...tr.push(text('partial')), ...tr.fail({ code: 'rate_limit_exceeded', message: 'Slow down' })]
  body = failed.map(encodeEvent).join('')
  const err = await client.responses
    .stream({ model: 'openai/gpt-4o', input: 'hi' })
    .finalResponse()
    .then(
      () => undefined,
      (e: unknown) => e,
    )
  t.ok(err instanceof APIError, 'a failure reaches the SDK as an APIError')
  t.match(err, { message: /Slow down/ })
})

// ---- stream and JSON agree ---------------------------------------------------------------------------------------

const SEED = Number(process.env.FC_SEED ?? 20260822)

/** Split a string into 1–4 pieces at random points (each call of the arbitrary picks new points). */
const pieces = (s: string): fc.Arbitrary<string[]> =>
  fc.uniqueArray(fc.integer({ min: 1, max: Math.max(1, s.length - 1) }), { maxLength: Math.min(3, Math.max(0, s.length - 1)) }).map((cuts) => {
    const at = [0, ...cuts.filter((c) => c < s.length).sort((a, b) => a - b), s.length]
    const out: string[] = []
    for (let k = 1; k < at.length; k++) out.push(s.slice(at[k - 1], at[k]))
    return out.filter((p) => p !== '')
  })

const reply = fc.record({
  reasoning: fc.option(fc.string({ minLength: 1, maxLength: 10 }), { nil: undefined }),
  content: fc.option(fc.string({ minLength: 1, maxLength: 20 }), { nil: undefined }),
  refusal: fc.option(fc.string({ minLength: 1, maxLength: 10 }), { nil: undefined }),
  calls: fc.uniqueArray(
    fc.record({ id: fc.string({ minLength: 1, maxLength: 4 }).map((x) => `call_${x}`), name: fc.constantFrom('f', 'g', 'apply_patch'), args: fc.dictionary(fc.string({ maxLength: 3 }), fc.oneof(fc.integer(), fc.string({ maxLength: 6 })), { maxKeys: 3 }) }),
    { maxLength: 3, selector: (c) => c.id },
  ),
  finish: fc.constantFrom('stop', 'tool_calls', 'length', 'content_filter'),
})

t.test('a reply streamed in any pieces gives the output its non-stream completion gives', async (t) => {
  const custom = new Set(['apply_patch'])
  const property = fc.property(
    reply.chain((r) => {
      const argsOf = (c: (typeof r.calls)[number]): string => (c.name === 'apply_patch' ? JSON.stringify({ input: JSON.stringify(c.args) }) : JSON.stringify(c.args))
      return fc.record({
        r: fc.constant(r),
        reasoning: pieces(r.reasoning ?? ''),
        content: pieces(r.content ?? ''),
        refusal: pieces(r.refusal ?? ''),
        args: fc.tuple(...r.calls.map((c) => pieces(argsOf(c)))),
        order: fc.array(fc.nat(), { maxLength: 20 }),
      }).map((x) => ({ ...x, argsOf }))
    }),
    ({ r, reasoning, content, refusal, args, order, argsOf }) => {
      const message: Record<string, unknown> = { role: 'assistant', content: r.content ?? null }
      if (r.reasoning !== undefined) message.reasoning = r.reasoning
      if (r.refusal !== undefined) message.refusal = r.refusal
      if (r.calls.length > 0) message.tool_calls = r.calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: argsOf(c) } }))
      const expected = completionToOutput({ choices: [{ index: 0, message, finish_reason: r.finish }] }, { newId: counter(), customTools: custom })

      const chunks: Record<string, unknown>[] = [chunk({ role: 'assistant', content: '' })]
      for (const p of reasoning) chunks.push(chunk({ reasoning: p }))
      for (const p of content) chunks.push(chunk({ content: p }))
      for (const p of refusal) chunks.push(chunk({ refusal: p }))
      // Calls interleaved in a random order; each call's first delta carries its id and name, and calls start in
      // index order (the order of the completion's tool_calls).
      const queues = r.calls.map((c, k) => [call(k, { id: c.id, name: c.name, args: '' }), ...(args[k] ?? []).map((a) => call(k, { args: a }))])
      const started = queues.map(() => false)
      let step = 0
      while (queues.some((q) => q.length > 0)) {
        const live = queues.map((q, k) => k).filter((k) => (queues[k]?.length ?? 0) > 0 && (started[k] === true || k === 0 || started[k - 1] === true))
        const k = live[(order[step++] ?? 0) % live.length] ?? 0
        started[k] = true
        chunks.push(chunk({ tool_calls: [queues[k]?.shift()] }))
      }
      chunks.push(chunk({}, r.finish), usageChunk())
      const { events, finish } = run(chunks, custom)
      const violations = checkResponseStream(events)
      if (violations.length > 0) throw new Error(violations.join('\n'))
      if (!isDeepStrictEqual(finish.output, expected.output)) throw new Error(`stream ${JSON.stringify(finish.output)}\njson   ${JSON.stringify(expected.output)}`)
      // The relay translates text-only events without parsing them: the client must see the same events.
      const unparsed = run(chunks, custom, true)
      if (!isDeepStrictEqual(unparsed.events, events)) throw new Error(`unparsed ${JSON.stringify(unparsed.events)}\nparsed   ${JSON.stringify(events)}`)
      // The handler's snapshots are text and the text message's events come from templates: the same bytes as the
      // objects serialized whole.
      const asText = run(chunks, custom, true, true)
      if (asText.text !== unparsed.text) throw new Error(`as text ${asText.text}\nobjects ${unparsed.text}`)
    },
  )
  const details = fc.check(property, { seed: SEED, numRuns: 300 })
  if (details.failed) t.fail(`FC_SEED=${SEED}: ${fc.defaultReportMessage(details) ?? 'property failed'}`)
  else t.pass(`holds for ${details.numRuns} runs (FC_SEED=${SEED})`)
})

t.test('the event templates make the text JSON.stringify makes of the event objects', async (t) => {
  const texts = ['', 'Hello', 'a "quoted" \\ slash\n\ttab \u2028 é 😀 \u0000 </script>', '\ud800 lone surrogate']
  const ids = ['msg_1', 'msg_"odd"\n']
  for (const id of ids) {
    for (const [index, contentIndex] of [[0, 0], [3, 12]] as const) {
      const where = ev.partWhere(id, index, contentIndex)
      const at = { item_id: id, output_index: index, content_index: contentIndex }
      const same = (e: ev.EncodedEvent, object: Record<string, unknown>, name: string): void => {
        t.equal(e.data, JSON.stringify(object), `${name} ${JSON.stringify(id)} ${index}/${contentIndex}`)
        t.equal(ev.encodeEvent(e), ev.encodeEvent(object as ev.EventObject), `${name}: the frame`)
      }
      same(ev.messageAdded(7, id, index), { type: 'response.output_item.added', sequence_number: 7, output_index: index, item: { id, type: 'message', status: 'in_progress', content: [], role: 'assistant' } }, 'messageAdded')
      same(ev.textPartAdded(8, where), { type: 'response.content_part.added', sequence_number: 8, ...at, part: ev.emptyPart('output_text') }, 'textPartAdded')
      for (const text of texts) {
        const json = JSON.stringify(text)
        same(ev.textDelta(9, where, json), { type: 'response.output_text.delta', sequence_number: 9, ...at, delta: text, logprobs: [] }, 'textDelta')
        t.equal(ev.textDeltaFrame(9, where, json), ev.encodeEvent(ev.textDelta(9, where, json)), 'textDeltaFrame')
        same(ev.textDone(10, where, json), { type: 'response.output_text.done', sequence_number: 10, ...at, text, logprobs: [] }, 'textDone')
        for (const annotations of [[], [{ type: 'url_citation', start_index: 0, end_index: 4, url: 'https://x/"y"', title: 'X' }]]) {
          const part = ev.finalPart({ type: 'output_text', text, annotations })
          const partJson = ev.textPartJson(annotations, json)
          t.equal(partJson, JSON.stringify(part), 'textPartJson')
          same(ev.partDone(11, where, partJson), { type: 'response.content_part.done', sequence_number: 11, ...at, part }, 'partDone')
          for (const status of ['completed', 'incomplete'] as const) {
            const refusal = JSON.stringify(ev.finalPart({ type: 'refusal', refusal: text }))
            const item = { id, type: 'message', status, content: [part, JSON.parse(refusal) as unknown], role: 'assistant' }
            const itemJson = ev.messageItemJson(id, status, [partJson, refusal])
            t.equal(itemJson, JSON.stringify(item), 'messageItemJson')
            same(ev.itemDone(12, index, itemJson), { type: 'response.output_item.done', sequence_number: 12, output_index: index, item }, 'itemDone')
          }
        }
      }
    }
  }
  const response = responseObject({ ...FIXED, status: 'in_progress', output: [], usage: null, error: null, incompleteDetails: null })
  const snapshot = ev.snapshotEvent('response.created', 0, new JsonText(JSON.stringify(response)))
  t.equal(ev.encodeEvent(snapshot), ev.encodeEvent({ type: 'response.created', sequence_number: 0, response }))
  // Serialized by anything else, an encoded event is still its JSON (not `{}`).
  t.equal(JSON.stringify([snapshot]), JSON.stringify([{ type: 'response.created', sequence_number: 0, response }]))
})

t.test('snapshots rendered as text: the same bytes as the Response object serialized, in every kind of stream', async (t) => {
  const scenarios: Array<[string, Record<string, unknown>[]]> = [
    ['text', [chunk({ role: 'assistant', content: '' }), text('Hel'), text('lo "q" \u2028'), chunk({}, 'stop'), usageChunk()]],
    ['text, refusal, text', [text('a'), chunk({ refusal: 'No.' }), text('b'), chunk({}, 'stop')]],
    ['citation', [text('see'), chunk({ annotations: [{ type: 'url_citation', url_citation: { url: 'https://x', title: 'X', start_index: 0, end_index: 3 } }] }), chunk({}, 'length')]],
    ['reasoning, text, call', [chunk({ reasoning: 'think' }), text('ok'), chunk({ tool_calls: [call(0, { id: 'c', name: 'f', args: '{}' })] }), chunk({}, 'tool_calls')]],
    ['nothing', [chunk({}, 'stop')]],
    ['error chunk', [text('Hi'), { id: 'gen-1', error: { code: 502, message: 'gone' }, choices: [{ index: 0, delta: { content: '' }, finish_reason: 'error' }] }]],
  ]
  for (const [name, chunks] of scenarios) {
    for (const unparsed of [false, true]) t.equal(run(chunks, undefined, unparsed, true).text, run(chunks, undefined, unparsed).text, `${name}${unparsed ? ', unparsed' : ''}`)
  }
  const objects = translator()
  const texts = translator(undefined, true)
  const wire = (tr: ResponseStreamTranslator): string => [...tr.start(), ...tr.push(text('partial')), ...tr.fail({ code: 'server_error', message: 'x' })].map(ev.encodeEvent).join('')
  t.equal(wire(texts), wire(objects), 'a failed stream')
})
