/**
 * A mock OpenRouter on node:http that speaks its wire format, quirks included: `: OPENROUTER PROCESSING` keep-alive
 * comments, a usage-only chunk (`choices: []`) before `data: [DONE]`, errors as `{"error":{"code":<number>,...}}`,
 * and mid-stream errors as a 200 stream's data event with a top-level `error` and `finish_reason: "error"`.
 * Used by the tests, the demo, the benchmarks and `recallgate mock-upstream`. It writes the SSE bytes itself (in
 * pieces if asked), so what a client parses is exactly what a real upstream could send.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { once } from 'node:events'
import { createHash } from 'node:crypto'
import { setTimeout as sleep, setImmediate as nextTurn } from 'node:timers/promises'
import { encode, encodeChat } from 'gpt-tokenizer'
import { systemClock, type Clock, type Ms } from './types.js'

export interface MockBehaviour {
  /** Assistant text; default `Echo: <last user message, first 200 chars>` (or `replyTokens` generated words). */
  reply?: string
  /** Non-2xx: answer with OpenRouter's error body `{"error":{"code":status,"message",metadata}}` and that status. */
  status?: number
  errorMessage?: string
  /** Stream: characters (code points) of reply per content chunk; default 4. */
  chunkChars?: number
  /** Delay between streamed chunks; default 0. */
  interChunkDelayMs?: Ms
  /** Delay before the first byte of the response; default 0. */
  ttftMs?: Ms
  /** `: OPENROUTER PROCESSING` comments sent before the first chunk; default 1. */
  keepAliveComments?: number
  crlf?: boolean
  /** Write the response bytes 1 at a time ('bytes') or in random 1–8 byte pieces, yielding to the loop between. */
  splitWrites?: 'none' | 'bytes' | 'random'
  /** After this many content chunks, send OpenRouter's error event and end the stream without [DONE]. */
  midStreamError?: { afterChunks: number; message?: string; code?: number }
  /** Never finish. 'mid-stream': after the headers and the first content chunk (half the body when not streaming). */
  hang?: 'before-headers' | 'mid-stream'
  /** Destroy the socket, at the same points as `hang`. */
  reset?: 'before-headers' | 'mid-stream'
  /** Non-stream: 200 with a body that is not JSON. */
  invalidJson?: boolean
  /** Stream: 200 text/event-stream whose lines are not valid chunks. */
  invalidSse?: boolean
  /** Default true: non-stream includes `usage`; a stream ends with the usage-only chunk before [DONE]. */
  usage?: boolean
  /** Load tests: when `reply` is unset, a reply of this many words (≈ tokens) drawn from the seeded PRNG. */
  replyTokens?: { min: number; max: number }
  /** Load tests: pace streamed content at this rate (overrides interChunkDelayMs for content chunks). */
  tokensPerSecond?: number
}

export interface RecordedRequest {
  method: string
  path: string
  headers: Record<string, string | string[] | undefined>
  /** Parsed JSON body, or undefined when empty or not JSON. */
  body: unknown
  rawBody: string
  receivedAt: Ms
}

export interface MockModel {
  id: string
  context_length: number
}

export interface MockUpstreamOptions {
  /** Default 127.0.0.1 and port 0 (any free port). */
  host?: string
  port?: number
  /** Served by GET /api/v1/models in OpenRouter's shape; default DEFAULT_MOCK_MODELS. */
  models?: MockModel[]
  /** Behaviour of every chat request that has no one-shot behaviour queued. */
  behaviour?: MockBehaviour
  /** Bound on the recorded-requests ring; default 1000 (0 records nothing). */
  maxRecorded?: number
  /** usage.prompt_tokens = round(encodeChat(messages, 'gpt-4o').length × factor), to mimic other tokenizers; 1. */
  promptTokenFactor?: number
  /** Default true: chat and embeddings without `Authorization: Bearer <token>` get OpenRouter's 401. */
  requireAuth?: boolean
  /** Embedding vector length when the request does not ask for `dimensions`; default 64. */
  embeddingDimensions?: number
  /** Share of default-behaviour chat requests answered 502, drawn from the seeded PRNG; default 0. */
  errorRate?: number
  /** Seed of the PRNG behind ids, random splits, errorRate and replyTokens; default 1. */
  seed?: number
  /** Timestamps (`created`, receivedAt); default the system clock. */
  clock?: Clock
  /** Request bodies above this are answered 413; default 16 MiB. */
  maxBodyBytes?: number
}

