/**
 * Bad input, thrown by the thousand: property tests (fast-check) against one keep-alive gateway. Whatever the body —
 * wrong types, missing fields, huge or hostile strings (special tokens, lone surrogates, invalid UTF-8), deep nesting,
 * `__proto__` keys, truncated JSON, wrong content types, broken multipart — the answer is never a 5xx, always carries
 * an x-request-id, and every error is OpenAI's `{error:{message,type,param,code}}` with `param` naming the field at
 * fault. Then each configured limit, one by one, with its 4xx.
 *
 * Seeds are fixed so CI is deterministic; FUZZ_SEED=<n> explores others, FUZZ_RUNS=<n> scales every property.
 */
import t, { type Test } from 'tap'
import fc from 'fast-check'
import { request } from 'node:http'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { KEY_A, startHarness, type Harness } from './helpers/harness.js'

const SEED = Number(process.env.FUZZ_SEED ?? 20261121)
const SCALE = Number(process.env.FUZZ_RUNS ?? 1)

/** Run a property `numRuns` times (× FUZZ_RUNS) as one assertion; a failure reports the shrunk counterexample. */
async function holds<Ts extends [unknown, ...unknown[]]>(t: Test, property: fc.IAsyncProperty<Ts>, numRuns: number): Promise<void> {
  const n = Math.max(1, Math.round(numRuns * SCALE))
  const details = await fc.check(property, { seed: SEED, numRuns: n, endOnFailure: true })
  if (details.failed) t.fail((await fc.asyncDefaultReportMessage(details)) ?? 'property failed')
  else t.pass(`holds for ${n} runs`)
}

const SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>', '<|endofprompt|>', '<|start|>', '<|message|>']
const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c))
const nastyUnit = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: fc.constantFrom(...SPECIAL_TOKENS) },
  { weight: 1, arbitrary: loneSurrogate },
  { weight: 1, arbitrary: fc.constantFrom('\u0000', '\n', '\r\n', '```', '"', '\\', '\u2028', '\ufeff', '__proto__', 'data: [DONE]\n\n') },
)
const nastyText = fc.oneof(
  { weight: 12, arbitrary: fc.string({ unit: nastyUnit, maxLength: 40 }) },
  // Huge, but broken into words: one long unbroken run is the quadratic-tokenizer case, tested on its own below.
  { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 10_000, max: 120_000 }), fc.constantFrom('é ', '<|endoftext|>', 'lorem ipsum ', '0123456789', '🙂 ')).map(([n, s]) => s.repeat(Math.ceil(n / s.length))) },
)
/** File content: ingestion costs ~1 ms per KB, so huge texts are kept to a few. */
const fileText = fc.oneof(
  { weight: 20, arbitrary: fc.string({ unit: nastyUnit, maxLength: 60 }) },
  { weight: 1, arbitrary: fc.constantFrom('a ', 'é ', '<|endoftext|> ', '🙂 ', '``` ').map((s) => s.repeat(Math.ceil(8000 / s.length))) },
)
/** Any JSON value but the ones a field accepts: callers filter. */
// NaN and ±Infinity serialise as null, which would turn a wrong value into an omitted one.
const finite = fc.double({ noNaN: true, noDefaultInfinity: true })
const anyJson = fc.oneof(fc.integer(), finite, fc.boolean(), fc.constant(null), nastyText, fc.array(fc.integer(), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }))
const notString = anyJson.filter((v) => typeof v !== 'string')
const notBoolean = anyJson.filter((v) => typeof v !== 'boolean' && v !== null)
const protoKeys = fc.dictionary(fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty'), anyJson, { maxKeys: 3 })

interface Case {
  body: Record<string, unknown>
  /** The field a 400 must name; undefined when the body is valid or when several outcomes are fine. */
  param?: string
}

const CHAT_BASE = { model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }], useRAG: false, saveToMemory: false }
const validMessage = fc.record({ role: fc.constantFrom('system', 'user', 'assistant'), content: nastyText })
const set = (field: string, value: unknown): Record<string, unknown> => ({ ...CHAT_BASE, [field]: value })

