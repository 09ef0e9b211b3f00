/**
 * Conversation memory: sessions and their messages in LMDB, scoped by tenant.
 *
 *   sessions      [tenant, sessionId]             → { createdAt, updatedAt, nextSeq, count }
 *   sessionTimes  [tenant, createdAt, sessionId]  → true (listing newest first; written with the session record)
 *   messages      [tenant, sessionId, seq]        → { message, tokens, createdAt }
 *
 * `message` is the OpenAI message exactly as the client will see it next time (tool calls, tool results, content
 * parts, refusals, reasoning details). Records written before agent messages existed, `{ role, content, tokens,
 * createdAt }`, are read as `{ role, content }` messages: no migration.
 *
 * Seqs are assigned inside the write transaction from the session record, so concurrent appends to one session never
 * collide; they are contiguous (appends at the tail, pruning at the head), so a session's messages are exactly
 * seqs [nextSeq - count, nextSeq) and every read or delete is computed from the record, never a scan.
 *
 * Every write is one abortable (child) transaction: an exchange, its pruning and whatever the hooks index commit
 * together or not at all — also if a hook throws, and also under kill -9 (LMDB's copy-on-write commit).
 *
 * History reads are the hot path (every chat request with a session). Decoding 200 messages from LMDB measured
 * ~0.5 ms p50 here (1,000: ~2 ms), half the whole memory path's budget, so the newest messages of recently used
 * sessions are kept in a bounded LRU that writes patch after they commit. LMDB stays the source of truth: a cache
 * entry that cannot be patched exactly is dropped and read again.
 */
import { LRUCache } from 'lru-cache'
import type { TokenCounter } from '../context/tokenizer.js'
import { storedMessage, storedMessagesBytes } from '../messages/stored-message.js'
import { isObject, type Bytes, type ChatMessage, type Clock, type Role, type Tokens } from '../types.js'
import {
  SessionLimitError,
  type AfterCommit,
  type SessionBounds,
  type SessionInfo,
  type SessionStore,
  type SessionUsage,
  type StoredMessage,
} from './interface.js'
import { checkSessionId, sessionKey } from './session-id.js'
import type { DurableOptions, Key, Store } from './store.js'

export type { SessionInfo, StoredMessage } from './interface.js'

export type { AfterCommit } from './interface.js'
/**
 * Runs inside the write transaction of an append: index `saved`, unindex `pruned` (oldest messages dropped).
 * `prepared` is what the hook's `prepare` step produced for these messages (undefined without one).
 */
export type AppendHook<P = undefined> = (
  tenant: string,
  sessionId: string,
  saved: StoredMessage[],
  pruned: StoredMessage[],
  prepared: P,
) => AfterCommit | void
/**
 * Async work an append hook needs before the transaction, which holds the one write lock and cannot await (e.g.
 * embeddings of the messages about to be saved). Runs for every append, before anything is written.
 */
export type AppendPrepare<P> = (tenant: string, sessionId: string, messages: readonly ChatMessage[]) => Promise<P>
/** Runs inside the delete transaction, before the session's records are removed (they can still be read). */
export type DeleteHook = (tenant: string, sessionId: string) => AfterCommit | void

interface RegisteredAppendHook {
  prepare: AppendPrepare<unknown> | undefined
  write: AppendHook<unknown>
}

export interface SessionRepoOptions {
  /** Messages kept per session; the oldest beyond it are pruned on append. At least 1. */
  maxMessagesPerSession: number
  /** Epoch milliseconds, stamped on messages and sessions. */
  clock: Clock
  /** Counts content tokens once, at write time. */
  counter: TokenCounter
  /** Sessions whose newest messages are cached in memory. 0 disables the cache. Default 1000. */
  cacheSessions?: number
  /** Newest messages cached per session: history reads asking for more go to LMDB. Default 1000. */
  cacheMessagesPerSession?: number
  /** Rough ceiling on the cache's memory (UTF-16 content plus a fixed cost per message). Default 64 MiB. */
  cacheBytes?: Bytes
}

interface SessionRecord {
  createdAt: number
  updatedAt: number
  nextSeq: number
  count: number
}

interface MessageRecord {
  message: ChatMessage
  tokens: Tokens
  createdAt: number
}

/** Roles saved in a session: a request's system and developer messages are its own, never history. */
const STORED_ROLES: ReadonlySet<Role> = new Set<Role>(['user', 'assistant', 'tool', 'function'])

/** The newest messages of one session, oldest first; `complete` when nothing older exists. */
interface CacheEntry {
  messages: StoredMessage[]
  complete: boolean
  bytes: Bytes
  /** The session record's createdAt: a session deleted and recreated (seqs start again) is another session. */
  sessionCreatedAt: number
}

