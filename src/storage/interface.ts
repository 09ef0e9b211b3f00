/**
 * The store contract: what the rest of the gateway may ask of durable state, independent of the engine behind it.
 * LMDB (the embedded default, `src/storage/*-repo.ts`) implements it today; a PostgreSQL implementation (issue 23)
 * implements the same interfaces, and the same conformance test (test/store-conformance.test.ts) runs against each.
 *
 * Reads return `Awaitable<T>`: LMDB answers from its memory map synchronously (a few µs; an `await` of a plain value
 * costs one microtask), while a network engine answers with a promise. Callers always `await` them, so swapping the
 * engine changes no caller. Writes are promises that resolve once the write is durable (committed and flushed):
 * the gateway acknowledges nothing before that.
 *
 * The record shapes the repositories hand out live here too, so that modules that only read records (the packer,
 * the chat planner, the Responses bridge) import a contract, not an engine.
 */
import type { ChatMessage, KeyLookupResult, Plan, PromptTrace, StoredMessage, Tokens } from '../types.js'

export type Awaitable<T> = T | Promise<T>

export type { KeyLookupResult, StoredMessage }

export interface SessionInfo {
  id: string
  createdAt: number
  updatedAt: number
  messageCount: number
}

/** Per-save bounds from the tenant's plan (quotas/): checked inside the save's own transaction. */
export interface SessionBounds {
  /**
   * Sessions the tenant may hold: a save that would create one more than this is refused whole with
   * `SessionLimitError` (a save to a session that exists is never refused by it).
   */
  readonly maxSessions?: number
  /** Messages this session keeps: the oldest beyond it are pruned in the same save (never more than the store's own bound). */
  readonly maxMessages?: number
}

/** What a tenant holds in sessions, for its quota report. */
export interface SessionUsage {
  readonly sessions: number
  /** Messages in the tenant's largest session (0 without sessions). */
  readonly largestSession: number
}

/** Sessions and their messages (the chat `sessionId`, and the Responses API's conversations). */
export interface SessionStore {
  /** The newest `limit` messages (default all), oldest first. */
  history(tenant: string, sessionId: string, limit?: number): Awaitable<StoredMessage[]>
  get(tenant: string, sessionId: string): Awaitable<SessionInfo | undefined>
  /**
   * A page of the tenant's sessions, newest first (creation time, then id descending); `after` is the previous
   * page's last id, and one that names no session gives an empty page.
   */
  list(tenant: string, opts: { limit: number; after?: string }): Awaitable<{ data: SessionInfo[]; hasMore: boolean }>
  /**
   * Save one exchange in one transaction (creating the session, pruning the oldest beyond the bound); `replaceFrom`
   * removes the stored messages from that seq on first (a client that edited or regenerated a turn). `bounds`: the
   * tenant's plan's, enforced in the same transaction (so two saves racing for the last free session cannot both win).
   */
  appendExchange(
    tenant: string,
    sessionId: string,
    messages: readonly ChatMessage[],
    opts?: { replaceFrom?: number; bounds?: SessionBounds },
  ): Promise<StoredMessage[]>
  /** How many sessions the tenant has and the size of its largest: one pass over its session records. */
  usage(tenant: string): Awaitable<SessionUsage>
  /** Remove a session and all of its messages for good; false if it did not exist. */
  delete(tenant: string, sessionId: string): Promise<boolean>
}

export interface KeyRecord {
  id: string
  hash: string
  /**
   * The tenant this key opens (its sessions, files, usage). Its own id since issue 27, kept across `rotate` and
   * `setPlan`; a record written before that has none stored and reads back with the id derived from its hash.
   */
  tenant: string
  plan: Plan
  createdAt: number
  revokedAt?: number
  label?: string
}

