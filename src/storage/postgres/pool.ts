/**
 * The PostgreSQL connection pool (the only module besides the migrations importing `pg`), with the two things every
 * store module needs from it: a query and a transaction, both timed for the store metrics and both turning "the
 * database cannot answer now" into `DatabaseUnavailableError` (the HTTP layer's 503), whatever the failing step.
 *
 * Bounds: at most `poolSize` connections; a request waits at most `statementTimeout` for a free connection (or for a
 * new one to connect) and each statement at most `statementTimeout` on the server (`statement_timeout`) and on the
 * client (`query_timeout`, a little longer, for a server that stopped answering altogether).
 */
import pg from 'pg'
import type { Ms } from '../../types.js'
import { DatabaseUnavailableError } from '../interface.js'
import { HeldRead } from './held-read.js'

export interface PgOptions {
  url: string
  /** Connections kept at most (DATABASE_POOL_SIZE). */
  poolSize: number
  /** Longest wait for one statement, and for a connection (DATABASE_STATEMENT_TIMEOUT_MS). */
  statementTimeout: Ms
  /** Told about every query and transaction: its duration and whether it failed (the store metrics). */
  observe?: (op: string, ms: Ms, ok: boolean) => void
  /** An idle pooled connection failed (the server went away): pg emits it on the pool, and unheard it would crash. */
  onIdleError?: (err: Error) => void
}

export type Queryable = Pick<pg.PoolClient, 'query'>
export type Row = Record<string, unknown>

/**
 * A statement prepared once per connection (a named statement): later runs send only its parameters, and the server
 * neither parses nor plans it again. For the hot path's short statements whose plan cannot depend on the parameters
 * (a primary-key read, one index range, a function call), where parsing and planning were most of the server's work:
 * measured for the namespace version read, 3,000 serial runs × 3 rounds, `fsync=on`, load 8–10: 55 → 37 µs a read,
 * the server's CPU 33 → 15 µs, the client's 32 → 25 µs. Not for statements whose best plan depends on the values (a
 * keyset page whose cursor may be null): PostgreSQL may settle on one generic plan for a named statement.
 */
export interface Prepared {
  readonly name: string
  readonly text: string
}

/** The statement `text`, prepared on each connection under `name` (unique in the process: one text per name). */
export function prepared(name: string, text: string): Prepared {
  return { name: `rg_${name}`, text }
}

export interface TransactionOptions {
  /**
   * False: COMMIT returns once the transaction is committed, without waiting for its WAL to reach the disk
   * (`SET LOCAL synchronous_commit = off`; a crash may lose it, never half of it). Only for writes the store contract
   * does not make durable, as LMDB's `transaction` (committed, not flushed) is for them: request traces. Default true.
   */
  durable?: boolean
}

/** Headroom of the client-side timeout over the server's own, so the server's (clearer) error normally wins. */
const CLIENT_TIMEOUT_SLACK: Ms = 1_000

export class Pg {
  readonly pool: pg.Pool
  readonly #observe: (op: string, ms: Ms, ok: boolean) => void
  readonly #held: HeldRead

  constructor(o: PgOptions) {
    this.pool = new pg.Pool({
      connectionString: o.url,
      max: o.poolSize,
      connectionTimeoutMillis: o.statementTimeout,
      statement_timeout: o.statementTimeout,
      query_timeout: o.statementTimeout + CLIENT_TIMEOUT_SLACK,
      // Idle connections are closed after 30 s; nothing to keep warm beyond that.
      idleTimeoutMillis: 30_000,
      application_name: 'recallgate',
    })
    const onIdle = o.onIdleError ?? (() => {})
    // Recorded, not thrown: the next query reconnects (or fails as DatabaseUnavailableError, which is what clients see).
    this.pool.on('error', (err) => onIdle(err))
    this.#observe = o.observe ?? (() => {})
    this.#held = new HeldRead(this.pool, o.poolSize)
  }

  /**
   * The one text column (`AS value`) of the row `statement` selects by `param`; undefined when there is none. On
   * the connection held for it when that is free (held-read.ts: the per-search version read, without pg's per-query
   * machinery), else on any pooled connection; the same statement, the same snapshot rules either way.
   */
  async readText(op: string, statement: Prepared, param: string): Promise<string | null | undefined> {
    const started = performance.now()
    const held = this.#held.read(statement, param)
    if (held === undefined) return (await this.query<{ value: string | null }>(op, statement, [param]))[0]?.value
    try {
      const value = await held
      this.#observe(op, performance.now() - started, true)
      return value
    } catch (err) {
      this.#observe(op, performance.now() - started, false)
      throw classify(err)
    }
  }

