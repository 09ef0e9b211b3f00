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
 */
import type { TokenCounter } from '../../context/tokenizer.js'
import type { ChatMessage, Clock, Role } from '../../types.js'
import { SessionLimitError, type SessionBounds, type SessionInfo, type SessionStore, type SessionUsage, type StoredMessage } from '../interface.js'
import { checkSessionId, storedMessage } from '../session-repo.js'
import { ms, type Pg, type Queryable, type Row } from './pool.js'

export interface PgSessionStoreOptions {
  maxMessagesPerSession: number
  clock: Clock
  counter: TokenCounter
}

const STORED_ROLES: ReadonlySet<Role> = new Set<Role>(['user', 'assistant', 'tool', 'function'])

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

  constructor(pg: Pg, opts: PgSessionStoreOptions) {
    if (!Number.isInteger(opts.maxMessagesPerSession) || opts.maxMessagesPerSession < 1)
      throw new RangeError(`maxMessagesPerSession must be a positive integer, got ${opts.maxMessagesPerSession}`)
    this.#pg = pg
    this.#max = opts.maxMessagesPerSession
    this.#clock = opts.clock
    this.#counter = opts.counter
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
    return this.#pg.transaction('append_exchange', async (c) => {
      const rec = await lockSession(c, tenant, sessionId, now, maxSessions)
      let nextSeq = ms(rec.next_seq)
      let count = rec.count
      if (replaceFrom !== undefined) {
        const from = Math.max(replaceFrom, nextSeq - count)
        if (from < nextSeq) {
          await c.query('DELETE FROM messages WHERE tenant = $1 AND session_id = $2 AND seq >= $3', [tenant, sessionId, from])
          count -= nextSeq - from
          nextSeq = from
        }
      }
      const first = nextSeq
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
        await c.query('DELETE FROM messages WHERE tenant = $1 AND session_id = $2 AND seq < $3', [tenant, sessionId, nextSeq - max])
        count = max
      }
      await c.query(
        'UPDATE sessions SET updated_at = GREATEST(updated_at, $3), next_seq = $4, count = $5 WHERE tenant = $1 AND session_id = $2',
        [tenant, sessionId, now, nextSeq, count],
      )
      return messages.map((m, i) => storedMessage(first + i, m, tokens[i] ?? 0, now))
    })
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
    // Its messages go with it (ON DELETE CASCADE), in the same statement's transaction.
    const rows = await this.#pg.query('session_delete', 'DELETE FROM sessions WHERE tenant = $1 AND session_id = $2 RETURNING 1 AS gone', [
      tenant,
      sessionId,
    ])
    return rows.length > 0
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
