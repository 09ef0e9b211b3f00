/**
 * The arbitraries, the invariant check (`clean`) and the property runner shared by the fuzz files (test/fuzz.test.ts,
 * test/fuzz-chat.test.ts): one gateway per file, so the two halves run side by side within the per-file timeout.
 */
import type { Test } from 'tap'
import fc from 'fast-check'
import type { Harness } from './harness.js'


export const SEED = Number(process.env.FC_SEED ?? process.env.FUZZ_SEED ?? 20261121)
export const SCALE = Number(process.env.FUZZ_RUNS ?? 1)

/** Run a property `numRuns` times (× FUZZ_RUNS) as one assertion; a failure reports the shrunk counterexample. */
export async function holds<Ts extends [unknown, ...unknown[]]>(t: Test, property: fc.IAsyncProperty<Ts>, numRuns: number): Promise<void> {
  const n = Math.max(1, Math.round(numRuns * SCALE))
  const details = await fc.check(property, { seed: SEED, numRuns: n, endOnFailure: true })
  if (details.failed) t.fail((await fc.asyncDefaultReportMessage(details)) ?? 'property failed')
  else t.pass(`holds for ${n} runs`)
}

export const SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>', '<|endofprompt|>', '<|start|>', '<|message|>']
export const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c))
export const nastyUnit = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: fc.constantFrom(...SPECIAL_TOKENS) },
  { weight: 1, arbitrary: loneSurrogate },
  { weight: 1, arbitrary: fc.constantFrom('\u0000', '\n', '\r\n', '```', '"', '\\', '\u2028', '\ufeff', '__proto__', 'data: [DONE]\n\n') },
)
export const nastyText = fc.oneof(
  { weight: 12, arbitrary: fc.string({ unit: nastyUnit, maxLength: 40 }) },
  // Huge, but broken into words: one long unbroken run is the quadratic-tokenizer case, tested on its own below.
  { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 10_000, max: 120_000 }), fc.constantFrom('é ', '<|endoftext|>', 'lorem ipsum ', '0123456789', '🙂 ')).map(([n, s]) => s.repeat(Math.ceil(n / s.length))) },
)
/** File content: ingestion costs ~1 ms per KB, so huge texts are kept to a few. */
export const fileText = fc.oneof(
  { weight: 20, arbitrary: fc.string({ unit: nastyUnit, maxLength: 60 }) },
  { weight: 1, arbitrary: fc.constantFrom('a ', 'é ', '<|endoftext|> ', '🙂 ', '``` ').map((s) => s.repeat(Math.ceil(8000 / s.length))) },
)
/** Any JSON value but the ones a field accepts: callers filter. */
// NaN and ±Infinity serialise as null, which would turn a wrong value into an omitted one.
export const finite = fc.double({ noNaN: true, noDefaultInfinity: true })
export const anyJson = fc.oneof(fc.integer(), finite, fc.boolean(), fc.constant(null), nastyText, fc.array(fc.integer(), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }))
export const notString = anyJson.filter((v) => typeof v !== 'string')
export const notBoolean = anyJson.filter((v) => typeof v !== 'boolean' && v !== null)
/**
 * Where the first `__proto__` key of a body is (depth first, in the order the JSON text has them), named as the
 * gateway's 400 names it (`__proto__`, `messages[0].__proto__`, `metadata.__proto__`): every body with one is refused
 * (issue 29: msgpackr would rename it when the record is read back). Undefined when there is none.
 */
export function protoKeyPath(v: unknown, path = ''): string | undefined {
  if (v === null || typeof v !== 'object') return undefined
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const found = protoKeyPath(v[i], `${path}[${i}]`)
      if (found !== undefined) return found
    }
    return undefined
  }
  for (const k of Object.keys(v)) {
    const here = path === '' ? k : `${path}.${k}`
    if (k === '__proto__') return here
    const found = protoKeyPath((v as Record<string, unknown>)[k], here)
    if (found !== undefined) return found
  }
  return undefined
}

/** What `clean` should expect of a body: a 400 naming its `__proto__` key when it has one, else `o`. */
export function expecting(body: unknown, o: { param?: string | null; statuses?: number[] } = {}): { param?: string | null; statuses?: number[] } {
  const proto = protoKeyPath(JSON.parse(JSON.stringify(body)) as unknown)
  return proto === undefined ? o : { param: proto, statuses: [400] }
}

export const protoKeys = fc.dictionary(fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty'), anyJson, { maxKeys: 3 })

export interface Case {
  body: Record<string, unknown>
  /** The field a 400 must name; undefined when the body is valid or when several outcomes are fine. */
  param?: string
}

export const CHAT_BASE = { model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }], useRAG: false, saveToMemory: false }
export const validMessage = fc.record({ role: fc.constantFrom('system', 'user', 'assistant'), content: nastyText })
export const set = (field: string, value: unknown): Record<string, unknown> => ({ ...CHAT_BASE, [field]: value })

/** One field of a valid chat body made wrong (or removed), with the param the 400 must name. */
export const chatCorruption: fc.Arbitrary<Case> = fc.oneof(
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
export const chatHostile = fc.record({
  model: fc.constantFrom('openai/gpt-4o', 'anthropic/claude-3.5-sonnet', 'unknown-vendor/some:model'),
  messages: fc.array(validMessage, { minLength: 1, maxLength: 4 }),
  stream: fc.boolean(),
  sessionId: fc.option(fc.string({ unit: nastyUnit, minLength: 1, maxLength: 12 }), { nil: undefined }),
  saveToMemory: fc.boolean(),
  useRAG: fc.boolean(),
  ragQuery: fc.option(nastyText, { nil: undefined }),
  extra: protoKeys,
})

export interface Checked {
  status: number
  body: unknown
  text: string
}

/** The invariants every answer keeps; returns the parsed body. Throws (failing the property) on a violation. */
export async function clean(res: Response, o: { param?: string | null; ok?: boolean; statuses?: number[] } = {}): Promise<Checked> {
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

export const json = (h: Harness, path: string, body: unknown, init: { method?: string; type?: string } = {}) =>
  h.fetch(path, { method: init.method ?? 'POST', headers: { 'content-type': init.type ?? 'application/json' }, body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body) })
