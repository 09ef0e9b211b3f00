/**
 * Sessions and their messages in PostgreSQL (`sessions`, `messages`), with LMDB's guarantees (session-repo.ts):
 *
 * - One transaction per exchange, and one statement (`recallgate_append_exchange`, append-exchange-sql.ts: one round
 *   trip): the session row is created if missing and locked `FOR UPDATE`, so concurrent appends to one session (from
 *   any replica) queue on it; seqs are assigned from the row inside the transaction, contiguous (appends at the tail,
 *   pruning at the head), so a session's messages are exactly seqs [next_seq - count, next_seq); `replaceFrom` and the
 *   pruning beyond `maxMessagesPerSession` happen in it too, and so does long-term recall's indexing of the turns. The
 *   promise resolves once the statement, committed in autocommit, has returned.
 * - Tenant first in every key and every WHERE.
 * - The message is kept whole as `jsonb` (jsonb keeps values, not key order or whitespace: the JSON a later request
 *   sends upstream may order an object's keys differently than the client did).
 *
 * No history cache here: every replica reads the committed rows, so a write through one is read by the next request on
 * any other (one indexed range read, newest first).
 *
 * Long-term recall (postgres/recall-store.ts) takes part in a save through its arguments to that statement (`onSave`),
 * and in a delete through a hook run inside the delete's transaction, on its connection, after the session row is
 * locked, like SessionRepo's in LMDB; what follows each runs once the change has committed.
 */
import type { TokenCounter } from '../../context/tokenizer.js'
import type { ChatMessage, Clock, Role, Tokens } from '../../types.js'
import {
  SessionLimitError,
  type AfterCommit,
  type IndexChange,
  type IndexMeta,
  type SessionBounds,
  type SessionInfo,
  type SessionStore,
  type SessionUsage,
  type StoredMessage,
} from '../interface.js'
import { storedMessage } from '../../messages/stored-message.js'
import { checkSessionId, storableSessionIdChars } from '../session-id.js'
import { ms, prepared, type Pg, type Queryable, type Row } from './pool.js'
import { jsonb } from './jsonb.js'

export interface PgSessionStoreOptions {
  maxMessagesPerSession: number
  clock: Clock
  counter: TokenCounter
}

const STORED_ROLES: ReadonlySet<Role> = new Set<Role>(['user', 'assistant', 'tool', 'function'])

/** Long-term recall's arguments to a save's statement (recallgate_append_exchange). */
export interface PgRecallArgs {
  namespace: string
  embedderId: string
  /** The prepared vectors' dimension (a namespace of another embedder or dimension starts over). */
  dimension: number
  /** The epoch of the namespace if this save creates it. */
  epoch: string
  /** Per message, its vector's bytes, or null when it is not indexed; null altogether when nothing was prepared. */
  vectors: Array<Buffer | null> | null
  /** Per message, its rendered line's tokens. */
  lines: Tokens[] | null
}

/** What the statement did to recall's namespace. */
export interface PgRecallResult {
  /** Dropped before the additions (its vectors came from another embedder). */
  dropped: boolean
  removed: IndexChange | null
  /** The added docs took labels firstLabel .. firstLabel + count - 1, in the messages' order. */
  added: { fromVersion: number; meta: IndexMeta; firstLabel: number; count: number } | null
}

/**
 * Long-term recall's part of a save: `prepare` runs before the statement (a failing prepare saves nothing), `args`
 * go into it, `saved` runs once it has committed, with `saved` the new messages and `pruned` the seqs removed (a
 * rewind's, then the oldest beyond the bound; a message of this save pruned at once is the same object as in `saved`).
 */
export interface PgSaveHook<P> {
  prepare(tenant: string, sessionId: string, messages: readonly ChatMessage[]): Promise<P>
  args(tenant: string, sessionId: string, prepared: P): PgRecallArgs
  saved(args: PgRecallArgs, result: PgRecallResult, saved: StoredMessage[], pruned: Pick<StoredMessage, 'seq'>[], prepared: P): void
}

/** Inside a delete's transaction, with the session row locked and its records still there. */
export type PgDeleteHook = (c: Queryable, tenant: string, sessionId: string) => Promise<AfterCommit | void>

interface AppendResult extends PgRecallResult {
  /** Set instead of the rest when a new session would pass the tenant's bound: the sessions it holds. */
  limit?: number
  first: number
  replaced: number[]
  pruned: number[]
}

