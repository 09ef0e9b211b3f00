import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { SseParser, SseEventTooLargeError, type SseEvent } from '../src/upstream/sse-parser.js'

const fixture = readFileSync(new URL('./fixtures/openrouter-stream.sse', import.meta.url))
const errorFixture = readFileSync(new URL('./fixtures/openrouter-stream-error.sse', import.meta.url))

interface Outcome {
  events: SseEvent[]
  comments: string[]
  discarded: boolean
}

/** Feed `bytes` cut at `cuts` (sorted offsets) and collect everything the parser reports. */
function run(bytes: Uint8Array, cuts: number[] = [], maxEventBytes = 1 << 20): Outcome {
  const events: SseEvent[] = []
  const comments: string[] = []
  const p = new SseParser({ maxEventBytes, onEvent: (e) => events.push(e), onComment: (c) => comments.push(c) })
  let from = 0
  for (const c of cuts) {
    p.push(bytes.subarray(from, c))
    from = c
  }
  p.push(bytes.subarray(from))
  return { events, comments, discarded: p.end() }
}

const byteByByte = (n: number): number[] => Array.from({ length: n }, (_, i) => i)

/**
 * Independent oracle: the WHATWG algorithm written the obvious way over the whole decoded text. The parser under
 * test must agree with it however the bytes are cut.
 */
function oracle(bytes: Uint8Array): Outcome {
  let text = Buffer.from(bytes).toString('utf8')
  if (text.startsWith('\uFEFF')) text = text.slice(1)
  const lines = text.split(/\r\n|\r|\n/)
  const tail = lines.pop() ?? ''
  const events: SseEvent[] = []
  const comments: string[] = []
  let data: string[] = []
  let type: string | undefined
  let id: string | undefined
  for (const line of lines) {
    if (line === '') {
      if (data.length > 0) {
        const ev: SseEvent = { data: data.join('\n') }
        if (data.length > 1) ev.multiline = true
        if (type !== undefined) ev.event = type
        if (id !== undefined) ev.id = id
        events.push(ev)
      }
      data = []
      type = undefined
      continue
    }
    if (line.startsWith(':')) {
      comments.push(line.slice(1).replace(/^ /, ''))
      continue
    }
    const i = line.indexOf(':')
    const field = i === -1 ? line : line.slice(0, i)
    const value = i === -1 ? '' : line.slice(i + 1).replace(/^ /, '')
    if (field === 'data') data.push(value)
    else if (field === 'event') type = value
    else if (field === 'id' && !value.includes('\0')) id = value
  }
  return { events, comments, discarded: tail !== '' || data.length > 0 || type !== undefined }
}

const crlf = (b: Buffer): Buffer => Buffer.from(b.toString('utf8').replace(/\n/g, '\r\n'))
const crOnly = (b: Buffer): Buffer => Buffer.from(b.toString('utf8').replace(/\n/g, '\r'))

t.test('recorded OpenRouter stream: events, keep-alive comments, usage chunk, [DONE]', async (t) => {
  const out = run(fixture)
  t.same(out, oracle(fixture))
  t.equal(out.comments.length, 3)
  t.ok(out.comments.every((c) => c === 'OPENROUTER PROCESSING'))
  t.equal(out.events.at(-1)?.data, '[DONE]')
  const chunks = out.events.slice(0, -1).map((e) => JSON.parse(e.data) as { choices: unknown[]; usage?: unknown })
  t.equal(chunks.at(-1)?.choices.length, 0, 'usage-only chunk has choices: []')
  t.ok(chunks.at(-1)?.usage)
  const text = chunks
    .flatMap((c) => c.choices as Array<{ delta: { content?: string } }>)
    .map((c) => c.delta.content ?? '')
    .join('')
  t.match(text, /café culture: 日本語のコーヒー文化 ☕ and a smile 🙂\./)
  t.equal(out.discarded, false)
})

for (const [name, bytes] of [
  ['LF', fixture],
  ['CRLF', crlf(fixture)],
  ['CR', crOnly(fixture)],
  ['mid-stream error', errorFixture],
  ['mid-stream error CRLF', crlf(errorFixture)],
] as const) {
  t.test(`${name}: split at every byte position and byte by byte gives identical output`, async (t) => {
    const whole = run(bytes)
    t.same(whole, oracle(bytes))
    let mismatches = 0
    for (let i = 0; i <= bytes.length; i++) {
      if (JSON.stringify(run(bytes, [i])) !== JSON.stringify(whole)) mismatches++
    }
    t.equal(mismatches, 0, 'two-piece splits')
    t.same(run(bytes, byteByByte(bytes.length)), whole, 'one byte per push')
  })
}

