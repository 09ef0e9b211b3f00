/**
 * contentDelta (src/chat/content-delta.ts) reads a text piece out of a stream event without parsing it. Held to the
 * parse it replaces: whenever it answers, its text is what JSON.parse finds in choices[0].delta.content, and the event
 * has nothing else the relay must act on; and it does answer for the events most of a stream is made of.
 */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { choiceDeltaOnly, contentDelta } from '../src/chat/content-delta.js'

const event = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}, finish: string | null = null): string =>
  JSON.stringify({ id: 'gen-1', provider: 'OpenAI', model: 'openai/gpt-4o', object: 'chat.completion.chunk', created: 1, choices: [{ index: 0, delta, finish_reason: finish, native_finish_reason: finish, logprobs: null }], ...extra })

t.test('the events a stream is made of are read without a parse', async (t) => {
  t.same(contentDelta(event({ content: 'Hello' })), { text: 'Hello', json: '"Hello"', finishReason: null })
  t.same(contentDelta(event({ role: 'assistant', content: ' world' })), { text: ' world', json: '" world"', finishReason: null })
  // Escapes are decoded; the JSON text is kept as the upstream wrote it.
  t.same(contentDelta(event({ content: 'a "b" \\ c\nd\u00e9' })), { text: 'a "b" \\ c\nd\u00e9', json: JSON.stringify('a "b" \\ c\nd\u00e9'), finishReason: null })
  t.same(contentDelta('{"choices":[{"index":0,"delta":{"content":"caf\\u00e9"}}]}'), { text: 'café', json: '"caf\\u00e9"', finishReason: null })
  // A string ending in a backslash: the quote after an even run of backslashes closes it.
  t.same(contentDelta(event({ content: 'end\\\\' }))?.text, 'end\\\\')
  t.equal(contentDelta(event({ content: 'last' }, {}, 'stop'))?.finishReason, 'stop')
  t.equal(contentDelta(event({ content: '' }, {}, 'length'))?.finishReason, 'length')
  t.equal(contentDelta(event({ content: 'x' }, {}, 'st\\op')), undefined, 'an escaped finish reason is left to the parse')
})

t.test('everything else is left to the parse', async (t) => {
  const parse = [
    event({ role: 'assistant' }),
    event({}),
    event({ content: '' }, {}, null).replace('"content":""', '"content":null'),
    event({ content: 'x', reasoning: 'y' }),
    event({ tool_calls: [{ index: 0, function: { arguments: '{}' } }] }),
    event({ content: 'x' }, { usage: { prompt_tokens: 1 } }),
    event({ content: 'x' }, { error: { code: 502, message: 'gone' } }),
    JSON.stringify({ choices: [{ index: 0, delta: { content: 'a' } }, { index: 1, delta: { content: 'b' } }] }),
    JSON.stringify({ choices: [{ index: 1, delta: { content: 'b' } }] }),
    '{"choices":[{"index":0,"delta":{"content":"unterminated}]}',
    '{"choices":[{"index":0,"delta":{"content":"bad \\x escape"}}]}',
    ': keep-alive',
    '[DONE]',
  ]
  for (const data of parse) t.equal(contentDelta(data), undefined, data)
  // Words that look like keys inside the text do not confuse it, and do not stop the fast path either.
  t.equal(contentDelta(event({ content: 'the "usage": and "error": fields' }))?.text, 'the "usage": and "error": fields')
  // The scans' anchors elsewhere in the event: a `delta` or a backslash in an earlier or later field, a key like `mirror`.
  const earlier = event({ content: 'x\\y' }, { model: 'delta/delta-1 "q"', mirror: 'a\\b' })
  t.same(contentDelta(earlier), { text: 'x\\y', json: JSON.stringify('x\\y'), finishReason: null })
  t.same(contentDelta(event({ content: 'plain' }, { model: 'a\\"delta":{' })), { text: 'plain', json: '"plain"', finishReason: null })
  t.equal(contentDelta(event({ content: 'x' }, { terror: 1 })), undefined, 'a key ending in error, as before')
  // A choice that finishes with "error" is OpenRouter's report of a failure while generating: the relay judges it on the
  // parsed event, whether or not an error object came with it.
  t.equal(contentDelta(event({ content: '' }, {}, 'error')), undefined, 'a finish with "error" is left to the parse')
  t.equal(contentDelta(event({ role: 'assistant', content: 'last' }, {}, 'error')), undefined, 'with text too')
  t.equal(contentDelta(event({ content: 'an error' }, {}, 'stop'))?.text, 'an error', 'a text ending in error is not one')
})