interface SessionRow extends Row {
  created_at: string
  updated_at: string
  next_seq: string
  count: number
}

/** A request's history read and its save: every request with a session runs them, each prepared once per connection. */
const HISTORY = prepared(
  'history',
  'SELECT seq, message, tokens, created_at FROM messages WHERE tenant = $1 AND session_id = $2 ORDER BY seq DESC LIMIT $3',
)
const APPEND_EXCHANGE = prepared(
  'append_exchange',
  'SELECT recallgate_append_exchange($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) AS r',
)

export class PgSessionStore implements SessionStore {
  readonly #pg: Pg
  readonly #max: number
  readonly #clock: Clock
  readonly #counter: TokenCounter
  #saveHook: PgSaveHook<unknown> | undefined
  readonly #deleteHooks: PgDeleteHook[] = []

  constructor(pg: Pg, opts: PgSessionStoreOptions) {
    if (!Number.isInteger(opts.maxMessagesPerSession) || opts.maxMessagesPerSession < 1)
      throw new RangeError(`maxMessagesPerSession must be a positive integer, got ${opts.maxMessagesPerSession}`)
    this.#pg = pg
    this.#max = opts.maxMessagesPerSession
    this.#clock = opts.clock
    this.#counter = opts.counter
  }

  /** Long-term recall's part in every save (one per store). */
  onSave<P>(hook: PgSaveHook<P>): void {
    if (this.#saveHook !== undefined) throw new Error('a session store takes one save hook')
    this.#saveHook = hook as PgSaveHook<unknown>
  }

  onDelete(fn: PgDeleteHook): void {
    this.#deleteHooks.push(fn)
  }

  /** The stored messages at these seqs (those that exist). */
  async messagesAt(tenant: string, sessionId: string, seqs: Iterable<number>): Promise<Map<number, StoredMessage>> {
    const wanted = [...seqs]
    const out = new Map<number, StoredMessage>()
    if (wanted.length === 0) return out
    const rows = await this.#pg.query(
      'messages_at',
      'SELECT seq, message, tokens, created_at FROM messages WHERE tenant = $1 AND session_id = $2 AND seq = ANY($3::bigint[])',
      [tenant, sessionId, wanted],
    )
    for (const r of rows) out.set(ms(r.seq), storedMessage(ms(r.seq), r.message as ChatMessage, Number(r.tokens), ms(r.created_at)))
    return out
  }

  async history(tenant: string, sessionId: string, limit = Infinity): Promise<StoredMessage[]> {
    checkSessionId(tenant, sessionId)
    if (limit <= 0) return []
    const rows = await this.#pg.query('history', HISTORY, [tenant, sessionId, Number.isFinite(limit) ? Math.floor(limit) : null])
    const out: StoredMessage[] = []
    for (let i = rows.length - 1; i >= 0; i--) {
      const r = rows[i] as Row
      out.push(storedMessage(ms(r.seq), r.message as ChatMessage, Number(r.tokens), ms(r.created_at)))
    }
    return out
  }

