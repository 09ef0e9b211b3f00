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
  /**
   * How many of the tenant's stored responses have ever been deleted, through any process or replica: one read. A
   * chain walked while this read N has every turn still stored for as long as it reads N (saves never change it).
   */
  deletions(tenant: string): Awaitable<number>
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

/** A knowledge-base file as the API shows it (and as it is stored). */
export interface FileRow {
  id: string
  object: 'file'
  filename: string
  bytes: number
  chunks: number
  status: 'processed'
  created_at: number
  metadata: Record<string, unknown> | null
  content_type: string
}

export interface ChunkRow {
  text: string
  tokens: number
  /** Character range in the file's extracted text. */
  start: number
  end: number
  headingPath: string[]
  /** The chunk's label in its namespace's indexes. */
  label: number
}

/** The committed state of one index namespace (a tenant's files; a session's recalled turns). */
export interface IndexMeta {
  embedderId: string
  dimension: number
  /** Bumped by every committed change to the namespace. */
  version: number
  count: number
  nextLabel: number
  /** Set when the namespace is created: a recreated namespace's versions start again under a new epoch. */
  epoch?: string
}

/** What a write did to a namespace: apply it to the loaded indexes with `SearchIndex.applyAdd/applyRemove`. */
export interface IndexChange {
  fromVersion: number
  meta: IndexMeta
  labels: number[]
}

/**
 * One committed change to a namespace, by version: labels added (with the owner's ref of each) and removed. Another
 * process whose loaded index is a few versions behind applies these instead of reloading the whole namespace.
 */
export interface IndexLogEntry {
  add?: Array<[label: number, ref: readonly (string | number)[]]>
  remove?: number[]
}

/** Rows read in order, from memory (LMDB: one read snapshot) or page by page (a network engine). */
export type RowStream<T> = Iterable<T> | AsyncIterable<T>

/**
 * The committed vectors, meta and change log of index namespaces: what each process's in-memory indexes
 * (retrieval/search-index.ts) are built from and catch up from, so that every search sees every change committed
 * before it (read the meta first, then apply the log up to its version).
 */
export interface IndexRecordsReader {
  meta(namespace: string): Awaitable<IndexMeta | undefined>
  /**
   * The same meta, read synchronously, where the engine can (an embedded one; a database answers only through `meta`):
   * a request's short path asks it without an await.
   */
  metaNow?(namespace: string): IndexMeta | undefined
  /** Namespaces with meta whose name starts with `prefix`. */
  namespaces(prefix: string): Awaitable<string[]>
  /** Every vector of the namespace, by label. */
  vectors(namespace: string): RowStream<{ label: number; vector: Float32Array }>
  /** The vectors of these labels still stored (those removed since are left out). */
  vectorsAt(namespace: string, labels: readonly number[]): Awaitable<Map<number, Float32Array>>
  /** The log entries of versions `from`..`to` (inclusive), or undefined when any of them is no longer kept. */
  changes(namespace: string, from: number, to: number): Awaitable<IndexLogEntry[] | undefined>
}

/**
 * Versions of change log kept per namespace. A process further behind than this reloads the namespace whole; 256
 * covers minutes of uploads or chat turns, and the entries are small (labels and refs, no text or vectors).
 */
export const INDEX_LOG_KEEP = 256

/** One chunk with its file, for a search hit or an index (re)load. */
export interface FileChunk {
  fileId: string
  index: number
  chunk: ChunkRow
  file: FileRow
}

export interface InsertFileOptions {
  tenant: string
  namespace: string
  file: FileRow
  chunks: ReadonlyArray<Omit<ChunkRow, 'label'>>
  vectors: readonly Float32Array[]
  embedderId: string
  /** Sees the namespace meta inside the transaction and may throw to refuse (another embedder, too many chunks). */
  check: (meta: IndexMeta | undefined, adding: number) => void
  /** Told inside the transaction, before the commit, what the change will be (see SearchIndex.expect). */
  onChange?: (change: IndexChange) => void
}