export interface MockUpstream {
  /** Base URL including /api/v1, e.g. http://127.0.0.1:1234/api/v1 */
  url: string
  port: number
  /** What it received (bounded by maxRecorded), newest last. The same array for the mock's lifetime. */
  requests: RecordedRequest[]
  lastChatBody(): Record<string, unknown> | undefined
  /** One-shot behaviour for the next chat request, FIFO, used instead of (not merged with) the default. */
  enqueue(b: MockBehaviour): void
  setDefault(b: MockBehaviour): void
  openConnections(): number
  /** Responses still being written (a hanging one counts until its client leaves). */
  activeResponses(): number
  /** Resolves once no response is in flight: e.g. after the gateway aborted a stream its client left. */
  idle(): Promise<void>
  /** Closes the server and destroys every socket, hanging requests included. */
  close(): Promise<void>
}

export const DEFAULT_MOCK_MODELS: readonly MockModel[] = [
  { id: 'openai/gpt-4o', context_length: 128000 },
  { id: 'openai/gpt-4o-mini', context_length: 128000 },
  { id: 'anthropic/claude-3.5-sonnet', context_length: 200000 },
  { id: 'meta-llama/llama-3.1-8b-instruct', context_length: 131072 },
  { id: 'test/tiny', context_length: 4096 },
]

const ERROR_MESSAGES: Record<number, string> = {
  400: 'Bad Request',
  401: 'No auth credentials found',
  402: 'Insufficient credits',
  403: 'Input was flagged by moderation',
  404: 'Not Found',
  408: 'Request timed out',
  413: 'Request body too large',
  429: 'Rate limit exceeded',
  502: 'Provider returned error',
  503: 'No endpoints found that can handle the request',
}

type Json = Record<string, unknown>
type Rng = () => number