/** Above any first byte ordered-binary writes for a string or a number, so [tenant, HIGH] ends a tenant's range. */
const HIGH = Uint8Array.of(0xff)
/** Set in `meta` once every session has its `sessionTimes` entry (a DATA_DIR from before the index is filled once). */
const TIMES_INDEXED = 'sessionTimesIndexed'

export class SessionRepo implements SessionStore {
  readonly #store: Store
  readonly #max: number
  readonly #clock: Clock
  readonly #counter: TokenCounter
  readonly #cache: LRUCache<string, CacheEntry> | undefined
  readonly #cachePerSession: number
  readonly #appendHooks: RegisteredAppendHook[] = []
  readonly #deleteHooks: DeleteHook[] = []
  /**
   * Set while our write callbacks run: a hook that reads history then sees uncommitted state, which must neither be
   * cached (the transaction may still abort) nor be answered from the cache (it would miss the transaction's writes).
   */
  #inWrite = false

  constructor(store: Store, opts: SessionRepoOptions) {
    if (!Number.isInteger(opts.maxMessagesPerSession) || opts.maxMessagesPerSession < 1)
      throw new RangeError(`maxMessagesPerSession must be a positive integer, got ${opts.maxMessagesPerSession}`)
    this.#store = store
    this.#max = opts.maxMessagesPerSession
    this.#clock = opts.clock
    this.#counter = opts.counter
    this.#cachePerSession = opts.cacheMessagesPerSession ?? 1000
    const sessions = opts.cacheSessions ?? 1000
    this.#cache =
      sessions > 0 && this.#cachePerSession > 0
        ? new LRUCache<string, CacheEntry>({
            max: sessions,
            maxSize: opts.cacheBytes ?? 64 * 1024 * 1024,
            sizeCalculation: (e) => Math.max(1, e.bytes),
          })
        : undefined
    this.#indexCreationTimes()
  }

