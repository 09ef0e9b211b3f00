/**
 * Embeddings from any OpenAI-compatible `POST {baseUrl}/embeddings` (OpenAI, OpenRouter, Ollama, TEI, vLLM...).
 * Inputs are sent in batches; every answer is checked (one finite vector per input, one dimension throughout) and
 * normalised to unit length, so a provider that returns unnormalised vectors still ranks correctly under cosine.
 */
import { request, type Dispatcher } from 'undici'
import { gatewayError } from '../errors.js'
import type { Ms } from '../types.js'
import { normalise, type Cancel, type Embedder } from './embedder.js'

export interface OpenAICompatibleEmbedderOptions {
  /** e.g. `https://openrouter.ai/api/v1`; a trailing slash is ignored. */
  baseUrl: string
  model: string
  /** Sent as `Authorization: Bearer`; omit for servers that need none (a local Ollama). */
  apiKey?: string | undefined
  /** Texts per request. Default 64. */
  batchSize?: number
  /** Whole-request deadline per batch. Default 30 s. */
  timeout?: Ms
  /** Known vector length; otherwise learned from the first answer. */
  dimension?: number
  /** undici dispatcher (connection pool); the global one by default. */
  dispatcher?: Dispatcher
}

/** Upper bound on an answer body: 64 inputs × 4,096 dims as JSON text is ~6 MB. */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024

export class OpenAICompatibleEmbedder implements Embedder {
  readonly id: string
  readonly #url: string
  readonly #model: string
  readonly #apiKey: string | undefined
  readonly #batchSize: number
  readonly #timeout: Ms
  readonly #dispatcher: Dispatcher | undefined
  #dimension: number

  constructor(opts: OpenAICompatibleEmbedderOptions) {
    let url: URL
    try {
      url = new URL(opts.baseUrl)
    } catch {
      throw new TypeError(`OpenAICompatibleEmbedder: baseUrl must be an http(s) URL, got "${opts.baseUrl}"`)
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new TypeError(`OpenAICompatibleEmbedder: baseUrl must be an http(s) URL, got "${opts.baseUrl}"`)
    if (!opts.model) throw new TypeError('OpenAICompatibleEmbedder: model is required (e.g. "text-embedding-3-small")')
    this.#url = `${opts.baseUrl.replace(/\/+$/, '')}/embeddings`
    this.#model = opts.model
    this.#apiKey = opts.apiKey
    this.#batchSize = opts.batchSize ?? 64
    if (!(this.#batchSize >= 1)) throw new RangeError('OpenAICompatibleEmbedder: batchSize must be ≥ 1')
    this.#timeout = opts.timeout ?? 30_000
    this.#dispatcher = opts.dispatcher
    this.#dimension = opts.dimension ?? 0
    // The model names the vector space; the same model behind two providers gives comparable vectors.
    this.id = `openai-compatible:${opts.model}`
  }

  get dimension(): number {
    return this.#dimension
  }

  async embed(texts: readonly string[], opts: Cancel = {}): Promise<Float32Array[]> {
    const out: Float32Array[] = []
    const left = opts.signal
    for (let i = 0; i < texts.length; i += this.#batchSize) {
      out.push(...(await this.#batch(texts.slice(i, i + this.#batchSize), left)))
    }
    return out
  }

  async #batch(input: readonly string[], left: AbortSignal | undefined): Promise<Float32Array[]> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' }
    if (this.#apiKey) headers.authorization = `Bearer ${this.#apiKey}`
    const body = JSON.stringify({ model: this.#model, input })
    // The client that leaves cancels the call made for it (its retrieval's query), as the timeout does; one deadline
    // for the call and its one retry.
    const signal = left === undefined ? AbortSignal.timeout(this.#timeout) : AbortSignal.any([AbortSignal.timeout(this.#timeout), left])
    let status: number
    let text: string
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          const res = await request(this.#url, { method: 'POST', headers, body, signal, ...(this.#dispatcher ? { dispatcher: this.#dispatcher } : {}) })
          status = res.statusCode
          text = await readCapped(res.body, MAX_RESPONSE_BYTES)
          break
        } catch (err) {
          // A pooled connection the server closed while it sat idle fails the next request sent on it (the keep-alive
          // race, seen with a local embeddings server). Embedding is idempotent: once more, on a new connection.
          if (attempt === 0 && !signal.aborted && connectionDropped(err)) continue
          throw err
        }
      }
    } catch (err) {
      if (left?.aborted === true)
        throw gatewayError('client_closed_request', { message: 'The client left before the embeddings endpoint answered', cause: err })
      if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError'))
        throw gatewayError('upstream_timeout', {
          message: `The embeddings endpoint did not answer within ${this.#timeout} ms`,
          cause: err,
        })
      if (err instanceof Error && err.name === 'GatewayError') throw err
      throw gatewayError('upstream_unreachable', {
        message: `The embeddings endpoint could not be reached: ${err instanceof Error ? err.message : String(err)}`,
        cause: err,
      })
    }
    if (status < 200 || status > 299)
      throw invalid(`The embeddings endpoint answered ${status}: ${upstreamMessage(text)}`)
    return this.#parse(text, input.length)
  }

  #parse(text: string, expected: number): Float32Array[] {
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch (err) {
      throw invalid('The embeddings endpoint sent a body that is not JSON', err)
    }
    const data = (body as { data?: unknown } | null)?.data
    if (!Array.isArray(data) || data.length !== expected)
      throw invalid(`The embeddings endpoint sent ${Array.isArray(data) ? data.length : 'no'} vectors for ${expected} inputs`)
    const out: Float32Array[] = new Array<Float32Array>(expected)
    data.forEach((item: unknown, pos) => {
      const { embedding, index } = (item ?? {}) as { embedding?: unknown; index?: unknown }
      const at = typeof index === 'number' && Number.isInteger(index) ? index : pos
      if (at < 0 || at >= expected || out[at] !== undefined) throw invalid('The embeddings endpoint sent bad indexes')
      if (!Array.isArray(embedding) || embedding.length === 0 || !embedding.every((x) => Number.isFinite(x)))
        throw invalid('The embeddings endpoint sent an embedding that is not a list of numbers')
      if (this.#dimension === 0) this.#dimension = embedding.length
      else if (embedding.length !== this.#dimension)
        throw invalid(`The embeddings endpoint sent ${embedding.length} dimensions, expected ${this.#dimension}`)
      out[at] = normalise(Float32Array.from(embedding as number[]))
    })
    return out
  }
}

/** The connection failed under the request (reset, closed by the other side), as opposed to a refusal or a timeout. */
function connectionDropped(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED'
}

function invalid(message: string, cause?: unknown) {
  return gatewayError('upstream_invalid_response', { message, cause })
}

function upstreamMessage(text: string): string {
  try {
    const m = (JSON.parse(text) as { error?: { message?: unknown } })?.error?.message
    if (typeof m === 'string') return m.slice(0, 500)
  } catch {
    // Not JSON: fall through to the raw text, which is what the provider said.
  }
  return text.slice(0, 500) || '(empty body)'
}

async function readCapped(body: AsyncIterable<Buffer>, max: number): Promise<string> {
  const parts: Buffer[] = []
  let total = 0
  for await (const chunk of body) {
    total += chunk.length
    if (total > max) throw invalid(`The embeddings endpoint sent more than ${max} bytes`)
    parts.push(chunk)
  }
  return Buffer.concat(parts).toString('utf8')
}
