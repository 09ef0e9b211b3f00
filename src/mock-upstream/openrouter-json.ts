/**
 * OpenRouter's JSON bodies as the mock sends them: errors as `{"error":{"code":<number>,"message",metadata?}}`, the
 * model list entries, a chat completion and an embeddings list.
 */
import type { ServerResponse } from 'node:http'
import { encode } from 'gpt-tokenizer'
import { embedText, splitCodePoints } from './content.js'
import type { Json, MockBehaviour, MockModel } from './types.js'

/** One generated reply: what its JSON body and its stream chunks are made from. */
export interface Generation {
  text: string
  /** Tool calls made instead of text (finish_reason "tool_calls"). */
  toolCalls?: Array<{ id: string; name: string; arguments: string }>
  /** The request asked `logprobs: true`: each piece of text (chunkChars) comes with its log probability, as one token. */
  logprobs?: boolean
  /** Fields every body and chunk of this generation starts with. */
  head: { id: string; provider: string; model: string; created: number }
  usage: {
    prompt_tokens: number
    completion_tokens: number
    total_tokens: number
    prompt_tokens_details: { cached_tokens: number }
  }
}

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

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

export function sendError(res: ServerResponse, status: number, message?: string, metadata?: Json): void {
  const error: Json = { code: status, message: message ?? ERROR_MESSAGES[status] ?? `Upstream error ${status}` }
  if (metadata) error.metadata = metadata
  sendJson(res, status, { error })
}

export function modelEntry(m: MockModel): Json {
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

/** Chat's `choice.logprobs` for these pieces of text, one token each (a made-up, fixed probability). */
export function textLogprobs(pieces: readonly string[]): Json {
  return { content: pieces.map((token) => ({ token, logprob: -0.5, bytes: [...Buffer.from(token)], top_logprobs: [] })), refusal: null }
}

/** The non-stream body: a chat.completion (with usage unless `usage: false`), or an HTML page for `invalidJson`. */
export function completionBody(g: Generation, b: MockBehaviour): string {
  if (b.invalidJson) return '<html><body>502 Bad Gateway</body></html>'
  const finish = b.choiceError ? (b.choiceError.finishReason ?? 'error') : g.toolCalls ? 'tool_calls' : 'stop'
  return JSON.stringify({
    ...g.head,
    object: 'chat.completion',
    choices: [
      {
        index: 0,
        logprobs: g.logprobs === true && !g.toolCalls ? textLogprobs(splitCodePoints(g.text, b.chunkChars ?? 4)) : null,
        finish_reason: finish,
        native_finish_reason: finish,
        ...(b.choiceError ? { error: { code: b.choiceError.code ?? 502, message: b.choiceError.message ?? 'Provider disconnected unexpectedly' } } : {}),
        message: g.toolCalls
          ? {
              role: 'assistant',
              content: null,
              refusal: null,
              reasoning: null,
              tool_calls: g.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })),
            }
          : { role: 'assistant', content: g.text, refusal: null, reasoning: null },
      },
    ],
    ...(b.usage === false ? {} : { usage: g.usage }),
  })
}

/** The embeddings list for `input`, in the encoding the request asked for. */
export function embeddingsBody(body: Json, input: string[], dims: number): Json {
  const tokens = input.reduce((n, s) => n + encode(s, { disallowedSpecial: new Set() }).length, 0)
  return {
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
  }
}
