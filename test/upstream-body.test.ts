import fc from 'fast-check'
import './helpers/fc-seed.js'
import { isDeepStrictEqual } from 'node:util'
import t from 'tap'
import { messageJson, upstreamBody } from '../src/chat/upstream-body.js'

const upstreamBodyJson = (f: Readonly<Record<string, unknown>>, messages: Parameters<typeof upstreamBody>[1]): string => upstreamBody(f, messages).json
import type { ChatMessage, Role } from '../src/types.js'

const role = fc.constantFrom<Role>('system', 'user', 'assistant')
const text = fc.oneof(fc.string(), fc.string({ unit: 'grapheme' }), fc.constantFrom('"', '\\', '\u2028', '\u0000', '</script>', '\ud800'))
const message = fc.record({ role, content: text })
const value = fc.jsonValue({ maxDepth: 2 })
const fields = fc.dictionary(fc.oneof(fc.string(), fc.constantFrom('__proto__', 'messages', 'model', 'stream_options')), value, { maxKeys: 6 })

t.test('the body is the same JSON value as stringifying the fields with the packed messages', async (t) => {
  fc.assert(
    fc.property(fields, fc.array(fc.tuple(message, fc.boolean()), { maxLength: 8 }), (f, list) => {
      // Some messages frozen (history, whose JSON is remembered), some not (the request's own).
      const messages = list.map(([m, frozen]) => (frozen ? Object.freeze({ ...m }) : { ...m }))
      const expected = JSON.parse(JSON.stringify({ ...f, messages })) as unknown
      // Twice: the second time the frozen messages' JSON comes from memory.
      return isDeepStrictEqual(JSON.parse(upstreamBodyJson(f, messages)), expected) && isDeepStrictEqual(JSON.parse(upstreamBodyJson(f, messages)), expected)
    }),
    { numRuns: 300, seed: 20261121 },
  )
  t.pass('holds for 300 runs')
})

t.test('a message is sent whole, fields we do not know included, and a frozen one keeps its JSON', async (t) => {
  const call = { id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }
  const m = Object.freeze({ role: 'assistant' as const, content: null, tool_calls: [call], reasoning_details: [{ type: 'x' }] })
  const want = { role: 'assistant', content: null, tool_calls: [call], reasoning_details: [{ type: 'x' }] }
  t.same(JSON.parse(messageJson(m)), want)
  t.equal(messageJson(m), messageJson(m), 'the same text the second time')
})

t.test('an unfrozen message is serialised as it is now, not as it was', async (t) => {
  const m: { role: 'user'; content: string } = { role: 'user', content: 'first' }
  t.equal(JSON.parse(upstreamBodyJson({}, [m])).messages[0].content, 'first')
  m.content = 'second'
  t.equal(JSON.parse(upstreamBodyJson({}, [m])).messages[0].content, 'second')
})

t.test('a __proto__ field reaches the upstream as a field', async (t) => {
  const f = JSON.parse('{"model":"openai/gpt-4o","__proto__":{"x":1}}') as Record<string, unknown>
  const body = upstreamBodyJson(f, [{ role: 'user', content: 'q' }])
  t.match(body, /"__proto__":\{"x":1\}/)
  t.same(Object.keys(JSON.parse(body) as object).sort(), ['__proto__', 'messages', 'model'])
})