/** One field of a valid chat body made wrong (or removed), with the param the 400 must name. */
const chatCorruption: fc.Arbitrary<Case> = fc.oneof(
  fc.constant<Case>({ body: { messages: CHAT_BASE.messages }, param: 'model' }),
  fc.constant<Case>({ body: { model: CHAT_BASE.model }, param: 'messages' }),
  notString.map((v) => ({ body: set('model', v), param: 'model' })),
  fc.oneof(nastyText.filter((s) => !/^[A-Za-z0-9][\w.-]*\/[^\s/]\S*$/.test(s)), fc.constant(`a/${'b'.repeat(300)}`)).map((v) => ({ body: set('model', v), param: 'model' })),
  fc.oneof(notString.filter((v) => !Array.isArray(v)), nastyText, fc.constant([])).map((v) => ({ body: set('messages', v), param: 'messages' })),
  fc.tuple(fc.array(validMessage, { maxLength: 3 }), notString.filter((v) => v === null || typeof v !== 'object' || Array.isArray(v))).map(([ok, bad]) => ({
    body: set('messages', [...ok, bad]),
    param: `messages[${ok.length}]`,
  })),
  fc.tuple(fc.array(validMessage, { maxLength: 3 }), anyJson.filter((r) => typeof r !== 'string' || !['developer', 'system', 'user', 'assistant', 'tool', 'function'].includes(r)), protoKeys).map(([ok, role, extra]) => ({
    body: set('messages', [...ok, { ...extra, role, content: 'x' }]),
    param: `messages[${ok.length}].role`,
  })),
  fc.tuple(fc.array(validMessage, { maxLength: 3 }), fc.option(notString.filter((v) => !Array.isArray(v)), { nil: undefined })).map(([ok, content]) => ({
    body: set('messages', [...ok, content === undefined ? { role: 'user' } : { role: 'user', content }]),
    param: `messages[${ok.length}].content`,
  })),
  // An array content is checked part by part: the first bad part is named.
  fc.tuple(fc.array(validMessage, { maxLength: 3 }), notString.filter((v) => v === null || typeof v !== 'object' || Array.isArray(v))).map(([ok, part]) => ({
    body: set('messages', [...ok, { role: 'user', content: [{ type: 'text', text: 'fine' }, part] }]),
    param: `messages[${ok.length}].content[1]`,
  })),
  fc.oneof(notString.filter((v) => v !== null && typeof v !== 'number'), finite.filter((d) => !(d >= 0 && d <= 2))).map((v) => ({ body: set('temperature', v), param: 'temperature' })),
  fc.oneof(notString.filter((v) => v !== null && typeof v !== 'number'), finite.filter((d) => !(d >= 0 && d <= 1))).map((v) => ({ body: set('top_p', v), param: 'top_p' })),
  fc.oneof(anyJson.filter((v) => v !== null && !(Number.isSafeInteger(v) && (v as number) >= 1))).map((v) => ({ body: set('max_tokens', v), param: 'max_tokens' })),
  fc.tuple(fc.constantFrom('stream', 'saveToMemory', 'useRAG'), notBoolean).map(([f, v]) => ({ body: set(f, v), param: f })),
  fc.oneof(notString.filter((v) => v !== null), fc.constant(''), fc.constant('s'.repeat(257)), loneSurrogate.map((s) => `id${s}`), fc.constantFrom('a\u0000b', 'tab\there')).map((v) => ({
    body: set('sessionId', v),
    param: 'sessionId',
  })),
  notString.filter((v) => v !== null).map((v) => ({ body: set('ragQuery', v), param: 'ragQuery' })),
  anyJson.filter((v) => v !== null && (typeof v !== 'object' || Array.isArray(v))).map((v) => ({ body: set('stream_options', v), param: 'stream_options' })),
)