  /** A plain append hook (nothing to prepare, nothing to do after the commit). */
  onAppend(fn: (tenant: string, sessionId: string, saved: StoredMessage[], pruned: StoredMessage[]) => void): void {
    this.#appendHooks.push({
      prepare: undefined,
      write: (tenant, sessionId, saved, pruned) => {
        fn(tenant, sessionId, saved, pruned)
      },
    })
  }

  /** An append hook with an async `prepare` step run before the transaction; its result is passed to `write`. */
  onAppendPrepared<P>(prepare: AppendPrepare<P>, write: AppendHook<P>): void {
    this.#appendHooks.push({ prepare, write: write as AppendHook<unknown> })
  }

  onDelete(fn: DeleteHook): void {
    this.#deleteHooks.push(fn)
  }

  /** The newest `limit` messages (default all), oldest first. */
  history(tenant: string, sessionId: string, limit = Infinity): StoredMessage[] {
    checkSessionId(tenant, sessionId)
    if (limit <= 0) return []
    const key = sessionKey(tenant, sessionId)
    const cache = this.#inWrite ? undefined : this.#cache
    const rec = this.#record(tenant, sessionId)
    const hit = cache === undefined ? undefined : this.#fresh(key, rec)
    if (hit !== undefined && (hit.complete || hit.messages.length >= limit)) return tail(hit.messages, limit)
    if (rec === undefined) return []
    // Read what this call needs, and at least what the cache keeps, in one range.
    const want = Math.min(rec.count, Math.max(limit, this.#cachePerSession))
    const messages = this.#readRange(tenant, sessionId, rec.nextSeq - want, rec.nextSeq)
    if (cache !== undefined) {
      const kept = tail(messages, this.#cachePerSession)
      cache.set(key, { messages: kept, complete: kept.length === rec.count, bytes: storedMessagesBytes(kept), sessionCreatedAt: rec.createdAt })
    }
    return tail(messages, limit)
  }

  /**
   * The messages with these seqs that still exist, by seq: from the cached newest messages when they cover a seq,
   * else one LMDB read each (recall asks for a few dozen scattered older turns).
   */
  messagesAt(tenant: string, sessionId: string, seqs: Iterable<number>): Map<number, StoredMessage> {
    checkSessionId(tenant, sessionId)
    const out = new Map<number, StoredMessage>()
    const cached = this.#inWrite ? undefined : this.#fresh(sessionKey(tenant, sessionId), this.#record(tenant, sessionId))?.messages
    const first = cached?.[0]?.seq ?? Infinity
    for (const seq of seqs) {
      if (out.has(seq) || !Number.isInteger(seq) || seq < 0) continue
      // Cached messages are contiguous seqs, so the index is the offset from the first.
      const hit = seq >= first ? cached?.[seq - first] : undefined
      if (hit !== undefined && hit.seq === seq) {
        out.set(seq, hit)
        continue
      }
      const v = this.#store.messages.get([tenant, sessionId, seq])
      if (v !== undefined) out.set(seq, fromRecord(seq, asMessageRecord(v)))
    }
    return out
  }

  /**
   * Save one exchange (the request's new non-system messages and the reply) in one transaction; resolves once it is
   * committed and flushed. Creates the session; prunes the oldest messages beyond the limit. Hooks with a `prepare`
   * step get it run first (a failing prepare saves nothing); their after-commit callbacks run once it is durable.
   *
   * `replaceFrom`: a client that edited or regenerated an earlier turn (chat/resent-history.ts) continues the session
   * from that seq: the stored messages from it on are removed in the same transaction (hooks see them as pruned).
   */
  async appendExchange(
    tenant: string,
    sessionId: string,
    messages: readonly ChatMessage[],
    opts: { replaceFrom?: number; bounds?: SessionBounds } = {},
  ): Promise<StoredMessage[]> {
    checkSessionId(tenant, sessionId)
    const max = Math.min(this.#max, opts.bounds?.maxMessages ?? Infinity)
    const maxSessions = opts.bounds?.maxSessions
    // Nothing to add and nothing to replace: no write. (Replacing with nothing removes a tail: a conversation item.)
    if (messages.length === 0 && opts.replaceFrom === undefined) return []
    const now = this.#clock()
    // Tokenize before the transaction: it holds the single write lock.
    const records: MessageRecord[] = messages.map((m) => {
      if (!STORED_ROLES.has(m.role)) throw new TypeError(`${m.role} messages are not stored in sessions`)
      return { message: m, tokens: this.#counter.storedContentTokens(m), createdAt: now }
    })
    const replaceFrom = opts.replaceFrom
    const { messages: db, sessions } = this.#store
    const hooks = this.#appendHooks
    const prepared = await Promise.all(hooks.map((h) => h.prepare?.(tenant, sessionId, messages)))

    const { saved, pruned, after } = await this.#write(() => {
      const existing = this.#record(tenant, sessionId)
      // Counted inside the write transaction, which LMDB runs one at a time across processes: two saves racing for
      // the last free session see each other. Only a save that creates a session pays for it (a key count over the
      // tenant's range, no values decoded).
      if (existing === undefined && maxSessions !== undefined) {
        const used = this.#sessionCount(tenant)
        if (used >= maxSessions) throw new SessionLimitError(maxSessions, used)
      }
      const rec = existing ?? { createdAt: now, updatedAt: now, nextSeq: 0, count: 0 }
      if (existing === undefined) this.#store.sessionTimes.put([tenant, rec.createdAt, sessionId], true)
      const pruned: StoredMessage[] = []
      if (replaceFrom !== undefined) {
        // From the tail back to `replaceFrom`; seqs stay contiguous because the new messages take the freed ones.
        const from = Math.max(replaceFrom, rec.nextSeq - rec.count)
        for (let seq = from; seq < rec.nextSeq; seq++) {
          const old = db.get([tenant, sessionId, seq])
          if (old !== undefined) pruned.push(fromRecord(seq, asMessageRecord(old)))
          db.remove([tenant, sessionId, seq])
        }
        rec.count -= Math.max(0, rec.nextSeq - from)
        rec.nextSeq = Math.min(rec.nextSeq, from)
      }
      const saved = records.map((r, i) => fromRecord(rec.nextSeq + i, r))
      for (const [i, r] of records.entries()) db.put([tenant, sessionId, rec.nextSeq + i], r)
      rec.nextSeq += records.length
      rec.count += records.length
      rec.updatedAt = Math.max(rec.updatedAt, now)

      const firstSaved = saved[0]?.seq ?? Infinity
      for (let seq = rec.nextSeq - rec.count; rec.count > max; seq++, rec.count--) {
        // A message of this very exchange pruned at once is passed as the same object hooks get in `saved`, so they
        // can tell it from a replaced message (a rewind) whose seq a saved one took over.
        const old = seq >= firstSaved ? saved[seq - firstSaved] : db.get([tenant, sessionId, seq])
        if (old !== undefined) pruned.push(seq >= firstSaved ? (old as StoredMessage) : fromRecord(seq, asMessageRecord(old)))
        db.remove([tenant, sessionId, seq])
      }
      sessions.put([tenant, sessionId], rec)
      const after: AfterCommit[] = []
      for (const [i, hook] of hooks.entries()) {
        const done = hook.write(tenant, sessionId, saved, pruned, prepared[i])
        if (done) after.push(done)
      }
      return { saved, pruned, after }
    })
    if (replaceFrom === undefined) this.#patchCache(sessionKey(tenant, sessionId), saved, pruned)
    else this.#cache?.delete(sessionKey(tenant, sessionId))
    for (const done of after) done()
    return saved
  }

  get(tenant: string, sessionId: string): SessionInfo | undefined {
    checkSessionId(tenant, sessionId)
    const rec = this.#record(tenant, sessionId)
    return rec === undefined ? undefined : info(sessionId, rec)
  }

  /**
   * A page of the tenant's sessions, newest first (by creation time; ties by id, code point order, descending);
   * `after` is the previous page's last id. An `after` that names no session (deleted since) ends the listing.
   */
  list(tenant: string, opts: { limit: number; after?: string }): { data: SessionInfo[]; hasMore: boolean } {
    const limit = Math.max(0, Math.floor(opts.limit))
    const data: SessionInfo[] = []
    let hasMore = false
    let start: Key = [tenant, HIGH]
    if (opts.after !== undefined) {
      const from = this.#record(tenant, opts.after)
      if (from === undefined) return { data, hasMore }
      start = [tenant, from.createdAt, opts.after]
    }
    // +1 to learn whether there is more, +1 because `start` includes `after` itself.
    const range = this.#store.sessionTimes.getRange({ start, end: [tenant], reverse: true, limit: limit + 2 })
    for (const { key } of range) {
      const id = Array.isArray(key) ? key[2] : undefined
      if (typeof id !== 'string' || id === opts.after) continue
      const rec = this.#record(tenant, id)
      if (rec === undefined) continue
      if (data.length === limit) {
        hasMore = true
        break
      }
      data.push(info(id, rec))
    }
    return { data, hasMore }
  }

  /** One pass over the tenant's session records (their counts; no message is read). */
  usage(tenant: string): SessionUsage {
    let sessions = 0
    let largestSession = 0
    for (const { value } of this.#store.sessions.getRange({ start: [tenant], end: [tenant, HIGH] })) {
      sessions++
      largestSession = Math.max(largestSession, asSessionRecord(value).count)
    }
    return { sessions, largestSession }
  }

  #sessionCount(tenant: string): number {
    return this.#store.sessions.getKeysCount({ start: [tenant], end: [tenant, HIGH] })
  }

  /** Remove a session and all of its messages for good; false if it did not exist. */
  async delete(tenant: string, sessionId: string): Promise<boolean> {
    checkSessionId(tenant, sessionId)
    const { messages: db, sessions } = this.#store
    const after: AfterCommit[] = []
    const existed = await this.#write(() => {
      after.length = 0
      const rec = this.#record(tenant, sessionId)
      if (rec === undefined) return false
      for (const hook of this.#deleteHooks) {
        const done = hook(tenant, sessionId)
        if (done) after.push(done)
      }
      for (let seq = rec.nextSeq - rec.count; seq < rec.nextSeq; seq++) db.remove([tenant, sessionId, seq])
      sessions.remove([tenant, sessionId])
      this.#store.sessionTimes.remove([tenant, rec.createdAt, sessionId])
      return true
    }, { releasing: true })
    this.#cache?.delete(sessionKey(tenant, sessionId))
    for (const done of after) done()
    return existed
  }

  /**
   * One abortable transaction: lmdb-js batches async transaction callbacks into one LMDB transaction, and a plain
   * callback that throws midway leaves its earlier writes in the batch; a child transaction rolls them back.
   * Resolves once committed and flushed to disk.
   */
  async #write<T>(fn: () => T, opts?: DurableOptions): Promise<T> {
    return this.#store.durable(() => {
      this.#inWrite = true
      try {
        return fn()
      } finally {
        this.#inWrite = false
      }
    }, opts)
  }

  /** Sessions stored before `sessionTimes` existed get their entry, once per DATA_DIR (idempotent if two race). */
  #indexCreationTimes(): void {
    const { meta, sessions, sessionTimes } = this.#store
    if (meta.get(TIMES_INDEXED) === true) return
    this.#store.transactionSync(() => {
      for (const { key, value } of sessions.getRange()) {
        const [tenant, id] = key as [string, string]
        void sessionTimes.put([tenant, asSessionRecord(value).createdAt, id], true)
      }
      void meta.put(TIMES_INDEXED, true)
    })
  }

  #record(tenant: string, sessionId: string): SessionRecord | undefined {
    const v = this.#store.sessions.get([tenant, sessionId])
    return v === undefined ? undefined : asSessionRecord(v)
  }

  /**
   * The cached entry if it still matches the committed record `rec`, else undefined (and the entry is dropped).
   * Another process sharing the store (WORKERS, replicas on one DATA_DIR) may have appended, pruned or deleted and
   * recreated the session since it was cached; the record, one small LMDB read (~µs), tells. Within one process the
   * patching below keeps entries current and this check always passes.
   */
  #fresh(key: string, rec: SessionRecord | undefined): CacheEntry | undefined {
    const entry = this.#cache?.get(key)
    if (entry === undefined) return undefined
    const first = entry.messages[0]?.seq ?? rec?.nextSeq ?? 0
    const last = entry.messages.at(-1)?.seq ?? first - 1
    const current =
      rec !== undefined &&
      rec.createdAt === entry.sessionCreatedAt &&
      last === rec.nextSeq - 1 &&
      first >= rec.nextSeq - rec.count &&
      (!entry.complete || entry.messages.length === rec.count)
    if (current) return entry
    this.#cache?.delete(key)
    return undefined
  }

  #readRange(tenant: string, sessionId: string, fromSeq: number, toSeq: number): StoredMessage[] {
    const out: StoredMessage[] = []
    const range = this.#store.messages.getRange({
      start: [tenant, sessionId, fromSeq],
      end: [tenant, sessionId, toSeq],
    })
    for (const { key, value } of range) {
      const seq = Array.isArray(key) ? key[2] : undefined
      if (typeof seq !== 'number') throw new Error(`corrupt message key ${JSON.stringify(key)}`)
      out.push(fromRecord(seq, asMessageRecord(value)))
    }
    return out
  }

  /**
   * Apply a committed append to the cached entry. Commits resolve in order, but a history read may already have
   * cached the post-commit state (or an older one): patch only when the entry ends exactly where `saved` begins,
   * skip when it already has them, and otherwise drop it so the next read goes to LMDB.
   */
  #patchCache(key: string, saved: StoredMessage[], pruned: StoredMessage[]): void {
    const cache = this.#cache
    const entry = cache?.get(key)
    const first = saved[0]
    const last = saved.at(-1)
    if (cache === undefined || entry === undefined || first === undefined || last === undefined) return
    const lastCached = entry.messages.at(-1)?.seq ?? -1
    if (lastCached >= last.seq) return
    if (lastCached !== first.seq - 1 && entry.messages.length > 0) {
      cache.delete(key)
      return
    }
    const cutoff = pruned.length > 0 ? (pruned.at(-1)?.seq ?? -1) : -1
    let messages = entry.messages.filter((m) => m.seq > cutoff).concat(saved)
    let complete = entry.complete
    if (messages.length > this.#cachePerSession) {
      messages = tail(messages, this.#cachePerSession)
      complete = false
    }
    cache.set(key, { messages, complete, bytes: storedMessagesBytes(messages), sessionCreatedAt: entry.sessionCreatedAt })
  }
}

