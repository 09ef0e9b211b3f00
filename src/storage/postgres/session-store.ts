/**
 * Sessions and their messages in PostgreSQL (`sessions`, `messages`), with LMDB's guarantees (session-repo.ts):
 *
 * - One transaction per exchange: the session row is created if missing and locked `FOR UPDATE`, so concurrent
 *   appends to one session (from any replica) queue on it; seqs are assigned from the row inside the transaction,
 *   contiguous (appends at the tail, pruning at the head), so a session's messages are exactly seqs
 *   [next_seq - count, next_seq); `replaceFrom` and the pruning beyond `maxMessagesPerSession` happen in it too. The
 *   promise resolves once COMMIT has returned.
 * - Tenant first in every key and every WHERE.
 * - The message is kept whole as `jsonb` (jsonb keeps values, not key order or whitespace: the JSON a later request
 *   sends upstream may order an object's keys differently than the client did).
 *
 * No history cache here: every replica reads the committed rows, so a write through one is read by the next request on
 * any other (one indexed range read, newest first).
 *
 * Hooks (long-term recall, postgres/recall-store.ts) run inside a save's and a delete's transaction, on its connection,
 * after the session row is locked, like SessionRepo's in LMDB; what they return runs once COMMIT has returned.
 */
import type { TokenCounter } from '../../context/tokenizer.js'
import type { ChatMessage, Clock, Role } from '../../types.js'
import {
  SessionLimitError,
  type AfterCommit,
  type SessionBounds,
  type SessionInfo,
  type SessionStore,
  type SessionUsage,
  type StoredMessage,
} from '../interface.js'
import { storedMessage } from '../../messages/stored-message.js'
import { checkSessionId } from '../session-id.js'
import { ms, type Pg, type Queryable, type Row } from './pool.js'

export interface PgSessionStoreOptions {
  maxMessagesPerSession: number
  clock: Clock
  counter: TokenCounter
}

const STORED_ROLES: ReadonlySet<Role> = new Set<Role>(['user', 'assistant', 'tool', 'function'])

/**
 * Inside a save's transaction: `saved` are the new messages, `pruned` the seqs removed (a rewind's, then the oldest
 * beyond the bound; a message of this save pruned at once is the same object as in `saved`).
 */
export type PgAppendHook<P> = (
  c: Queryable,
  tenant: string,
  sessionId: string,
  saved: StoredMessage[],
  pruned: Pick<StoredMessage, 'seq'>[],
  prepared: P,
) => Promise<AfterCommit | void>
/** Inside a delete's transaction, with the session row locked and its records still there. */
export type PgDeleteHook = (c: Queryable, tenant: string, sessionId: string) => Promise<AfterCommit | void>

interface RegisteredHook {
  prepare: (tenant: string, sessionId: string, messages: readonly ChatMessage[]) => Promise<unknown>
  write: PgAppendHook<unknown>
}

interface SessionRow extends Row {
  created_at: string
  updated_at: string
  next_seq: string
  count: number
}

export class PgSessionStore implements SessionStore {
  readonly #pg: Pg
  readonly #max: number
  readonly #clock: Clock
  readonly #counter: TokenCounter
  readonly #appendHooks: RegisteredHook[] = []
  readonly #deleteHooks: PgDeleteHook[] = []

  constructor(pg: Pg, opts: PgSessionStoreOptions) {
    if (!Number.isInteger(opts.maxMessagesPerSession) || opts.maxMessagesPerSession < 1)
      throw new RangeError(`maxMessagesPerSession must be a positive integer, got ${opts.maxMessagesPerSession}`)
    this.#pg = pg
    this.#max = opts.maxMessagesPerSession
    this.#clock = opts.clock
    this.#counter = opts.counter
  }