export async function startMockUpstream(o: MockUpstreamOptions = {}): Promise<MockUpstream> {
  const clock = o.clock ?? systemClock
  const rng = mulberry32(o.seed ?? 1)
  const models = o.models ?? DEFAULT_MOCK_MODELS
  const maxRecorded = o.maxRecorded ?? 1000
  const maxBody = o.maxBodyBytes ?? 16 << 20
  const requests: RecordedRequest[] = []
  const queue: MockBehaviour[] = []
  let fallback: MockBehaviour = o.behaviour ?? {}
  const sockets = new Set<Socket>()
  /** One per response in flight: aborted when its client leaves or the mock closes, to stop delays and writes. */
  const inFlight = new Set<AbortController>()
  let seq = 0
  const idleWaiters: Array<() => void> = []

  const server = createServer((req, res) => {
    const gone = new AbortController()
    inFlight.add(gone)
    res.once('close', () => {
      inFlight.delete(gone)
      gone.abort()
      if (inFlight.size === 0) for (const w of idleWaiters.splice(0)) w()
    })
    const signal = gone.signal
    handle(req, res, signal).catch((err: unknown) => {
      // An abort means the client or the mock went away mid-response: nothing is left to answer.
      if (signal.aborted) return
      if (!res.headersSent) sendJson(res, 500, { error: { code: 500, message: String(err) } })
      else res.destroy()
    })
  })
  server.on('connection', (s) => {
    s.setNoDelay(true)
    sockets.add(s)
    s.once('close', () => sockets.delete(s))
  })

  async function handle(req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<void> {
    const chunks: Buffer[] = []
    let size = 0
    for await (const c of req as AsyncIterable<Buffer>) {
      size += c.length
      if (size <= maxBody) chunks.push(c)
    }
    const rawBody = Buffer.concat(chunks).toString('utf8')
    const body = parseJson(rawBody)
    const path = (req.url ?? '/').split('?')[0] ?? '/'
    const method = req.method ?? 'GET'
    if (maxRecorded > 0) {
      requests.push({ method, path, headers: { ...req.headers }, body, rawBody, receivedAt: clock() })
      if (requests.length > maxRecorded) requests.splice(0, requests.length - maxRecorded)
    }
    if (size > maxBody) return sendError(res, 413)

    if (method === 'GET' && path === '/api/v1/models') return sendJson(res, 200, { data: models.map(modelEntry) })
    const isChat = method === 'POST' && path === '/api/v1/chat/completions'
    const isEmbeddings = method === 'POST' && path === '/api/v1/embeddings'
    if (!isChat && !isEmbeddings) return sendError(res, 404)
    if ((o.requireAuth ?? true) && !/^Bearer\s+\S+/i.test(req.headers.authorization ?? '')) return sendError(res, 401)
    if (!isObject(body)) return sendError(res, 400, 'Request body must be a JSON object')
    if (isEmbeddings) return embeddings(res, body)
    if (!Array.isArray(body.messages) || body.messages.length === 0) return sendError(res, 400, 'messages: Required')

    let b = queue.shift()
    if (!b) b = (o.errorRate ?? 0) > 0 && rng() < (o.errorRate ?? 0) ? { status: 502 } : fallback
    return chat(res, body, body.messages as unknown[], b, signal)
  }

  async function chat(res: ServerResponse, body: Json, messages: unknown[], b: MockBehaviour, signal: AbortSignal) {
    if (b.ttftMs) await sleep(b.ttftMs, undefined, { signal })
    if (b.hang === 'before-headers') return
    if (b.reset === 'before-headers') return void res.socket?.destroy()
    if (b.status !== undefined && (b.status < 200 || b.status > 299)) {
      return sendError(res, b.status, b.errorMessage, { provider_name: 'MockProvider' })
    }
    const echo = () => `Echo: ${lastUserText(messages).slice(0, 200)}`
    const reply = b.reply ?? (b.replyTokens ? words(b.replyTokens, rng) : echo())
    const prompt = Math.round(countChat(messages) * (o.promptTokenFactor ?? 1))
    const completion = encode(reply, { disallowedSpecial: new Set() }).length
    const created = Math.floor(clock() / 1000)
    const gen: Reply = {
      text: reply,
      head: {
        id: `gen-${created}-${++seq}${randomId(rng)}`,
        provider: 'MockProvider',
        model: typeof body.model === 'string' ? body.model : 'openai/gpt-4o',
        created,
      },
      usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
    }
    const send = (text: string) => write(res, text, b, rng, signal)
    if (body.stream === true) return streamReply(res, gen, b, send, signal)

    const text = b.invalidJson
      ? '<html><body>502 Bad Gateway</body></html>'
      : JSON.stringify({
          ...gen.head,
          object: 'chat.completion',
          choices: [
            {
              index: 0,
              logprobs: null,
              finish_reason: 'stop',
              native_finish_reason: 'stop',
              message: { role: 'assistant', content: reply, refusal: null, reasoning: null },
            },
          ],
          ...(b.usage === false ? {} : { usage: gen.usage }),
        })
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
    if (b.hang === 'mid-stream' || b.reset === 'mid-stream') {
      await send(text.slice(0, text.length >> 1))
      if (b.reset) await dropAfterFlush(res, signal)
      return
    }
    await send(text)
    res.end()
  }

  function embeddings(res: ServerResponse, body: Json): void {
    const input = typeof body.input === 'string' ? [body.input] : body.input
    if (!Array.isArray(input) || !input.every((s): s is string => typeof s === 'string')) {
      return sendError(res, 400, 'input must be a string or an array of strings')
    }
    const asked = body.dimensions
    const dims = Number.isInteger(asked) && Number(asked) > 0 ? Number(asked) : (o.embeddingDimensions ?? 64)
    const tokens = input.reduce((n, s) => n + encode(s, { disallowedSpecial: new Set() }).length, 0)
    sendJson(res, 200, {
      object: 'list',
      data: input.map((s, index) => {
        const v = embedText(s, dims)
        // The openai SDK asks for base64 (little-endian float32) unless told otherwise; honour both, as OpenAI does.
        const base64 = body.encoding_format === 'base64'
        const embedding = base64 ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v
        return { object: 'embedding', index, embedding }
      }),
      model: typeof body.model === 'string' ? body.model : 'mock/embedding',
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    })
  }

  server.listen(o.port ?? 0, o.host ?? '127.0.0.1')
  await once(server, 'listening')
  const addr = server.address()
  if (addr === null || typeof addr === 'string') throw new Error('mock upstream: unexpected listen address')
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address
  let closed: Promise<void> | undefined

  return {
    url: `http://${host}:${addr.port}/api/v1`,
    port: addr.port,
    requests,
    lastChatBody() {
      for (let i = requests.length - 1; i >= 0; i--) {
        const r = requests[i]
        if (r?.path === '/api/v1/chat/completions' && isObject(r.body)) return r.body
      }
      return undefined
    },
    enqueue: (b) => void queue.push(b),
    setDefault: (b) => void (fallback = b),
    openConnections: () => sockets.size,
    activeResponses: () => inFlight.size,
    idle: () => (inFlight.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve))),
    close() {
      closed ??= new Promise<void>((resolve) => {
        for (const c of inFlight) c.abort()
        server.close(() => resolve())
        for (const s of sockets) s.destroy()
      })
      return closed
    },
  }
}

