/** The mock upstream's public types: what a caller may ask of it and what it hands back. */
import type { Clock, Ms } from '../types.js'

export interface MockBehaviour {
  /** Assistant text; default `Echo: <last user message, first 200 chars>` (or `replyTokens` generated words). */
  reply?: string
  /**
   * Answer with these tool calls instead of text. By default the mock calls the request's first function tool when it
   * has `tools` (and `tool_choice` is not "none") and its last message is not a tool result; `toolCalls: []` turns
   * that off.
   */
  toolCalls?: Array<{ name: string; arguments: string }>
  /** Non-2xx: answer with OpenRouter's error body `{"error":{"code":status,"message",metadata}}` and that status. */
  status?: number
  errorMessage?: string
  /** Stream: characters (code points) of reply per content chunk; default 4. */
  chunkChars?: number
  /** Delay between streamed chunks; default 0. */
  interChunkDelayMs?: Ms
  /**
   * Stream: a pause after the first content chunk only (a model's time from its first token to its second); default
   * 0. The benches' time to first token needs it on a small machine: with the whole reply sent at once, the client
   * cannot read the first token before the proxy has relayed all of it (both want the same cores).
   */
  firstTokenGapMs?: Ms
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
  /**
   * 200 whose choice finished with `error` (OpenRouter's report of an error met while the model was generating), with
   * the reply as the content produced so far. Non-stream: the choice carries the error. Stream: after `afterChunks`
   * content chunks (default all; tool calls are sent whole), a chunk whose choice finishes with `error` and no top-level
   * `error` (the choice carries one only with `inChoice`), then the usage chunk and `[DONE]`, as after any finish.
   * `finishReason`: the failing choice finishes with this instead of `error` (its `error` object is then the only sign
   * of the failure: give `inChoice` for a stream).
   */
  choiceError?: { message?: string; code?: number; afterChunks?: number; inChoice?: boolean; finishReason?: string }
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

/** A JSON object as read from a request or written in a response. */
export type Json = Record<string, unknown>

export function isObject(x: unknown): x is Json {
  return typeof x === 'object' && x !== null && !Array.isArray(x)
}