/** Valid bodies full of hostile text in every free-text position: must succeed, or refuse only the session id. */
const chatHostile = fc.record({
  model: fc.constantFrom('openai/gpt-4o', 'anthropic/claude-3.5-sonnet', 'unknown-vendor/some:model'),
  messages: fc.array(validMessage, { minLength: 1, maxLength: 4 }),
  stream: fc.boolean(),
  sessionId: fc.option(fc.string({ unit: nastyUnit, minLength: 1, maxLength: 12 }), { nil: undefined }),
  saveToMemory: fc.boolean(),
  useRAG: fc.boolean(),
  ragQuery: fc.option(nastyText, { nil: undefined }),
  extra: protoKeys,
})

interface Checked {
  status: number
  body: unknown
  text: string
}

/** The invariants every answer keeps; returns the parsed body. Throws (failing the property) on a violation. */
async function clean(res: Response, o: { param?: string | null; ok?: boolean; statuses?: number[] } = {}): Promise<Checked> {
  const text = await res.text()
  const where = `${res.status} ${text.slice(0, 300)}`
  if (res.status >= 500) throw new Error(`5xx: ${where}`)
  if (!res.headers.get('x-request-id')) throw new Error(`no x-request-id: ${where}`)
  if (o.statuses && !o.statuses.includes(res.status)) throw new Error(`expected one of ${o.statuses.join(', ')}: ${where}`)
  if (res.status < 400) {
    if (o.ok === false) throw new Error(`expected an error: ${where}`)
    const isSse = res.headers.get('content-type')?.startsWith('text/event-stream')
    if (isSse && !text.endsWith('data: [DONE]\n\n')) throw new Error(`stream did not end with [DONE]: ${text.slice(-300)}`)
    return { status: res.status, body: isSse ? text : text === '' ? undefined : JSON.parse(text), text }
  }
  const body = JSON.parse(text) as { error?: Record<string, unknown> }
  const e = body.error
  const keys = e && typeof e === 'object' ? Object.keys(e).sort().join(',') : ''
  if (keys !== 'code,message,param,type') throw new Error(`not the OpenAI error shape: ${where}`)
  if (typeof e?.message !== 'string' || e.message === '' || typeof e.type !== 'string') throw new Error(`bad message/type: ${where}`)
  if (!(e.param === null || typeof e.param === 'string') || !(e.code === null || typeof e.code === 'string')) throw new Error(`bad param/code: ${where}`)
  if (o.param !== undefined && e.param !== o.param) throw new Error(`param should be ${String(o.param)}: ${where}`)
  return { status: res.status, body, text }
}

const json = (h: Harness, path: string, body: unknown, init: { method?: string; type?: string } = {}) =>
  h.fetch(path, { method: init.method ?? 'POST', headers: { 'content-type': init.type ?? 'application/json' }, body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body) })