t.test('choiceDeltaOnly: choice 0 carries a delta and nothing is a usage or an error', async (t) => {
  t.ok(choiceDeltaOnly(event({ content: 'x' })))
  t.ok(choiceDeltaOnly(event({ tool_calls: [{ index: 0, function: { arguments: '{}' } }] })))
  t.ok(choiceDeltaOnly(event({ content: '' }, { model: 'delta', mirror: 1 }, 'stop')))
  t.notOk(choiceDeltaOnly(event({ content: 'x' }, { usage: { prompt_tokens: 1 } })))
  t.notOk(choiceDeltaOnly(event({ content: 'x' }, { error: { code: 502 } })))
  t.notOk(choiceDeltaOnly(JSON.stringify({ id: 'g', choices: [], usage: { prompt_tokens: 1 } })))
  t.notOk(choiceDeltaOnly(JSON.stringify({ id: 'g', choices: [] })))
  t.notOk(choiceDeltaOnly(event({ content: '' }, {}, 'error')), 'a finish with "error", without an error object')
  t.notOk(choiceDeltaOnly(event({ tool_calls: [] }, {}, 'error')))
  t.ok(choiceDeltaOnly(event({ content: 'no error' }, {}, 'stop')))
})

/** What the relay did before: parse, and read the text and whether anything else needs acting on. */
function parsed(data: string): { text: string; plain: boolean; finishReason: string | null } {
  const c = JSON.parse(data) as { choices?: { index?: number; delta?: Record<string, unknown>; finish_reason?: unknown }[]; usage?: unknown; error?: unknown }
  const choice = c.choices?.[0]
  const delta = choice?.delta ?? {}
  const keys = Object.keys(delta).filter((k) => !(k === 'role' && delta.role === 'assistant'))
  const plain = c.usage === undefined && c.error === undefined && choice?.finish_reason !== 'error' && c.choices?.length === 1 && choice?.index === 0 && keys.length === 1 && keys[0] === 'content' && typeof delta.content === 'string'
  return { text: typeof delta.content === 'string' ? delta.content : '', plain, finishReason: typeof choice?.finish_reason === 'string' ? choice.finish_reason : null }
}

t.test('whenever it answers, it agrees with JSON.parse (property)', async (t) => {
  const content = fc.oneof(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'binary' }), fc.constantFrom('"', '\\', '\\"', 'usage":', '"delta":{'))
  const role = fc.constant('assistant')
  const deltaArb = fc.oneof(
    { weight: 3, arbitrary: fc.record({ role, content }, { requiredKeys: ['content'] }) },
    {
      weight: 1,
      arbitrary: fc.record(
        { role, content, reasoning: fc.string(), tool_calls: fc.constant([{ index: 0, function: { arguments: '{}' } }]) },
        { requiredKeys: [] },
      ),
    },
  )
  /** Mostly false: the plain event is the common one, and each of these alone must send it to the parse. */
  const rarely = fc.constantFrom(false, false, false, false, true)
  const eventArb = fc.record({
    delta: deltaArb,
    more: rarely,
    usage: rarely,
    error: rarely,
    finish: fc.constantFrom(null, 'stop', 'length', 'error', 'a"b', 'a\\b', 'stop\u0000'),
    // What the scans look for, elsewhere in the event.
    model: fc.constantFrom('openai/gpt-4o', 'delta/delta-1', 'a\\"b', 'x"delta":{', 'mirror":'),
  }).map(({ delta, more, usage, error, finish, model }) => {
    const choices = [{ index: 0, delta, finish_reason: finish }]
    if (more) choices.push({ index: 1, delta: { content: 'second' }, finish_reason: null })
    const body: Record<string, unknown> = { id: 'gen-1', model, object: 'chat.completion.chunk', choices }
    if (usage) body.usage = { prompt_tokens: 3 }
    if (error) body.error = { code: 502, message: 'x' }
    return JSON.stringify(body)
  })
  let answered = 0
  fc.assert(
    fc.property(eventArb, (data) => {
      const fast = contentDelta(data)
      const slow = parsed(data)
      if (fast === undefined) return
      answered++
      if (!slow.plain) throw new Error(`answered for an event that needs a parse: ${data}`)
      if (fast.text !== slow.text) throw new Error(`text ${JSON.stringify(fast.text)} != ${JSON.stringify(slow.text)}`)
      if (JSON.parse(fast.json) !== slow.text) throw new Error(`json ${fast.json}`)
      if (fast.finishReason !== slow.finishReason) throw new Error(`finishReason ${String(fast.finishReason)} != ${String(slow.finishReason)}`)
    }),
    { numRuns: 2000 },
  )
  // A fast path that never answers would pass the property above: it must answer for a good share of the events.
  t.ok(answered > 100, `answered for ${answered} of 2000 events`)
})