function tail<T>(items: T[], limit: number): T[] {
  return limit >= items.length ? items.slice() : items.slice(items.length - limit)
}

function fromRecord(seq: number, r: MessageRecord): StoredMessage {
  return storedMessage(seq, r.message, r.tokens, r.createdAt)
}

function info(id: string, rec: SessionRecord): SessionInfo {
  return { id, createdAt: rec.createdAt, updatedAt: rec.updatedAt, messageCount: rec.count }
}

function asSessionRecord(v: unknown): SessionRecord {
  if (!isObject(v) || typeof v.nextSeq !== 'number' || typeof v.count !== 'number')
    throw new Error('corrupt session record')
  return { createdAt: Number(v.createdAt), updatedAt: Number(v.updatedAt), nextSeq: v.nextSeq, count: v.count }
}

function asMessageRecord(v: unknown): MessageRecord {
  if (!isObject(v)) throw new Error('corrupt message record')
  if (isObject(v.message) && typeof v.message.role === 'string') {
    return { message: v.message as unknown as ChatMessage, tokens: Number(v.tokens), createdAt: Number(v.createdAt) }
  }
  // Written before agent messages (a role and a string).
  if ((v.role === 'user' || v.role === 'assistant') && typeof v.content === 'string') {
    return { message: { role: v.role, content: v.content }, tokens: Number(v.tokens), createdAt: Number(v.createdAt) }
  }
  throw new Error('corrupt message record')
}