/** Service keys at rest (hashes only). Ids are the public `key_…` ids; `undefined` answers mean no active key has it. */
export interface KeyStore {
  /** A key for a new tenant. */
  create(plan: Plan, label?: string): Promise<{ key: string; record: KeyRecord }>
  list(): Awaitable<KeyRecord[]>
  get(id: string): Awaitable<KeyRecord | undefined>
  revoke(id: string): Promise<boolean>
  /**
   * A new secret for the same tenant, plan and label; the old key is revoked in the same transaction (a key is rotated
   * because it leaked, so it stops at once). Undefined when no active key has that id.
   */
  rotate(id: string): Promise<{ key: string; record: KeyRecord } | undefined>
  /** Moves an active key to another plan; its tenant's data stays. Undefined when no active key has that id. */
  setPlan(id: string, plan: Plan): Promise<KeyRecord | undefined>
  countActive(): Awaitable<number>
  /**
   * The tenant of an active key with this hash, or `'revoked'`. Synchronous on purpose: it runs on every request
   * before anything else, so an engine across a network answers it from a per-process cache fed by its change log.
   */
  lookup(hash: string): KeyLookupResult
  /**
   * For an engine whose `lookup` answers from a cache: a hash the cache did not know, asked of the engine itself (a
   * key created through another replica a moment ago). Engines whose `lookup` is the source of truth leave it out.
   */
  lookupMiss?(hash: string): Promise<KeyLookupResult>
}

/** A Responses API item as stored: the wire shape (`{type, id, …}`), kept whole. */
export type StoredItem = Readonly<Record<string, unknown>> & { readonly type: string; readonly id: string }

/**
 * One stored response (`store: true`): its own turn only. A chain's context is rebuilt by walking
 * `previousResponseId` (so forks see only their own branch), never by copying the parent's items.
 */
export interface StoredResponse {
  readonly id: string
  /** Epoch ms. */
  readonly createdAt: number
  readonly completedAt: number | null
  readonly model: string
  readonly status: string
  readonly previousResponseId: string | null
  readonly conversationId: string | null
  /** This turn's input items with ids (instructions excluded: they are never inherited), references resolved. */
  readonly input: readonly StoredItem[]
  readonly output: readonly StoredItem[]
  /**
   * The same turn as Chat Completions messages (the input's, then the reply) with their token counts: what a chained
   * request's history is made of, without converting items again on every turn.
   */
  readonly messages: readonly { readonly message: ChatMessage; readonly tokens: Tokens }[]
  readonly usage: Readonly<Record<string, unknown>> | null
  readonly error: { readonly code: string; readonly message: string } | null
  readonly incompleteDetails: { readonly reason: string } | null
  /** The request parameters the Response object echoes (instructions, tools, text, metadata, …). */
  readonly echo: Readonly<Record<string, unknown>>
}

/** Stored responses and an index of their items by id (for `item_reference`). Tenant-scoped like everything else. */
export interface ResponseStore {
  save(tenant: string, response: StoredResponse): Promise<void>
  get(tenant: string, id: string): Awaitable<StoredResponse | undefined>
  delete(tenant: string, id: string): Promise<boolean>
  /** The stored item with this id (an input or output item of any of the tenant's stored responses). */
  findItem(tenant: string, itemId: string): Awaitable<StoredItem | undefined>
  /** How many of these ids (distinct) are the tenant's stored responses; no record is read (a cached chain's check). */
  countExisting(tenant: string, ids: readonly string[]): Awaitable<number>
}

export interface ConversationRecord {
  readonly id: string
  /** Epoch ms. */
  readonly createdAt: number
  readonly metadata: Readonly<Record<string, string>>
}

/**
 * A conversation's own record (created_at, metadata). Its items are the messages of the session with the same id:
 * one thread, seen through `/conversations`, `/sessions`, `sessionId` and `x-session-id` alike.
 */
export interface ConversationStore {
  /** Creates the record if the id has none yet; returns the record as stored. */
  ensure(tenant: string, record: ConversationRecord): Promise<ConversationRecord>
  get(tenant: string, id: string): Awaitable<ConversationRecord | undefined>
  update(tenant: string, id: string, metadata: Readonly<Record<string, string>>): Promise<ConversationRecord | undefined>
  delete(tenant: string, id: string): Promise<boolean>
}

