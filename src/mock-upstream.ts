/**
 * A mock OpenRouter on node:http that speaks its wire format, quirks included: `: OPENROUTER PROCESSING` keep-alive
 * comments, a usage-only chunk (`choices: []`) before `data: [DONE]`, errors as `{"error":{"code":<number>,...}}`,
 * and mid-stream errors as a 200 stream's data event with a top-level `error` and `finish_reason: "error"`.
 * Used by the tests, the demo, the benchmarks and `recallgate mock-upstream`. It writes the SSE bytes itself (in
 * pieces if asked), so what a client parses is exactly what a real upstream could send.
 *
 * This module is the server and its control surface (routing, recording, the behaviour queue, sockets and responses
 * in flight); the wire format is in mock-upstream/openrouter-json.ts and openrouter-stream.ts, how bytes are written
 * in mock-upstream/response-writer.ts, and what a reply says in mock-upstream/content.ts.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { encode } from 'gpt-tokenizer'
import { systemClock } from './types.js'
import { chatTokens, defaultToolCall, PromptCache, lastUserText, pairingError, parseJson, randomId, words } from './mock-upstream/content.js'
import {
  completionBody,
  embeddingsBody,
  modelEntry,
  sendError,
  sendJson,
  type Generation,
} from './mock-upstream/openrouter-json.js'
import { streamReply } from './mock-upstream/openrouter-stream.js'
import { mulberry32 } from './mock-upstream/prng.js'
import { dropAfterFlush, write } from './mock-upstream/response-writer.js'
import {
  isObject,
  type Json,
  type MockBehaviour,
  type MockModel,
  type MockUpstream,
  type MockUpstreamOptions,
  type RecordedRequest,
} from './mock-upstream/types.js'

export type { MockBehaviour, MockModel, MockUpstream, MockUpstreamOptions } from './mock-upstream/types.js'

export const DEFAULT_MOCK_MODELS: readonly MockModel[] = [
  { id: 'openai/gpt-4o', context_length: 128000 },
  { id: 'openai/gpt-4o-mini', context_length: 128000 },
  { id: 'anthropic/claude-3.5-sonnet', context_length: 200000 },
  { id: 'meta-llama/llama-3.1-8b-instruct', context_length: 131072 },
  { id: 'test/tiny', context_length: 4096 },
]

export async function startMockUpstream(o: MockUpstreamOptions = {}): Promise<MockUpstream> {
  const clock = o.clock ?? systemClock
  const rng = mulberry32(o.seed ?? 1)
  const models = o.models ?? DEFAULT_MOCK_MODELS
  const maxRecorded = o.maxRecorded ?? 1000
  const maxBody = o.maxBodyBytes ?? 16 << 20
  const requests: RecordedRequest[] = []
  const cache = new PromptCache()
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
    const broken = pairingError(body.messages)
    if (broken !== undefined) {
      // OpenRouter relays the provider's 400 with the provider's text in its error.
      return sendError(res, 400, broken.message, { provider_name: 'OpenAI', raw: JSON.stringify({ error: { ...broken, type: 'invalid_request_error', code: null } }) })
    }

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
    const tokens = chatTokens(messages)
    const factor = o.promptTokenFactor ?? 1
    const prompt = Math.round(tokens.length * factor)
    const cached = Math.round(cache.lookup(typeof body.model === 'string' ? body.model : '', tokens) * factor)
    const completion = encode(reply, { disallowedSpecial: new Set() }).length
    const created = Math.floor(clock() / 1000)
    const calls = b.toolCalls ?? (b.reply === undefined ? [defaultToolCall(body, messages)].filter((c) => c !== undefined) : [])
    const gen: Generation = {
      text: reply,
      logprobs: body.logprobs === true,
      toolCalls: calls.length === 0 ? undefined : calls.map((c, i) => ({ id: `call_${seq + 1}_${i}${randomId(rng).slice(1, 9)}`, ...c })),
      head: {
        id: `gen-${created}-${++seq}${randomId(rng)}`,
        provider: 'MockProvider',
        model: typeof body.model === 'string' ? body.model : 'openai/gpt-4o',
        created,
      },
      usage: {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        prompt_tokens_details: { cached_tokens: cached },
      },
    }
    const send = (text: string) => write(res, text, b, rng, signal)
    if (body.stream === true) return streamReply(res, gen, b, send, signal)

    const text = completionBody(gen, b)
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
    sendJson(res, 200, embeddingsBody(body, input, dims))
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