t.test('mid-stream error event arrives as data with a top-level error and no [DONE]', async (t) => {
  const { events, discarded } = run(errorFixture, byteByByte(errorFixture.length))
  const last = JSON.parse(events.at(-1)?.data ?? '{}') as { error?: { code: number }; choices: unknown[] }
  t.equal(last.error?.code, 502)
  t.notOk(events.some((e) => e.data === '[DONE]'))
  t.equal(discarded, false)
})

t.test('field rules', async (t) => {
  const cases: Array<[string, string, SseEvent[], string[]]> = [
    ['multi-line data joined with \\n', 'data: a\ndata:b\ndata:  c\n\n', [{ data: 'a\nb\n c', multiline: true }], []],
    ['field without colon is a field with empty value', 'data\ndata\n\n', [{ data: '\n', multiline: true }], []],
    ['empty data still dispatches', 'data:\n\n', [{ data: '' }], []],
    ['event and id', 'event: delta\nid: 7\ndata: x\n\n', [{ data: 'x', event: 'delta', id: '7' }], []],
    ['id persists, event does not', 'event: e\nid: 1\ndata: a\n\ndata: b\n\n', [
      { data: 'a', event: 'e', id: '1' },
      { data: 'b', id: '1' },
    ], []],
    ['id with NUL is ignored', 'id: a\0b\ndata: x\n\n', [{ data: 'x' }], []],
    ['unknown fields and retry ignored', 'foo: bar\nretry: 10\nDATA: no\ndata: yes\n\n', [{ data: 'yes' }], []],
    ['event without data is not dispatched', 'event: ping\n\ndata: x\n\n', [{ data: 'x' }], []],
    ['comments with and without space', ':a\n: b\n:  c\n:\n', [], ['a', 'b', ' c', '']],
    ['colon inside value kept', 'data: {"a":"b: c"}\n\n', [{ data: '{"a":"b: c"}' }], []],
    ['BOM at stream start skipped', '\uFEFFdata: x\n\n', [{ data: 'x' }], []],
    ['a first byte like the BOM’s but no BOM', '\uFF71\ndata: x\n\n', [{ data: 'x' }], []],
    ['BOM not at start is kept as field text', 'data: a\n\n\uFEFFdata: b\n\n', [{ data: 'a' }], []],
  ]
  for (const [name, input, events, comments] of cases) {
    const bytes = Buffer.from(input)
    const expected = { events, comments, discarded: false }
    t.same(run(bytes), expected, name)
    t.same(run(bytes, byteByByte(bytes.length)), expected, `${name} (byte by byte)`)
    t.same(oracle(bytes), expected, `${name} (oracle agrees)`)
  }
})

t.test('end() reports a discarded partial event', async (t) => {
  t.equal(run(Buffer.from('data: x\n\n')).discarded, false)
  t.equal(run(Buffer.from('data: x\n')).discarded, true, 'fields without the blank line')
  t.equal(run(Buffer.from('data: x')).discarded, true, 'incomplete line')
  t.equal(run(Buffer.from('data: x\n\ndata: y\r')).events.length, 1)
  t.equal(run(Buffer.from(': keep-alive\n')).discarded, false, 'a complete comment is not an event')
  t.equal(run(Buffer.from('\uFEFF')).discarded, false, 'a lone BOM is no partial event')
  t.equal(run(Buffer.from('\uFF71'), [1, 2]).discarded, true, 'bytes that only began like a BOM are')
})

t.test('CR at the end of one chunk and LF at the start of the next is one line ending', async (t) => {
  // Were the LF taken for a second line ending, it would end the event after its first line.
  const bytes = Buffer.from('event: e\r\ndata: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n')
  const expected = [{ data: 'a\nb', multiline: true, event: 'e' }, { data: 'c' }]
  let bad = 0
  for (let i = 0; i <= bytes.length; i++) {
    for (let j = i; j <= bytes.length; j++) {
      if (JSON.stringify(run(bytes, [i, j]).events) !== JSON.stringify(expected)) bad++
    }
  }
  t.equal(bad, 0, 'every pair of cut points')
  // An empty push between CR and LF must not lose the pending CR.
  t.same(run(bytes, [9, 9, 9]).events, expected)
})