/**
 * One request's trace: what it was, what it cost, and how its prompt was packed (never the provider key). The messages
 * are kept as the JSON text that went upstream (`messagesJson`), not as objects: a trace is written on every request
 * and read rarely, and one string is what costs least to store (bench/trace-cost.ts).
 */
export interface RequestTrace extends Omit<PromptTrace, 'messages' | 'messagesJson'> {
  /** The messages exactly as sent upstream: a JSON array. */
  readonly messagesJson: string
  /** The request's `x-request-id`. */
  readonly id: string
  /** Epoch ms. */
  readonly createdAt: number
  readonly route: string
  readonly model: string
  readonly stream: boolean
  readonly status: number
  readonly durationMs: number
  readonly promptTokens: number | null
  readonly completionTokens: number | null
  readonly cachedTokens: number | null
  readonly error: { readonly code: string; readonly message: string } | null
}

/** A tenant's most recent request traces, bounded per tenant; deleted with the session they belong to. */
export interface TraceStore {
  /** Adds traces (any tenants) and keeps each tenant's newest `keep`. Not durable: traces are diagnostics. */
  append(traces: readonly { tenant: string; trace: RequestTrace }[], keep: number): Promise<void>
  /** Newest first. */
  list(tenant: string, limit: number): Awaitable<RequestTrace[]>
  get(tenant: string, id: string): Awaitable<RequestTrace | undefined>
  /** Removes the traces of one session; how many went. */
  deleteSession(tenant: string, sessionId: string): Promise<number>
}

/** What one or more requests of a tenant used of one model on one UTC day: added to that day's row. */
export interface UsageEntry {
  readonly tenant: string
  /** The UTC day, `YYYY-MM-DD`. */
  readonly date: string
  readonly model: string
  readonly requests: number
  readonly inputTokens: Tokens
  readonly outputTokens: Tokens
  /** The part of `inputTokens` the provider served from its prompt cache. */
  readonly cachedTokens: Tokens
}

/** A tenant's usage of one model on one UTC day. */
export type UsageRow = Omit<UsageEntry, 'tenant'>

/**
 * Usage per tenant, model and UTC day (GET /api/v1/usage). Written in batches off the request path (usage/
 * usage-recorder.ts); one row per (tenant, date, model), so a tenant's rows grow by at most its models a day.
 */
export interface UsageStore {
  /** Adds each entry's counts to its (tenant, date, model) row, creating it; all of them or none. */
  add(entries: readonly UsageEntry[]): Promise<void>
  /** The tenant's rows with `from` ≤ date ≤ `to` (both `YYYY-MM-DD`, inclusive, optional), by date then model. */
  list(tenant: string, range: { from?: string; to?: string }): Awaitable<UsageRow[]>
}

/**
 * Thrown by `appendExchange` when the save would create a session beyond `bounds.maxSessions`: nothing was saved. A
 * refusal, not a failure; the HTTP layer turns it into the API's quota error (storage/ never builds API errors).
 */
export class SessionLimitError extends Error {
  readonly limit: number
  /** Sessions the tenant holds. */
  readonly used: number
  constructor(limit: number, used: number) {
    super(`the tenant holds ${used} sessions, its limit is ${limit}`)
    this.name = 'SessionLimitError'
    this.limit = limit
    this.used = used
  }
}

/**
 * Thrown by any store method when its engine cannot answer now (a network engine unreachable, restarting, or past its
 * statement timeout): a transient condition the caller may retry, as opposed to a bug or a refused write. The HTTP
 * layer turns it into a 503 with `Retry-After`; storage/ itself never builds API errors.
 */
export class DatabaseUnavailableError extends Error {
  /** Which engine (`postgres`), for logs and metrics. */
  readonly store: string
  constructor(store: string, message: string, opts?: { cause?: unknown }) {
    super(message, opts)
    this.name = 'DatabaseUnavailableError'
    this.store = store
  }
}
