/**
 * Shared vocabulary. Types carry units so a `Ms` is never passed where `Tokens` are meant (STYLE: types say units).
 * These are plain number/string aliases: cheap at runtime, documentation at compile time.
 */

/** Milliseconds. */
export type Ms = number
/** A count of model tokens. */
export type Tokens = number
/** A count of bytes. */
export type Bytes = number

/** Monotonic-enough clock in milliseconds; injected everywhere time matters so tests advance time instead of sleeping. */
export type Clock = () => Ms

export const systemClock: Clock = () => performance.timeOrigin + performance.now()

/** OpenAI's chat roles; `developer` is o1's name for `system`, `function` the deprecated predecessor of `tool`. */
export type Role = 'developer' | 'system' | 'user' | 'assistant' | 'tool' | 'function'

/** One part of an array `content`: `text`, `image_url`, `input_audio`, `file`, `refusal`, or a type we do not know. */
export interface ContentPart {
  readonly type: string
  readonly [field: string]: unknown
}

/** `{id, type: "function", function: {name, arguments}}` (or a newer type, kept as it is). */
export interface ToolCall {
  readonly id: string
  readonly type: string
  readonly function?: { readonly name: string; readonly arguments: string }
  readonly [field: string]: unknown
}

/**
 * A Chat Completions message as clients send it and as memory keeps it. Fields we do not know (`audio`, `reasoning`,
 * `reasoning_details`, whatever appears next) are carried as they came: validation checks what the contract names and
 * leaves the rest alone.
 */
export interface ChatMessage {
  readonly role: Role
  readonly content?: string | readonly ContentPart[] | null
  readonly name?: string
  readonly tool_calls?: readonly ToolCall[]
  readonly tool_call_id?: string
  readonly refusal?: string | null
  readonly [field: string]: unknown
}

/**
 * Why a streamed reply that had begun (status 200 and headers sent) did not complete: the `reason` of
 * `recallgate_stream_failures_total` and `streamFailure` in the request line. A closed set, so the metric's label
 * cannot grow. Derived from what the relay reports (chat/relay-stream.ts, `streamFailure`).
 */
export const STREAM_FAILURE_REASONS = ['upstream_reset', 'upstream_timeout', 'upstream_invalid', 'upstream_error', 'client_gone', 'internal'] as const
export type StreamFailureReason = (typeof STREAM_FAILURE_REASONS)[number]

export const PLANS = ['free', 'pro', 'premium', 'enterprise', 'unlimited'] as const
export type Plan = (typeof PLANS)[number]

/**
 * What one tenant may keep, by plan (src/quotas/): bytes of uploaded files, files, sessions, and messages per session.
 * `Infinity` means no quota.
 */
export interface PlanQuotas {
  readonly storedBytes: Bytes
  readonly files: number
  readonly sessions: number
  readonly messagesPerSession: number
}

/** A caller as identified by its service key. `id` is the key's tenant (storage/interface.ts KeyRecord) and scopes all of its data. */
export interface Tenant {
  id: string
  plan: Plan
}

/** What a key store knows of a presented key: its tenant, that it was revoked (a 401 that says so), or nothing. */
export type KeyLookupResult = Tenant | 'revoked' | undefined

/**
 * One saved message of a session (or of a stored response's turn), as the store's reads return it: frozen, shared.
 * Defined here, below both, because the packer (context/) reads it and the stores (storage/) make it.
 */
export interface StoredMessage {
  readonly seq: number
  readonly role: Role
  /** The message as saved (frozen, shared by every request that reads it). */
  readonly message: ChatMessage
  /** What it says as text (messages/text.ts): what recall indexes and renders. */
  readonly text: string
  /** Tokens of everything but the framing, in the stored encoding (o200k), counted once at write time. */
  readonly tokens: Tokens
  /** Epoch ms. */
  readonly createdAt: number
}

/**
 * How one request's prompt was put together, as the planner packed it (the request traces behind `/api/v1/requests`
 * and the console). Built from references the packer already holds: what it costs a request is a few fields.
 */
export interface PromptTrace {
  /** The messages exactly as sent upstream, in order. */
  readonly messages: readonly ChatMessage[]
  /** Each message's tokens, aligned with `messages`. */
  readonly messageTokens: readonly Tokens[]
  /** How many of `messages`, in order, are each part: system, kept history, the recall block, the excerpts block; the rest is the request. */
  readonly parts: { readonly system: number; readonly history: number; readonly recall: number; readonly excerpts: number }
  /** The excerpts' files and scores, best first. */
  readonly sources: readonly { readonly file_id: string; readonly filename: string; readonly chunk_index: number; readonly score: number }[]
  /** Older messages carried in the recall block. */
  readonly recalledMessages: number
  readonly leftOut: {
    /** Stored history messages not sent (older than what fit the window, or beyond MAX_HISTORY_MESSAGES). */
    readonly historyMessages: number
    /** Chunks the search found that did not go in. */
    readonly chunks: number
    /** Why no chunk went in, when none did (`_metadata.rag.reason`). */
    readonly retrievalReason: string | null
  }
  readonly totalTokens: Tokens
  readonly window: Tokens
  readonly sessionId: string | null
  /**
   * `messages` as JSON, exactly as the upstream body carries them: set by the handler from the body it sent (a slice of
   * that string, made anyway), so that storing a trace copies one string instead of encoding every message again.
   */
  messagesJson?: string
}

/** Epoch ms as the unix seconds OpenAI's API puts on the wire (`created_at`, `updated_at`). */
export const unixSeconds = (ms: number): number => Math.floor(ms / 1000)

/**
 * `Array.isArray` that keeps a readonly array's element type: the built-in narrows `readonly T[] | …` to `any[]`, and
 * the `any` then flows unchecked into whatever reads the elements (a stored message's tool calls, say).
 */
export function isArray<T>(v: T): v is Extract<T, readonly unknown[]> {
  return Array.isArray(v)
}

/** A JSON object (not null, not an array), its fields still to be checked: the one object check every parser uses. */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}