  /** A hook with an async `prepare` step run before the transaction (a failing prepare saves nothing). */
  onAppendPrepared<P>(prepare: (tenant: string, sessionId: string, messages: readonly ChatMessage[]) => Promise<P>, write: PgAppendHook<P>): void {
    this.#appendHooks.push({ prepare, write: write as PgAppendHook<unknown> })
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
    const rows = await this.#pg.query(
      'history',
      `SELECT seq, message, tokens, created_at FROM messages WHERE tenant = $1 AND session_id = $2
       ORDER BY seq DESC LIMIT $3`,
      [tenant, sessionId, Number.isFinite(limit) ? Math.floor(limit) : null],
    )
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
    // Tokenized before the transaction: it holds the session's row lock.
    const tokens = messages.map((m) => {
      if (!STORED_ROLES.has(m.role)) throw new TypeError(`${m.role} messages are not stored in sessions`)
      return this.#counter.storedContentTokens(m)
    })
    const replaceFrom = opts.replaceFrom
    const max = Math.min(this.#max, opts.bounds?.maxMessages ?? Infinity)
    const maxSessions = opts.bounds?.maxSessions
    const hooks = this.#appendHooks
    const prepared = await Promise.all(hooks.map((h) => h.prepare(tenant, sessionId, messages)))
    const after: AfterCommit[] = []
    const saved = await this.#pg.transaction('append_exchange', async (c) => {
      const rec = await lockSession(c, tenant, sessionId, now, maxSessions)
      let nextSeq = ms(rec.next_seq)
      let count = rec.count
      const pruned: Pick<StoredMessage, 'seq'>[] = []
      if (replaceFrom !== undefined) {
        const from = Math.max(replaceFrom, nextSeq - count)
        if (from < nextSeq) {
          const gone = await c.query('DELETE FROM messages WHERE tenant = $1 AND session_id = $2 AND seq >= $3 RETURNING seq', [tenant, sessionId, from])
          if (hooks.length > 0) for (const r of gone.rows as Row[]) pruned.push({ seq: ms(r.seq) })
          count -= nextSeq - from
          nextSeq = from
        }
      }
      const first = nextSeq
      const saved = messages.map((m, i) => storedMessage(first + i, m, tokens[i] ?? 0, now))
      if (messages.length > 0) {
        await c.query(
          `INSERT INTO messages (tenant, session_id, seq, message, tokens, created_at)
           SELECT $1, $2, $3 + n - 1, m::jsonb, t, $6 FROM unnest($4::text[], $5::int[]) WITH ORDINALITY AS x(m, t, n)`,
          [tenant, sessionId, first, messages.map((m) => JSON.stringify(m)), tokens, now],
        )
        nextSeq += messages.length
        count += messages.length
      }
      if (count > max) {
        const gone = await c.query('DELETE FROM messages WHERE tenant = $1 AND session_id = $2 AND seq < $3 RETURNING seq', [
          tenant,
          sessionId,
          nextSeq - max,
        ])
        // A message of this exchange pruned at once is passed as its object in `saved` (hooks skip indexing it).
        for (const r of gone.rows as Row[]) pruned.push(saved[ms(r.seq) - first] ?? { seq: ms(r.seq) })
        count = max
      }
      await c.query(
        'UPDATE sessions SET updated_at = GREATEST(updated_at, $3), next_seq = $4, count = $5 WHERE tenant = $1 AND session_id = $2',
        [tenant, sessionId, now, nextSeq, count],
      )
      for (const [i, hook] of hooks.entries()) {
        const done = await hook.write(c, tenant, sessionId, saved, pruned, prepared[i])
        if (done) after.push(done)
      }
      return saved
    })
    for (const done of after) done()
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

/**
 * Create the session row if it is new, then lock it for this transaction (other appends to it wait on the lock).
 * A new row with `maxSessions` set is counted against it under a per-tenant advisory lock held to the commit, so
 * saves racing (from any replica) to create the tenant's last free session queue and the second sees the first's
 * row. Only a save that creates a session pays for the lock and the count (an index range over the tenant's rows).
 */
async function lockSession(c: Queryable, tenant: string, sessionId: string, now: number, maxSessions: number | undefined): Promise<SessionRow> {
  const created = await c.query(
    `INSERT INTO sessions (tenant, session_id, created_at, updated_at, next_seq, count) VALUES ($1, $2, $3, $3, 0, 0)
     ON CONFLICT (tenant, session_id) DO NOTHING RETURNING 1 AS created`,
    [tenant, sessionId, now],
  )
  if (created.rows.length > 0 && maxSessions !== undefined) {
    await c.query("SELECT pg_advisory_xact_lock(hashtextextended('sessions:' || $1, 0))", [tenant])
    const res = await c.query<Row & { n: number }>('SELECT count(*)::int AS n FROM sessions WHERE tenant = $1', [tenant])
    // The count includes the row just inserted: the tenant held one fewer before this save.
    const used = (res.rows[0]?.n ?? 1) - 1
    if (used >= maxSessions) throw new SessionLimitError(maxSessions, used)
  }
  const res = await c.query<SessionRow>(
    'SELECT created_at, updated_at, next_seq, count FROM sessions WHERE tenant = $1 AND session_id = $2 FOR UPDATE',
    [tenant, sessionId],
  )
  const row = res.rows[0]
  // Only a delete committed between the two statements gets here; the caller's transaction rolls back and fails.
  if (row === undefined) throw new Error('session deleted while an exchange was being saved')
  return row
}

function info(id: string, r: SessionRow): SessionInfo {
  return { id, createdAt: ms(r.created_at), updatedAt: ms(r.updated_at), messageCount: r.count }
}