t.test('multi-byte characters split at any byte are decoded whole', async (t) => {
  const text = 'é日本🙂👩‍👩‍👧𝄞'
  const bytes = Buffer.from(`: ${text}\ndata: ${text}\n\n`)
  for (let i = 0; i <= bytes.length; i++) {
    for (const cuts of [[i], [i, Math.min(bytes.length, i + 1)], [i, Math.min(bytes.length, i + 2)]]) {
      const out = run(bytes, cuts)
      if (out.events[0]?.data !== text || out.comments[0] !== text) {
        t.fail(`broken at cuts ${cuts.join(',')}`)
        return
      }
    }
  }
  t.pass('all splits decode intact')
})

t.test('event size cap', async (t) => {
  const big = Buffer.from(`data: ${'x'.repeat(100)}\n\n`)
  t.same(run(big, [], 106).events.length, 1, 'a 106-byte line fits a 106-byte cap')
  t.throws(() => run(big, [], 105), SseEventTooLargeError)
  t.throws(() => run(big, byteByByte(big.length), 105), SseEventTooLargeError, 'thrown while still incomplete too')

  const multi = Buffer.from('data: 12345\ndata: 12345\n\n') // two 11-byte data lines
  t.same(run(multi, [], 22).events, [{ data: '12345\n12345', multiline: true }])
  t.throws(() => run(multi, byteByByte(multi.length), 21), SseEventTooLargeError, 'counted across data lines')

  const many = Buffer.from('data: 12345\n\n'.repeat(1000))
  t.equal(run(many, byteByByte(many.length), 11).events.length, 1000, 'the budget is per event')

  const comment = Buffer.from(`: ${'c'.repeat(200)}\n`)
  t.throws(() => run(comment, [50], 100), SseEventTooLargeError, 'an endless comment line is refused')

  const p = new SseParser({ maxEventBytes: 4, onEvent: () => {} })
  t.throws(() => p.push(Buffer.from('data: toolong')), SseEventTooLargeError)
  t.throws(() => p.push(Buffer.from('\n\n')), SseEventTooLargeError, 'stays failed')
  t.throws(() => new SseParser({ maxEventBytes: 0, onEvent: () => {} }), RangeError)
})

t.test('linear in the size of one event however it is chunked', async (t) => {
  // A quadratic re-scan of the retained buffer would touch ~16 GB here (2 MiB pushed 64 bytes at a time);
  // the linear parser touches each byte a few times.
  const payload = 'y'.repeat(2 << 20)
  const bytes = Buffer.from(`data: ${payload}\n\n`)
  const cuts: number[] = []
  for (let i = 64; i < bytes.length; i += 64) cuts.push(i)
  const started = performance.now()
  const out = run(bytes, cuts, 4 << 20)
  const elapsed = performance.now() - started
  t.equal(out.events[0]?.data.length, payload.length)
  t.ok(elapsed < 2000, `took ${elapsed.toFixed(0)} ms`)
})

t.test('property: any chunking of any stream agrees with the oracle', async (t) => {
  const value = fc.string({ unit: fc.constantFrom('a', ' ', ':', 'é', '日', '🙂', '{', '"', '\0'), maxLength: 12 })
  const line = fc.oneof(
    value.map((v) => `data: ${v}`),
    value.map((v) => `data:${v}`),
    value.map((v) => `: ${v}`),
    value.map((v) => `event: ${v}`),
    value.map((v) => `id: ${v}`),
    value.map((v) => `retry: ${v}`),
    fc.constant(''),
    fc.constant('data'),
  )
  const stream = fc
    .tuple(
      fc.boolean(),
      fc.array(fc.tuple(line, fc.constantFrom('\n', '\r', '\r\n')), { maxLength: 25 }),
      fc.constantFrom('', 'data: tail', '\r'),
    )
    .map(([bom, lines, tail]) =>
      Buffer.from((bom ? '\uFEFF' : '') + lines.map(([l, nl]) => l + nl).join('') + tail),
    )
  const streamWithCuts = stream.chain((bytes) =>
    fc.tuple(
      fc.constant(bytes),
      fc.uniqueArray(fc.integer({ min: 0, max: bytes.length }), { maxLength: 12 }).map((c) => c.sort((a, b) => a - b)),
    ),
  )
  fc.assert(
    fc.property(streamWithCuts, ([bytes, cuts]) => {
      assert.deepStrictEqual(run(bytes, cuts), oracle(bytes))
    }),
    { numRuns: 500 },
  )
  t.pass('500 random streams and chunkings agree with the oracle')
})