  async get(tenant: string, sessionId: string): Promise<SessionInfo | undefined> {
    checkSessionId(tenant, sessionId)
    const rows = await this.#pg.query<SessionRow>(
      'session_get',
      'SELECT created_at, updated_at, next_seq, count FROM sessions WHERE tenant = $1 AND session_id = $2',
      [tenant, sessionId],
    )
    const r = rows[0]
    return r === undefined ? undefined : info(sessionId, r)
  }

  async list(tenant: string, opts: { limit: number; after?: string }): Promise<{ data: SessionInfo[]; hasMore: boolean }> {
    const limit = Math.max(0, Math.floor(opts.limit))
    // A client's `after` no stored id can hold names no session: the empty page any such `after` gets, answered here
    // because PostgreSQL text cannot hold the NUL it may carry (the query would fail: a 500 for a client's typo).
    if (opts.after !== undefined && !storableSessionIdChars(opts.after)) return { data: [], hasMore: false }
    const rows = await this.#pg.query<SessionRow & { session_id: string }>(
      'session_list',
      // Newest first, ties by id descending, as LMDB's sessionTimes index orders them. An `after` that names no
      // session makes the comparison NULL: an empty page, as with LMDB.
      `SELECT session_id, created_at, updated_at, next_seq, count FROM sessions
       WHERE tenant = $1 AND ($2::text IS NULL OR (created_at, session_id) <
         (SELECT created_at, session_id FROM sessions WHERE tenant = $1 AND session_id = $2))
       ORDER BY created_at DESC, session_id DESC LIMIT $3`,
      [tenant, opts.after ?? null, limit + 1],
    )
    return { data: rows.slice(0, limit).map((r) => info(r.session_id, r)), hasMore: rows.length > limit }
  }

  async appendExchange(
    tenant: string,
    sessionId: string,
    messages: readonly ChatMessage[],
    opts: { replaceFrom?: number; bounds?: SessionBounds } = {},
  ): Promise<StoredMessage[]> {
    checkSessionId(tenant, sessionId)
    if (messages.length === 0 && opts.replaceFrom === undefined) return []
    const now = this.#clock()
    // Tokenized before the statement: it holds the session's row lock.
    const tokens = messages.map((m) => {
      if (!STORED_ROLES.has(m.role)) throw new TypeError(`${m.role} messages are not stored in sessions`)
      return this.#counter.storedContentTokens(m)
    })
    const max = Math.min(this.#max, opts.bounds?.maxMessages ?? Infinity)
    const maxSessions = opts.bounds?.maxSessions
    const hook = this.#saveHook
    const prepared = hook === undefined ? undefined : await hook.prepare(tenant, sessionId, messages)
    const recall = hook?.args(tenant, sessionId, prepared)
    const rows = await this.#pg.query<{ r: AppendResult }>(
      'append_exchange',
      APPEND_EXCHANGE,
      [
        tenant,
        sessionId,
        now,
        messages.map((m) => jsonb(m)),
        tokens,
        opts.replaceFrom ?? null,
        max,
        maxSessions ?? null,
        recall?.namespace ?? null,
        recall?.embedderId ?? null,
        recall?.dimension ?? null,
        recall?.epoch ?? null,
        recall?.vectors ?? null,
        recall?.lines ?? null,
      ],
    )
    const r = rows[0]?.r
    if (r === undefined) throw new Error('recallgate_append_exchange returned nothing')
    if (r.limit !== undefined) throw new SessionLimitError(maxSessions ?? 0, r.limit)
    const saved = messages.map((m, i) => storedMessage(r.first + i, m, tokens[i] ?? 0, now))
    // A message of this exchange pruned at once is passed as its object in `saved` (the hook skips indexing it).
    const pruned: Pick<StoredMessage, 'seq'>[] = r.replaced.map((seq) => ({ seq }))
    for (const seq of r.pruned) pruned.push(saved[seq - r.first] ?? { seq })
    if (hook !== undefined && recall !== undefined) hook.saved(recall, r, saved, pruned, prepared)
    return saved
  }

  async usage(tenant: string): Promise<SessionUsage> {
    const rows = await this.#pg.query<Row & { sessions: number; largest: number }>(
      'session_usage',
      'SELECT count(*)::int AS sessions, coalesce(max(count), 0)::int AS largest FROM sessions WHERE tenant = $1',
      [tenant],
    )
    return { sessions: rows[0]?.sessions ?? 0, largestSession: rows[0]?.largest ?? 0 }
  }

  async delete(tenant: string, sessionId: string): Promise<boolean> {
    checkSessionId(tenant, sessionId)
    const remove = 'DELETE FROM sessions WHERE tenant = $1 AND session_id = $2 RETURNING 1 AS gone'
    // Its messages go with it (ON DELETE CASCADE), in the same statement's transaction.
    if (this.#deleteHooks.length === 0) return (await this.#pg.query('session_delete', remove, [tenant, sessionId])).length > 0
    const after: AfterCommit[] = []
    const gone = await this.#pg.transaction('session_delete', async (c) => {
      // The session row first, as a save takes it: a save and a delete of one session queue instead of deadlocking.
      const found = await c.query('SELECT 1 FROM sessions WHERE tenant = $1 AND session_id = $2 FOR UPDATE', [tenant, sessionId])
      if (found.rowCount === 0) return false
      for (const hook of this.#deleteHooks) {
        const done = await hook(c, tenant, sessionId)
        if (done) after.push(done)
      }
      return (await c.query(remove, [tenant, sessionId])).rowCount === 1
    })
    for (const done of after) done()
    return gone
  }
}

function info(id: string, r: SessionRow): SessionInfo {
  return { id, createdAt: ms(r.created_at), updatedAt: ms(r.updated_at), messageCount: r.count }
}