interface Reply {
  text: string
  /** Fields every body and chunk of this generation starts with. */
  head: { id: string; provider: string; model: string; created: number }
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number }
}

/** The OpenRouter stream: comments, role chunk, content chunks, stop chunk, usage-only chunk, [DONE]. */
async function streamReply(
  res: ServerResponse,
  r: Reply,
  b: MockBehaviour,
  send: (text: string) => Promise<void>,
  signal: AbortSignal,
): Promise<void> {
  const nl = b.crlf ? '\r\n' : '\n'
  const frame = (json: Json) => `data: ${JSON.stringify(json)}${nl}${nl}`
  const chunk = (choices: Json[], extra: Json = {}) =>
    frame({ ...r.head, object: 'chat.completion.chunk', ...extra, choices })
  const delta = (d: Json, finish: string | null) => [
    { index: 0, delta: d, finish_reason: finish, native_finish_reason: finish, logprobs: null },
  ]
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-generation-id': r.head.id })
  for (let i = 0; i < (b.keepAliveComments ?? 1); i++) await send(`: OPENROUTER PROCESSING${nl}${nl}`)
  if (b.invalidSse) {
    await send(`data: {"id": "${r.head.id}", "choices": [{${nl}${nl}not an event stream${nl}data: <html>${nl}${nl}`)
    return void res.end()
  }
  await send(chunk(delta({ role: 'assistant', content: '' }, null)))
  const pieces = splitCodePoints(r.text, b.chunkChars ?? 4)
  const stopAt = b.midStreamError ? Math.min(b.midStreamError.afterChunks, pieces.length) : pieces.length
  for (let i = 0; i < Math.max(1, stopAt); i++) {
    const piece = pieces[i]
    if (piece !== undefined && i < stopAt) await send(chunk(delta({ role: 'assistant', content: piece }, null)))
    // The mid-stream point: after the first content chunk (after the role chunk when there is none).
    if (i === 0 && b.hang === 'mid-stream') return
    if (i === 0 && b.reset === 'mid-stream') return dropAfterFlush(res, signal)
    if (piece === undefined || i >= stopAt) break
    const delay = b.tokensPerSecond ? (1000 * encode(piece).length) / b.tokensPerSecond : b.interChunkDelayMs
    if (delay) await sleep(delay, undefined, { signal })
  }
  if (b.midStreamError) {
    const { code = 502, message = 'Provider disconnected unexpectedly' } = b.midStreamError
    const choices = [{ index: 0, delta: { content: '' }, finish_reason: 'error', native_finish_reason: 'error' }]
    await send(chunk(choices, { error: { code, message } }))
    return void res.end()
  }
  await send(chunk(delta({ role: 'assistant', content: '' }, 'stop')))
  if (b.usage !== false) await send(chunk([], { usage: r.usage }))
  await send(`data: [DONE]${nl}${nl}`)
  res.end()
}

/** Write respecting backpressure, in pieces when asked; rejects with an AbortError once the client has left. */
async function write(res: ServerResponse, text: string, b: MockBehaviour, rng: Rng, signal: AbortSignal) {
  signal.throwIfAborted()
  const mode = b.splitWrites ?? 'none'
  if (mode === 'none') {
    if (!res.write(text)) await once(res, 'drain', { signal })
    return
  }
  const bytes = Buffer.from(text)
  for (let i = 0; i < bytes.length; ) {
    const n = mode === 'bytes' ? 1 : 1 + Math.floor(rng() * 8)
    res.write(bytes.subarray(i, i + n))
    i += n
    // Yielding lets each piece leave as its own write (noDelay is set), so the client sees them separately.
    await nextTurn(undefined, { signal })
  }
}