t.test('properties over one gateway', async (t) => {
  const h = await startHarness(t)
  const chat = '/api/v1/chat/completions'
  // Something to retrieve, so RAG runs on the hostile queries.
  t.equal((await json(h, '/api/v1/files', { filename: 'seed.md', content: '# Seed\n\nThe otter <|endoftext|> swims.' })).status, 201)

  t.test('chat: one corrupted or missing field → 400 naming it', async (t) => {
    await holds(t, fc.asyncProperty(chatCorruption, async (c) => void (await clean(await json(h, chat, c.body), { param: c.param ?? null, statuses: [400] }))), 600)
    t.equal(h.mock.requests.filter((r) => r.path.endsWith('/chat/completions')).length, 0, 'nothing invalid reached the upstream')
  })

  t.test('chat: hostile text in valid bodies (special tokens, lone surrogates, huge) → 200, or 400 for the session id', async (t) => {
    await holds(t,
      fc.asyncProperty(chatHostile, async ({ extra, ...b }) => {
        const r = await clean(await json(h, chat, { ...extra, ...b }))
        const e = (r.body as { error?: { param: string; code: string } }).error
        if (r.status === 400 && e?.param !== 'sessionId' && e?.code !== 'context_length_exceeded') throw new Error(`unexpected 400: ${r.text.slice(0, 300)}`)
        if (r.status === 200 && b.sessionId !== undefined && b.saveToMemory) {
          await clean(await h.fetch(`/api/v1/sessions/${encodeURIComponent(b.sessionId)}`), { statuses: [200] })
        }
      }),
      300,
    )
  })

  t.test('chat: truncated JSON, invalid UTF-8, random bytes, deep nesting, wrong content types', async (t) => {
    const valid = JSON.stringify({ ...CHAT_BASE, messages: [{ role: 'user', content: 'héllo <|endoftext|> wörld' }] })
    await holds(t,
      fc.asyncProperty(fc.integer({ min: 0, max: valid.length - 1 }), async (cut) => void (await clean(await json(h, chat, valid.slice(0, cut)), { param: null, statuses: [400] }))),
      150,
    )
    const bytes = Buffer.from(valid)
    const badUtf8 = fc.constantFrom([0xff], [0xfe, 0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0xc0, 0xaf])
    await holds(t,
      fc.asyncProperty(fc.integer({ min: 0, max: bytes.length }), badUtf8, async (at, junk) => {
        const body = Buffer.concat([bytes.subarray(0, at), Buffer.from(junk), bytes.subarray(at)])
        await clean(await json(h, chat, body))
      }),
      150,
    )
    await holds(t, fc.asyncProperty(fc.uint8Array({ maxLength: 256 }), async (b) => void (await clean(await json(h, chat, b), { ok: false }))), 100)
    await holds(t,
      fc.asyncProperty(fc.integer({ min: 1, max: 4000 }), fc.constantFrom('[', '{"a":'), async (depth, open) => {
        const close = open === '[' ? ']' : '}'
        const body = `{"model":"openai/gpt-4o","messages":[{"role":"user","content":"x"}],"useRAG":false,"x":${open.repeat(depth)}${open === '[' ? '' : '1'}${close.repeat(depth)}}`
        // The body object is level 1, so `x` may nest 127 more.
        await clean(await json(h, chat, body), depth <= 127 ? { statuses: [200] } : { statuses: [400], param: null })
      }),
      60,
    )
    const types = fc.oneof(
      fc.constantFrom('text/plain', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', 'application/jsonx', 'json', ';;;', 'application/', '*/*'),
      fc.constantFrom('application/json; charset=utf-8', 'APPLICATION/JSON', 'application/vnd.api+json', ' application/json ;x=1'),
      fc.stringMatching(/^[\x21-\x7e]{0,30}$/),
    )
    await holds(t,
      fc.asyncProperty(types, async (type) => {
        const m = type.split(';', 1)[0]?.trim().toLowerCase() ?? ''
        const isJson = m === 'application/json' || (m.startsWith('application/') && m.endsWith('+json'))
        await clean(await json(h, chat, valid, { type }), isJson ? { statuses: [200] } : { statuses: [415] })
      }),
      100,
    )
  })

  t.test('files (JSON): corrupted fields → 400 naming them; hostile content → 201 or a 4xx', async (t) => {
    const base = { filename: 'notes.txt', content: 'plain text' }
    const corrupted: fc.Arbitrary<Case> = fc.oneof(
      fc.oneof(notString, fc.constant(''), fc.constant('   '), fc.constant('n'.repeat(256)), loneSurrogate.map((s) => `a${s}.txt`)).map((v) => ({ body: { ...base, filename: v }, param: 'filename' })),
      fc.constant<Case>({ body: { content: 'x' }, param: 'filename' }),
      fc.oneof(notString, fc.constant(undefined)).map((v) => ({ body: { ...base, content: v }, param: 'content' })),
      fc.oneof(notString.filter((v) => v !== null && (typeof v !== 'object' || Array.isArray(v))), fc.constantFrom('[1,2', '{"a":', '"str"', '[]', `{"a":${'['.repeat(200)}`)).map((v) => ({
        body: { ...base, metadata: v },
        param: 'metadata',
      })),
    )
    await holds(t, fc.asyncProperty(corrupted, async (c) => void (await clean(await json(h, '/api/v1/files', c.body), { param: c.param ?? null, statuses: [400] }))), 300)
    const ext = fc.constantFrom('.txt', '.md', '.html', '.csv', '.json', '.pdf', '', '.bin', '.TXT')
    await holds(t,
      fc.asyncProperty(fc.string({ unit: nastyUnit, minLength: 1, maxLength: 20 }), ext, fileText, protoKeys, async (name, e, content, metadata) => {
        const r = await clean(await json(h, '/api/v1/files', { filename: `${name}${e}`, content, metadata }))
        if (r.status !== 201 && ![400, 413, 415].includes(r.status)) throw new Error(`unexpected ${r.status}: ${r.text.slice(0, 200)}`)
      }),
      150,
    )
  })

  t.test('files (multipart): random, truncated and mislabelled forms', async (t) => {
    const part = fc.record({
      name: fc.constantFrom('file', 'metadata', 'other', '', 'fi"le'),
      filename: fc.option(fc.string({ unit: nastyUnit, maxLength: 12 }), { nil: undefined }),
      type: fc.option(fc.constantFrom('text/plain', 'application/pdf', 'application/json', 'image/png', 'text/html', '', 'x'), { nil: undefined }),
      body: fc.oneof(fileText, fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b).toString('latin1')), fc.constantFrom('%PDF-1.4\n1 0 obj', '{"a": [1, {"b": 2}]}', 'a,b\n1,2', '<p>hi</p>')),
    })
    const form = fc.record({
      boundary: fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/),
      quoted: fc.boolean(),
      // Mostly the right boundary (a wrong one just means "no parts"), sometimes another.
      declared: fc.oneof({ weight: 9, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9-]{0,20}$/) }),
      parts: fc.array(part, { maxLength: 4 }),
      // Often cut short, anywhere: in a part's headers, in the middle of a file's bytes, before the final boundary.
      cut: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined, freq: 2 }),
      closed: fc.oneof({ weight: 4, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
    })
    await holds(t,
      fc.asyncProperty(form, async (f) => {
        const b = f.boundary
        let text = ''
        for (const p of f.parts) {
          const fn = p.filename === undefined ? '' : `; filename="${p.filename.replace(/["\r\n]/g, '_')}"`
          text += `--${b}\r\nContent-Disposition: form-data; name="${p.name}"${fn}\r\n${p.type === undefined ? '' : `Content-Type: ${p.type}\r\n`}\r\n${p.body}\r\n`
        }
        if (f.closed) text += `--${b}--\r\n`
        let bytes = Buffer.from(text, 'utf8')
        if (f.cut !== undefined) bytes = bytes.subarray(0, Math.floor(bytes.length * f.cut))
        const declared = f.declared ?? b
        const type = `multipart/form-data; boundary=${f.quoted ? `"${declared}"` : declared}`
        const r = await clean(await json(h, '/api/v1/files', bytes, { type }))
        if (r.status !== 201 && ![400, 413, 415].includes(r.status)) throw new Error(`unexpected ${r.status}: ${r.text.slice(0, 200)}`)
      }),
      300,
    )
  })

  t.test('sessions, file ids and search: hostile ids, queries and bodies', async (t) => {
    // Path segments as raw percent-escapes, including ones that decode to nothing valid (%ED%A0%80 = a lone surrogate).
    const seg = fc.array(
      fc.oneof(fc.stringMatching(/^[A-Za-z0-9._~-]$/), fc.integer({ min: 0, max: 255 }).map((n) => `%${n.toString(16).padStart(2, '0').toUpperCase()}`), fc.constantFrom('%', '%G1', '%ED%A0%80', '%00', '%2F', '..')),
      { minLength: 1, maxLength: 40 },
    ).map((a) => a.join(''))
    const longSeg = fc.integer({ min: 200, max: 3000 }).map((n) => 'x'.repeat(n))
    await holds(t,
      fc.asyncProperty(fc.oneof(seg, longSeg), fc.constantFrom('GET', 'DELETE', 'POST'), fc.constantFrom('sessions', 'files'), async (id, method, kind) => {
        await clean(await h.fetch(`/api/v1/${kind}/${id}`, { method }), { statuses: [200, 400, 404, 405, 415] })
      }),
      300,
    )
    const query = fc.record({ limit: fc.option(fc.oneof(fc.integer({ min: -5, max: 200 }).map(String), fc.string({ maxLength: 6 })), { nil: undefined }), after: fc.option(fc.oneof(fc.string({ unit: nastyUnit, maxLength: 20 }), longSeg), { nil: undefined }) })
    await holds(t,
      fc.asyncProperty(query, async (q) => {
        const qs = new URLSearchParams()
        if (q.limit !== undefined) qs.set('limit', q.limit)
        // URLSearchParams cannot carry a lone surrogate; the gateway would see U+FFFD, so send that.
        if (q.after !== undefined) qs.set('after', q.after.replace(/\p{Surrogate}/gu, '\ufffd'))
        await clean(await h.fetch(`/api/v1/sessions?${qs}`), { statuses: [200, 400] })
      }),
      150,
    )
    const search = fc.oneof(
      fc.record({ query: nastyText.filter((q) => q.trim() !== ''), k: fc.option(fc.integer({ min: 1, max: 100 }), { nil: undefined }) }).map((b) => ({ body: b as Record<string, unknown>, param: undefined })),
      fc.oneof(notString, fc.constant('  ')).map((q) => ({ body: { query: q } as Record<string, unknown>, param: 'query' })),
      anyJson.filter((k) => k !== null && !(Number.isInteger(k) && (k as number) >= 1 && (k as number) <= 100)).map((k) => ({ body: { query: 'otter', k } as Record<string, unknown>, param: 'k' })),
    )
    await holds(t,
      fc.asyncProperty(search, protoKeys, async (c, extra) => {
        const r = await clean(await json(h, '/api/v1/files/search', { ...extra, ...c.body }), c.param ? { param: c.param, statuses: [400] } : { statuses: [200] })
        if (r.status === 200 && !Array.isArray((r.body as { data: unknown }).data)) throw new Error('search without data')
      }),
      200,
    )
  })

  t.test('afterwards: still serving, and nothing was an internal error', async (t) => {
    t.equal((await h.fetch('/healthz')).status, 200)
    const errors = h.logs().split('\n').filter((l) => l.includes('"level":"error"'))
    t.same(errors.slice(0, 3), [], 'no error-level log line (every 5xx logs one)')
  })
})

t.test('configured limits, each with its 4xx', async (t) => {
  const h = await startHarness(t, {
    env: {
      MAX_BODY_BYTES: '4096',
      MAX_HEADER_BYTES: '2048',
      MAX_MESSAGES: '3',
      MAX_SESSION_ID_LENGTH: '16',
      MAX_FILE_BYTES: '2048',
      MAX_CHUNKS_PER_FILE: '3',
      CHUNK_TOKENS: '16',
      CHUNK_OVERLAP: '0',
    },
  })
  const chat = (extra: Record<string, unknown>) => json(h, '/api/v1/chat/completions', { ...CHAT_BASE, ...extra })
  const err = async (r: Response, status: number, code: string, param: string | null = null) => {
    const c = await clean(r, { statuses: [status], param })
    t.match(c.body, { error: { code } }, `${status} ${code}${param ? ` (${param})` : ''}`)
  }

  await err(await chat({ messages: [{ role: 'user', content: 'x'.repeat(5000) }] }), 413, 'payload_too_large')
  // Without a Content-Length the body is counted as it streams in, and cut off past the limit.
  const chunked = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(`${h.gw.url}/api/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', serviceKey: KEY_A, authorization: 'Bearer x' } }, (res) => {
      let text = ''
      res.on('data', (d: Buffer) => (text += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on('error', reject)
    for (let i = 0; i < 10; i++) req.write(' '.repeat(1000))
    req.end('{}')
  })
  t.equal(chunked.status, 413, 'chunked body over the limit → 413')
  t.match(JSON.parse(chunked.text), { error: { code: 'payload_too_large' } })

  await err(await h.fetch('/api/v1/models', { headers: { 'x-padding': 'p'.repeat(3000) } }), 431, 'headers_too_large')
  await err(await chat({ messages: Array.from({ length: 4 }, () => ({ role: 'user', content: 'x' })) }), 400, 'invalid_parameter', 'messages')
  t.equal((await chat({ messages: Array.from({ length: 3 }, () => ({ role: 'user', content: 'x' })) })).status, 200, 'at the message limit → 200')
  await err(await chat({ sessionId: 's'.repeat(17) }), 400, 'invalid_parameter', 'sessionId')
  t.equal((await chat({ sessionId: 's'.repeat(16) })).status, 200, 'at the session id limit → 200')
  await err(await h.fetch(`/api/v1/sessions/${'s'.repeat(17)}`), 400, 'invalid_parameter', 'id')

  const form = (content: string) => {
    const f = new FormData()
    f.append('file', new Blob([content], { type: 'text/plain' }), 'big.txt')
    return h.fetch('/api/v1/files', { method: 'POST', body: f })
  }
  await err(await form('y'.repeat(2049)), 413, 'payload_too_large', 'file')
  await err(await json(h, '/api/v1/files', { filename: 'big.txt', content: 'y'.repeat(2049) }), 413, 'payload_too_large', 'content')
  const words = Array.from({ length: 120 }, (_, i) => `word${i}`).join(' ')
  await err(await form(words), 413, 'payload_too_large', 'file')
  t.equal((await form('a few words only')).status, 201, 'a file within every limit → 201')
  t.same((await (await h.fetch('/api/v1/files')).json() as { data: Array<{ filename: string }> }).data.map((f) => f.filename), ['big.txt'], 'no refused file was kept')
})

t.test('a JSON file nested deeper than the stack', async (t) => {
  const h = await startHarness(t)
  const r = await json(h, '/api/v1/files', { filename: 'deep.json', content: `${'['.repeat(20_000)}1${']'.repeat(20_000)}` })
  t.equal(r.status, 201, 'indexed, with the part past the nesting limit left out')
})

t.test('one long run of text without word breaks does not stall the server', async (t) => {
  const h = await startHarness(t)
  const loop = monitorEventLoopDelay({ resolution: 10 })
  loop.enable()
  // test/tiny has a 4,096-token window: the request is counted, then refused, and never reaches the (in-process) mock.
  const r = await json(h, '/api/v1/chat/completions', { model: 'test/tiny', messages: [{ role: 'user', content: '漢'.repeat(12_000) }], useRAG: false })
  loop.disable()
  t.equal(r.status, 400)
  // Reported, not asserted (no timed assertions in tests): the guard is test/bounded-count.test.ts, which checks that
  // no slice longer than the bound ever reaches the tokenizer. Unbounded, this request stalled the loop ~1.2 s.
  t.comment(`longest event-loop stall ${Math.round(loop.max / 1e6)} ms`)
})
