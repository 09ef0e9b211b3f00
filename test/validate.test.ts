import t from 'tap'
import { validateChat } from '../src/chat/validate.js'

const limits = { maxMessages: 5, maxSessionIdLength: 16 }
const ok = { model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }] }

t.test('a minimal body gets the defaults', async (t) => {
  const r = validateChat({ ...ok }, limits)
  t.equal(r.stream, false)
  t.equal(r.saveToMemory, true)
  t.equal(r.useRAG, true)
  t.equal(r.sessionId, undefined)
  t.equal(r.includeUsage, false)
})

t.test('extensions are stripped, everything else passes through unchanged', async (t) => {
  const body = {
    ...ok,
    sessionId: 's-1',
    saveToMemory: false,
    useRAG: false,
    ragQuery: 'q',
    temperature: 0.3,
    provider: { order: ['openai'] },
    transforms: ['middle-out'],
    stream_options: { include_usage: true },
  }
  const r = validateChat(body, limits)
  t.same(Object.keys(r.passthrough).sort(), ['messages', 'model', 'provider', 'stream_options', 'temperature', 'transforms'])
  t.same(r.passthrough.provider, { order: ['openai'] })
  t.equal(r.includeUsage, true)
  t.equal(r.sessionId, 's-1')
  t.equal(r.ragQuery, 'q')
})

const bad: Array<[string, Record<string, unknown>, string]> = [
  ['missing model', { messages: ok.messages }, 'model'],
  ['model without vendor', { ...ok, model: 'gpt-4o' }, 'model'],
  ['model not a string', { ...ok, model: 7 }, 'model'],
  ['missing messages', { model: ok.model }, 'messages'],
  ['empty messages', { ...ok, messages: [] }, 'messages'],
  ['too many messages', { ...ok, messages: Array(6).fill(ok.messages[0]) }, 'messages'],
  ['message not an object', { ...ok, messages: ['hi'] }, 'messages[0]'],
  ['bad role', { ...ok, messages: [{ role: 'robot', content: 'x' }] }, 'messages[0].role'],
  ['non-string content', { ...ok, messages: [{ role: 'user', content: 'a' }, { role: 'user', content: [1] }] }, 'messages[1].content'],
  ['temperature too high', { ...ok, temperature: 2.5 }, 'temperature'],
  ['temperature a string', { ...ok, temperature: '1' }, 'temperature'],
  ['top_p above 1', { ...ok, top_p: 1.1 }, 'top_p'],
  ['max_tokens zero', { ...ok, max_tokens: 0 }, 'max_tokens'],
  ['max_tokens fractional', { ...ok, max_tokens: 1.5 }, 'max_tokens'],
  // Both go upstream as they came, so each is checked, not only the one that sets the reply reserve.
  ['max_tokens invalid beside a valid max_completion_tokens', { ...ok, max_completion_tokens: 100, max_tokens: -5 }, 'max_tokens'],
  ['max_completion_tokens zero', { ...ok, max_completion_tokens: 0 }, 'max_completion_tokens'],
  ['stream not boolean', { ...ok, stream: 'yes' }, 'stream'],
  ['saveToMemory not boolean', { ...ok, saveToMemory: 1 }, 'saveToMemory'],
  ['useRAG not boolean', { ...ok, useRAG: 'false' }, 'useRAG'],
  ['sessionId empty', { ...ok, sessionId: '' }, 'sessionId'],
  ['sessionId a number', { ...ok, sessionId: 42 }, 'sessionId'],
  ['sessionId too long', { ...ok, sessionId: 'x'.repeat(17) }, 'sessionId'],
  ['sessionId lone surrogate', { ...ok, sessionId: 'a\ud800' }, 'sessionId'],
  ['ragQuery not a string', { ...ok, ragQuery: {} }, 'ragQuery'],
  ['stream_options not an object', { ...ok, stream_options: true }, 'stream_options'],
]
for (const [name, body, param] of bad) {
  t.test(`400 names the field: ${name}`, async (t) => {
    t.throws(() => validateChat(body, limits), { code: /^(invalid|missing)_parameter$/, status: 400, param })
  })
}

t.test('vendor/model forms seen on OpenRouter are accepted', async (t) => {
  for (const model of ['openai/gpt-4o', 'meta-llama/llama-3.1-8b-instruct:free', 'anthropic/claude-3.5-sonnet', 'x-ai/grok-2']) {
    t.equal(validateChat({ ...ok, model }, limits).model, model)
  }
})