/**
 * The knowledge base at rest: files, their chunks and vectors, and the namespace meta and change log, written
 * together. A file is inserted, or deleted, with its chunks, vectors, meta and log entry all or nothing as any reader
 * sees it (one transaction; LMDB writes a large file in slices that appear at once, file-repo.ts), resolving once it
 * is durable; concurrent writers to one namespace (any process) never share a label and versions never skip. Tenant
 * first in every key: a tenant's calls can only reach its own rows.
 */
export interface FileStore {
  readonly index: IndexRecordsReader
  getFile(tenant: string, id: string): Awaitable<FileRow | undefined>
  /** A tenant's files, oldest first. */
  listFiles(tenant: string): Awaitable<FileRow[]>
  /** The chunks at these refs with their files, in the order asked; undefined for each one that is gone. */
  chunksAt(tenant: string, refs: ReadonlyArray<readonly [fileId: string, index: number]>): Awaitable<Array<FileChunk | undefined>>
  /** Every chunk of a tenant with its file (an index load). */
  tenantChunks(tenant: string): RowStream<FileChunk>
  insertFile(opts: InsertFileOptions): Promise<IndexChange>
  /**
   * Remove what uploads that will never finish left behind (an engine that writes a file in several transactions:
   * a process that died part-way); the number removed. Run at start.
   */
  recover?(): Promise<number>
  /** Deletes a file, its chunks and vectors; undefined when the tenant has no such file. */
  deleteFile(tenant: string, namespace: string, id: string, onChange?: (change: IndexChange) => void): Promise<IndexChange | undefined>
}

/** Returned by a store hook to run once its transaction has committed (e.g. to update an in-memory index). */
export type AfterCommit = () => void

/** What long-term recall computed for the messages of a save, before its transaction: embeddings and line counts. */
export interface RecallPrepared {
  vectors: Float32Array[]
  lines: Tokens[]
}

/** What a save did to a session's recall namespace, for the loaded index to follow once it has committed. */
export interface RecallWrite {
  namespace: string
  /** The namespace was dropped before the additions (its vectors came from another embedder). */
  dropped: boolean
  removed?: IndexChange
  added?: { change: IndexChange; docs: Array<{ seq: number; label: number; text: string; vector: Float32Array }> }
  /** Seqs the save removed (pruned, or rewound): their cached line counts are stale. */
  gone: number[]
}

/** Recall's side of the hooks a RecallStore runs in every save and delete of a session. */
export interface RecallIndexer {
  readonly embedderId: string
  namespaceOf(tenant: string, sessionId: string): string
  /** Before the save's transaction; undefined leaves the save's messages unindexed (an embedder failure). */
  prepare(messages: readonly ChatMessage[]): Promise<RecallPrepared | undefined>
  /** Once the save has committed. */
  saved(write: RecallWrite): void
  /** Once the delete has committed, and also before (a search meanwhile reloads the state still committed). */
  deleted(namespace: string): void
}

/**
 * What long-term recall keeps beside each session: the session's namespace (vectors, meta and change log, as the
 * knowledge base's), each indexed turn's label and rendered-line token count by seq, and the namespace's owner. It is
 * written by hooks in the session's own save and delete transactions (`attach`), so a turn is recallable exactly when
 * it is saved and never after its session is deleted, through every process sharing the store.
 */
export interface RecallStore {
  readonly index: IndexRecordsReader
  owner(namespace: string): Awaitable<{ tenant: string; sessionId: string } | undefined>
  /** seq → label of every indexed turn. */
  labels(namespace: string): Awaitable<Map<number, number>>
  /** seq → line tokens of those of `seqs` that are indexed. */
  lines(namespace: string, seqs: readonly number[]): Awaitable<Map<number, Tokens>>
  messagesAt(tenant: string, sessionId: string, seqs: Iterable<number>): Awaitable<Map<number, StoredMessage>>
  /** Index every save and delete of a session from now on, in its transaction. */
  attach(indexer: RecallIndexer): void
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
 * Thrown by a session store's methods for an id no engine can store (storage/session-id.ts): nothing was read or
 * written. The HTTP layer turns it into a 400 naming `sessionId`; storage/ itself never builds API errors.
 */
export class InvalidSessionIdError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'InvalidSessionIdError'
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
