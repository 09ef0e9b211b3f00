/**
 * The one place the store engine is chosen: the embedded LMDB repositories (no DATABASE_URL), or PostgreSQL shared by
 * every replica (storage/postgres/). Everything else holds the interfaces (storage/interface.ts) and never asks which.
 *
 * The LMDB environment in DATA_DIR is opened by the caller in both cases (with PostgreSQL nothing shared is kept in it:
 * DATA_DIR then holds each replica's own graph files, caches of the vectors in the store; docs/scaling.md).
 */
import type { TokenCounter } from '../context/tokenizer.js'
import type { Clock, Ms } from '../types.js'
import { ConversationRepo } from './conversation-repo.js'
import { FileRepo } from './file-repo.js'
import type { ConversationStore, FileStore, KeyStore, RecallStore, ResponseStore, SessionStore, TraceStore, UsageStore } from './interface.js'
import { KeyRepo } from './key-repo.js'
import { RecallRepo } from './recall-repo.js'
import { ResponseRepo } from './response-repo.js'
import { SessionRepo } from './session-repo.js'
import { TraceRepo } from './trace-repo.js'
import { UsageRepo } from './usage-repo.js'
import type { Store } from './store.js'

export type Engine = 'lmdb' | 'postgres'

export interface Stores {
  readonly engine: Engine
  readonly sessions: SessionStore
  readonly keys: KeyStore
  readonly responses: ResponseStore
  readonly conversations: ConversationStore
  readonly usage: UsageStore
  /** Request traces (diagnostics, bounded per tenant). */
  readonly traces: TraceStore
  /** The knowledge base: files, chunks, vectors and the index change log every process's indexes catch up from. */
  readonly files: FileStore
  /**
   * Refuses an upload of about this many bytes when the engine holding files has no room (LMDB: MIN_FREE_DISK and
   * LMDB_MAP_SIZE, the `checkLmdbRoom` given). Undefined on PostgreSQL: its disk is the database operator's, and a
   * full one fails the commit, which answers the upload with an error and stores nothing.
   */
  readonly checkFileRoom: ((bytes: number) => Promise<void>) | undefined
  /** Long-term recall's records, written by hooks in the sessions' own save and delete transactions. */
  readonly recall: RecallStore
  /**
   * Readiness, one check per engine this process depends on: DATA_DIR's LMDB always (the knowledge base lives there),
   * PostgreSQL when configured. Each resolves when its engine answers and rejects when it cannot.
   */
  readonly readiness: readonly { readonly name: Engine; check(): Promise<void> }[]
  close(): Promise<void>
}

export interface OpenStoresOptions {
  /** PostgreSQL when set (DATABASE_URL); else LMDB. */
  databaseUrl: string | undefined
  databasePoolSize: number
  databaseStatementTimeout: Ms
  /** DATA_DIR's LMDB environment (opened and closed by the caller). */
  lmdb: Store
  /** Throws when DATA_DIR's LMDB has no room for about this many more bytes (the gateway's StoreCapacity). */
  checkLmdbRoom?: (bytes: number) => Promise<void>
  maxMessagesPerSession: number
  /** Epoch ms for stored timestamps. */
  now: Clock
  counter: TokenCounter
  /** Every PostgreSQL query and transaction: the store metrics (`store="postgres"`). */
  observe?: (op: string, ms: Ms, ok: boolean) => void
  /** Lines worth an operator's eye: applied migrations, a failed idle connection, a failed key reload. */
  log?: (level: 'info' | 'warn', msg: string, fields?: Record<string, unknown>) => void
}

export async function openStores(o: OpenStoresOptions): Promise<Stores> {
  if (o.databaseUrl === undefined) {
    const sessions = new SessionRepo(o.lmdb, { maxMessagesPerSession: o.maxMessagesPerSession, clock: o.now, counter: o.counter })
    return {
      engine: 'lmdb',
      sessions,
      keys: new KeyRepo(o.lmdb, { now: o.now }),
      responses: new ResponseRepo(o.lmdb),
      conversations: new ConversationRepo(o.lmdb),
      usage: new UsageRepo(o.lmdb),
      traces: new TraceRepo(o.lmdb),
      files: new FileRepo(o.lmdb),
      checkFileRoom: o.checkLmdbRoom,
      recall: new RecallRepo(o.lmdb, sessions),
      readiness: [lmdbReady(o.lmdb)],
      // The environment is the caller's to close.
      close: async () => {},
    }
  }
  const log = o.log ?? (() => {})
  // PostgreSQL's modules (pg and the stores over it) are imported only when DATABASE_URL is set: an LMDB gateway never
  // runs them, and one that had imported them and ioredis (compose/limits.ts) was 10–20 MB larger at idle (their
  // loading also grew V8's new space to its maximum; docs/benchmarks.md, "Idle RSS").
  const [{ Pg }, { migrate }, { PgKeyStore }, { PgSessionStore }, { PgResponseStore }, { PgConversationStore }, { PgUsageStore }, { PgTraceStore }, { PgFileStore }, { PgRecallStore }] =
    await Promise.all([
      import('./postgres/pool.js'),
      import('./postgres/migrations.js'),
      import('./postgres/key-store.js'),
      import('./postgres/session-store.js'),
      import('./postgres/response-store.js'),
      import('./postgres/conversation-store.js'),
      import('./postgres/usage-store.js'),
      import('./postgres/trace-store.js'),
      import('./postgres/file-store.js'),
      import('./postgres/recall-store.js'),
    ])
  const pg = new Pg({
    url: o.databaseUrl,
    poolSize: o.databasePoolSize,
    statementTimeout: o.databaseStatementTimeout,
    ...(o.observe ? { observe: o.observe } : {}),
    onIdleError: (err) => log('warn', 'a pooled PostgreSQL connection failed', { store: 'postgres', err }),
  })
  try {
    await migrate(pg.pool, { log: (line) => log('info', line, { store: 'postgres' }) })
    const keys = new PgKeyStore(pg, {
      now: o.now,
      onReloadError: (err) => log('warn', 'could not reload the service keys (the cached ones keep working)', { store: 'postgres', err }),
    })
    await keys.start()
    const sessions = new PgSessionStore(pg, { maxMessagesPerSession: o.maxMessagesPerSession, clock: o.now, counter: o.counter })
    return {
      engine: 'postgres',
      sessions,
      keys,
      responses: new PgResponseStore(pg),
      conversations: new PgConversationStore(pg),
      usage: new PgUsageStore(pg),
      traces: new PgTraceStore(pg),
      files: new PgFileStore(pg),
      checkFileRoom: undefined,
      recall: new PgRecallStore(pg, sessions),
      readiness: [lmdbReady(o.lmdb), { name: 'postgres', check: () => pg.ping() }],
      close: async () => {
        keys.stop()
        await pg.close()
      },
    }
  } catch (err) {
    await pg.close()
    throw err
  }
}

function lmdbReady(store: Store): { name: Engine; check(): Promise<void> } {
  return { name: 'lmdb', check: async () => void store.meta.get('schemaVersion') }
}