  /** One statement on any pooled connection. */
  async query<R extends Row = Row>(op: string, text: string | Prepared, values?: unknown[]): Promise<R[]> {
    const started = performance.now()
    try {
      const res = await (typeof text === 'string' ? this.pool.query<R>(text, values) : this.pool.query<R>({ name: text.name, text: text.text, values }))
      this.#observe(op, performance.now() - started, true)
      return res.rows
    } catch (err) {
      this.#observe(op, performance.now() - started, false)
      throw classify(err)
    }
  }

  /**
   * `fn` inside BEGIN … COMMIT on one connection; resolves once COMMIT has returned (durable on the server, with its
   * default synchronous_commit). Any throw rolls back; a connection that failed mid-transaction is discarded.
   */
  async transaction<T>(op: string, fn: (c: Queryable) => Promise<T>, o: TransactionOptions = {}): Promise<T> {
    const started = performance.now()
    let client: pg.PoolClient | undefined
    let broken: Error | undefined
    // A callback that throws a plain error is its caller refusing (a check), not the store failing: not counted.
    let refused = false
    // A connection that drops while checked out emits 'error' on its client (pg-pool listens only on idle ones, and
    // on its own query's): unheard, that is an uncaught exception. The statement in flight, or the next, fails by
    // itself; this only marks the client broken, so that it is discarded instead of pooled again.
    const onError = (err: Error): void => {
      broken = err
    }
    try {
      client = await this.pool.connect()
      client.on('error', onError)
      // One round trip either way (a simple query may hold several statements).
      await client.query(o.durable === false ? 'BEGIN; SET LOCAL synchronous_commit = off' : 'BEGIN')
      let result: T
      try {
        result = await fn(client)
      } catch (err) {
        refused = !isConnectionFailure(err) && !(err instanceof pg.DatabaseError)
        throw err
      }
      await client.query('COMMIT')
      this.#observe(op, performance.now() - started, true)
      return result
    } catch (err) {
      if (client !== undefined) {
        try {
          await client.query('ROLLBACK')
        } catch (rollbackErr) {
          // The connection itself is gone: release it as broken so the pool does not hand it out again.
          broken = rollbackErr as Error
        }
      }
      if (!refused) this.#observe(op, performance.now() - started, false)
      throw classify(err)
    } finally {
      client?.off('error', onError)
      client?.release(broken)
    }
  }

  /** Resolves when the database answers a trivial query (readiness). */
  async ping(): Promise<void> {
    await this.query('ping', 'SELECT 1')
  }

  async close(): Promise<void> {
    this.#held.close()
    await this.pool.end()
  }
}

/** SQLSTATEs that mean "not now" rather than "wrong": connection exceptions, shutdown, too many connections, timeouts. */
function unavailableCode(code: string): boolean {
  return (
    code.startsWith('08') || // connection_exception
    code === '57P01' || // admin_shutdown
    code === '57P02' || // crash_shutdown
    code === '57P03' || // cannot_connect_now (starting up, recovering)
    code === '53300' || // too_many_connections
    code === '57014' || // query_canceled: statement_timeout
    code === '40001' || // serialization_failure
    code === '40P01' // deadlock_detected
  )
}

function isConnectionFailure(err: unknown): boolean {
  if (!(err instanceof Error)) return false
  const code = (err as { code?: unknown }).code
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return true // ECONNREFUSED, ECONNRESET, ETIMEDOUT, …
  // pg's own messages for a connection that dropped, a connect or query that timed out, a pool being closed.
  return /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Connection ended|pool after calling end/i.test(
    err.message,
  )
}

/** A failure that means the database cannot answer now becomes DatabaseUnavailableError; anything else is rethrown as is. */
export function classify(err: unknown): unknown {
  if (err instanceof DatabaseUnavailableError) return err
  if (err instanceof pg.DatabaseError && typeof err.code === 'string' && unavailableCode(err.code))
    return new DatabaseUnavailableError('postgres', `PostgreSQL cannot answer now (${err.code}): ${err.message}`, { cause: err })
  if (isConnectionFailure(err))
    return new DatabaseUnavailableError('postgres', `PostgreSQL cannot be reached: ${(err as Error).message}`, { cause: err })
  return err
}

/** Epoch ms from a `bigint` column (pg hands int8 out as a string, exact). */
export function ms(v: unknown): number {
  return typeof v === 'number' ? v : Number(v)
}