/** Cut the connection once what was written has left, so the client sees a partial response, then the drop. */
async function dropAfterFlush(res: ServerResponse, signal: AbortSignal): Promise<void> {
  // node:http corks the socket around a response's first write and uncorks on the next tick.
  await nextTurn(undefined, { signal })
  const socket = res.socket
  if (socket && socket.writableLength > 0) await once(socket, 'drain', { signal })
  socket?.destroy()
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

function sendError(res: ServerResponse, status: number, message?: string, metadata?: Json): void {
  const error: Json = { code: status, message: message ?? ERROR_MESSAGES[status] ?? `Upstream error ${status}` }
  if (metadata) error.metadata = metadata
  sendJson(res, status, { error })
}

function modelEntry(m: MockModel): Json {
  const [vendor = 'mock', name = m.id] = m.id.split('/')
  return {
    id: m.id,
    canonical_slug: m.id,
    name: `${vendor}: ${name}`,
    created: 1700000000,
    description: `Mock of ${m.id}`,
    context_length: m.context_length,
    architecture: { modality: 'text->text', input_modalities: ['text'], output_modalities: ['text'],
      tokenizer: vendor === 'anthropic' ? 'Claude' : vendor === 'openai' ? 'GPT' : 'Other', instruct_type: null },
    pricing: { prompt: '0.0000025', completion: '0.00001', request: '0', image: '0' },
    top_provider: { context_length: m.context_length, max_completion_tokens: Math.min(16384, m.context_length >> 2),
      is_moderated: false },
    per_request_limits: null,
    supported_parameters: ['max_tokens', 'temperature', 'top_p', 'stop', 'stream', 'seed'],
  }
}

function countChat(messages: unknown[]): number {
  const chat = messages.filter(isObject).map((m) => ({
    role: typeof m.role === 'string' ? m.role : 'user',
    content: contentText(m.content),
  }))
  return encodeChat(chat, 'gpt-4o', { disallowedSpecial: new Set() }).length
}

function lastUserText(messages: unknown[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (isObject(m) && m.role === 'user') return contentText(m.content)
  }
  return ''
}

/** String content as is; OpenAI content parts by their text. */
function contentText(c: unknown): string {
  if (typeof c === 'string') return c
  if (Array.isArray(c)) return c.map((p) => (isObject(p) && typeof p.text === 'string' ? p.text : '')).join('')
  return c === undefined || c === null ? '' : JSON.stringify(c)
}

/** Split by code points so a streamed piece never ends inside a surrogate pair. */
function splitCodePoints(s: string, size: number): string[] {
  const cps = Array.from(s)
  const out: string[] = []
  const n = Math.max(1, Math.floor(size))
  for (let i = 0; i < cps.length; i += n) out.push(cps.slice(i, i + n).join(''))
  return out
}

const VOCAB = ['the', 'memory', 'gateway', 'token', 'stream', 'context', 'model', 'answer', 'quick', 'data']
function words(range: { min: number; max: number }, rng: Rng): string {
  const n = range.min + Math.floor(rng() * (Math.max(range.min, range.max) - range.min + 1))
  return Array.from({ length: n }, () => VOCAB[Math.floor(rng() * VOCAB.length)]).join(' ')
}

function randomId(rng: Rng): string {
  const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
  let s = '-'
  for (let i = 0; i < 16; i++) s += abc[Math.floor(rng() * abc.length)]
  return s
}

/** Deterministic unit vector from the text's hash: equal texts get equal vectors, different texts unrelated ones. */
function embedText(text: string, dims: number): number[] {
  const next = mulberry32(createHash('sha256').update(text).digest().readUInt32LE(0))
  const v = Array.from({ length: dims }, () => next() * 2 - 1)
  const norm = Math.sqrt(v.reduce((n, x) => n + x * x, 0)) || 1
  return v.map((x) => x / norm)
}

function mulberry32(seed: number): Rng {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function parseJson(text: string): unknown {
  if (text === '') return undefined
  try {
    return JSON.parse(text)
  } catch {
    // Recorded as undefined; the route answers 400 for a body it needs.
    return undefined
  }
}

function isObject(x: unknown): x is Json {
  return typeof x === 'object' && x !== null && !Array.isArray(x)
}
