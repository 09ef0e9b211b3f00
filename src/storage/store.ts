/**
 * The LMDB environment: opened once, here, and handed to the repositories in this folder. Nothing outside
 * `src/storage/` imports lmdb. Keys are arrays so that ranges by prefix are natural and ordered:
 * every tenant-owned record starts with the tenant id, so one tenant can never range over another's keys.
 *
 * Durability: lmdb-js commits asynchronous writes in batches. With its default overlapping sync on Linux, a write's
 * promise resolves at commit, before the OS has flushed it, so `durable()` below also awaits `flushed` (measured
 * ~0.01 ms extra here; a commit plus flush ~0.7 ms). Batching is what makes saves fast (one putSync per message
 * measured ~2k/s here; batched writes 100k+/s).
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { open, type Database, type Key, type RootDatabase } from 'lmdb'
import { classifyStoreFailure, StoreUnavailableError } from './store-errors.js'

export type { Database, Key }
export { isStorageFull, StoreUnavailableError } from './store-errors.js'

/** How much of the environment is in use. */
export interface StoreSpace {
  /** Pages the databases hold (their trees, the free list, the meta pages), in bytes. */
  usedBytes: number
  /** The data file's high-water mark: what it takes on disk. `fileBytes - usedBytes` is free space inside it. */
  fileBytes: number
  /** The configured ceiling on `usedBytes` (LMDB_MAP_SIZE). */
  mapSize: number
}

export interface DurableOptions {
  /**
   * The unit only removes records (a delete): it is let through when the store is over its map size, since freeing
   * space is the way out of that.
   */
  releasing?: boolean
  /**
   * false: resolve at the commit, without waiting for the flush to disk. For the leading parts of a write split over
   * several units (file-repo.ts's sliced insert): LMDB commits in order, so the last unit's flush covers them.
   */
  flush?: boolean
}

export interface Store {
  readonly root: RootDatabase
  /** Service keys: key id → KeyRecord. */
  readonly keys: Database<unknown, Key>
  /** [tenant, sessionId] → SessionRecord. */
  readonly sessions: Database<unknown, Key>
  /** [tenant, createdAt, sessionId] → true: a tenant's sessions by creation time (GET /sessions, newest first). */
  readonly sessionTimes: Database<unknown, Key>
  /** [tenant, sessionId, seq] → MessageRecord. */
  readonly messages: Database<unknown, Key>
  /** [tenant, fileId] → FileRecord. */
  readonly files: Database<unknown, Key>
  /** [tenant, fileId, chunkIndex] → ChunkRecord. */
  readonly chunks: Database<unknown, Key>
  /** [namespace, label] → embedding (the source of truth the HNSW files are rebuilt from). */
  readonly vectors: Database<unknown, Key>
  /** Small bookkeeping records: schema version, per-namespace embedder info, label counters. */
  readonly meta: Database<unknown, Key>
  /** [tenant, responseId] → StoredResponse (the Responses API's `store: true`). */
  readonly responses: Database<unknown, Key>
  /** [tenant, itemId] → responseId: where a stored item lives, for `item_reference`. */
  readonly items: Database<unknown, Key>
  /** [tenant, conversationId] → ConversationRecord (its items are the session with the same id). */
  readonly conversations: Database<unknown, Key>
  /** [tenant, slot] → a RequestTrace tuple: a ring of REQUEST_TRACES slots per tenant (trace-repo.ts). */
  readonly traces: Database<unknown, Key>
  /** [tenant, date (YYYY-MM-DD, UTC), model] → UsageRow. */
  readonly usage: Database<unknown, Key>
  /** Run `fn` in one write transaction; resolves once it is committed (not yet necessarily flushed to disk). */
  transaction<T>(fn: () => T): Promise<T>
  /**
   * Run `fn` as one all-or-nothing unit (a child transaction: if `fn` throws part-way, its earlier writes are rolled
   * back, which a plain lmdb-js `transaction` callback does not do) and resolve once it is committed AND flushed.
   */
  durable<T>(fn: () => T, opts?: DurableOptions): Promise<T>
  /** Same, synchronously (blocks the event loop for the commit: use on cold paths only). */
  transactionSync<T>(fn: () => T): T
  /**
   * From the next read on, see every commit made so far, by any process on this directory. lmdb-js reads through one
   * shared read transaction that it renews only on a timer (setTimeout 0: 1 ms or more, longer on a busy event loop)
   * or after this process's own writes, so without this a read can miss what another process (`serve --workers`, a
   * second gateway or the CLI on the same DATA_DIR) committed and acknowledged moments before. One native call; the
   * next read renews the transaction, as a first read always does.
   */
  freshReads(): void
  /** Record counts per database, from LMDB's own statistics (O(1), cheap enough for every metrics scrape). */
  sizes(): { sessions: number; messages: number; files: number; chunks: number }
  /** Bytes in use and the ceiling (cached for `spaceTtl`: reading every database's statistics costs ≈ 90 µs). */
  space(): StoreSpace
  /** The last write's failure, until a write succeeds again; undefined while writes work (readiness reports it). */
  writeFailure(): StoreUnavailableError | undefined
  close(): Promise<void>
}

export interface StoreOptions {
  /** Directory that holds the environment (created if missing). */
  dir: string
  /** Caps the number of named databases. */
  maxDbs?: number
  /**
   * The most the databases may hold, in bytes (LMDB_MAP_SIZE). lmdb-js grows LMDB's map by itself whenever a write
   * needs more (it never answers MDB_MAP_FULL), so the ceiling is enforced here: once the pages in use reach it, every
   * write but a delete is refused with a StoreUnavailableError (`map_full`) before it starts. Checked before a write,
   * so one write may cross it. Default 32 GiB.
   */
  mapSize?: number
  /** Monotonic ms clock for the space cache. */
  clock?: () => number
  /** How long `space()` may answer from its cache. Default 1 s; 0 reads the statistics every time. */
  spaceTtl?: number
  /** Told the duration of every `durable` unit (commit + flush) and whether it failed: the store's metrics. */
  onDurable?: (ms: number, ok: boolean) => void
}

export const SCHEMA_VERSION = 1

export function openStore(opts: StoreOptions): Store {
  mkdirSync(opts.dir, { recursive: true })
  const root = open({
    path: join(opts.dir, 'recallgate.lmdb'),
    maxDbs: opts.maxDbs ?? 16,
    // Values are small structured records; msgpack (the default) keeps them compact and typed.
    encoding: 'msgpack',
  })
  // lmdb-js starts each event turn's batch with an instruction whose commit promise it keeps to itself (write.js,
  // `writeBatchStart`): when that commit fails (a full disk), the promise rejects with nobody to handle it, and Node
  // ends the process on the unhandled rejection although every caller got the failure on its own promise. Right
  // after the batch is started (this callback runs just before, in the same task), `committed` is that promise:
  // handle it, and the `commitError` promise its error carries (the callers' errors carry the same one).
  root.on('beforecommit', () => queueMicrotask(() => void root.committed.then(ignore, settleCommitError)))
  const db = (name: string): Database<unknown, Key> => root.openDB({ name, encoding: 'msgpack' })
  const mapSize = opts.mapSize ?? DEFAULT_MAP_SIZE
  const clock = opts.clock ?? (() => performance.now())
  const spaceTtl = opts.spaceTtl ?? 1_000
  let cachedSpace: { at: number; space: StoreSpace } | undefined
  let lastFailure: StoreUnavailableError | undefined
  const store: Store = {
    root,
    keys: db('keys'),
    sessions: db('sessions'),
    sessionTimes: db('sessionTimes'),
    messages: db('messages'),
    files: db('files'),
    chunks: db('chunks'),
    vectors: db('vectors'),
    meta: db('meta'),
    responses: db('responses'),
    items: db('items'),
    conversations: db('conversations'),
    traces: db('traces'),
    usage: db('usage'),
    transaction: (fn) => root.transaction(fn),
    durable: async (fn, o) => {
      if (o?.releasing !== true && store.space().usedBytes >= mapSize) {
        throw new StoreUnavailableError('map_full', `The store holds ${store.space().usedBytes} bytes, at its LMDB_MAP_SIZE of ${mapSize}`)
      }
      // performance.now() times a cost for metrics; no decision depends on it.
      const started = performance.now()
      // A callback that throws is its caller refusing (a bound, a check), not the store failing: not reported.
      let refused = false
      try {
        const result = await root.childTransaction(() => {
          try {
            return fn()
          } catch (err) {
            refused = true
            throw err
          }
        })
        if (o?.flush !== false) await root.flushed
        opts.onDurable?.(performance.now() - started, true)
        lastFailure = undefined
        return result
      } catch (err) {
        if (refused) throw err
        opts.onDurable?.(performance.now() - started, false)
        // A failed commit is rolled back whole (LMDB's copy-on-write: the committed state is untouched) and the
        // environment stays usable: measured on a full tmpfs, reads go on, and writes succeed again once records are
        // deleted (their pages are reused) or the disk has room. So no reopen; the next write is the retry.
        const failure = await classifyStoreFailure(err)
        cachedSpace = undefined
        const s = store.space()
        failure.freeInFileAtFailure = Math.max(0, s.fileBytes - s.usedBytes)
        lastFailure = failure
        throw failure
      }
    },
    transactionSync: (fn) => root.transactionSync(fn),
    freshReads: () => root.resetReadTxn(),
    close: () => root.close(),
    writeFailure: () => lastFailure,
    space: () => {
      const now = clock()
      if (cachedSpace !== undefined && now - cachedSpace.at < spaceTtl) return cachedSpace.space
      const stats = root.getStats() as EnvStats
      let pages = 2 + treePages(stats) + (stats.free ? treePages(stats.free) : 0)
      for (const d of [store.keys, store.sessions, store.sessionTimes, store.messages, store.files, store.chunks, store.vectors, store.meta, store.responses, store.items, store.conversations, store.traces, store.usage])
        pages += treePages(d.getStats() as TreeStats)
      const space = { usedBytes: pages * stats.pageSize, fileBytes: (stats.lastPageNumber + 1) * stats.pageSize, mapSize }
      cachedSpace = { at: now, space }
      return space
    },
    sizes: () => ({
      sessions: entries(store.sessions),
      messages: entries(store.messages),
      files: entries(store.files),
      chunks: entries(store.chunks),
    }),
  }
  const version = store.meta.get('schemaVersion')
  if (version === undefined) store.meta.putSync('schemaVersion', SCHEMA_VERSION)
  else if (version !== SCHEMA_VERSION)
    throw new Error(`DATA_DIR holds schema version ${String(version)}; this build reads ${SCHEMA_VERSION}`)
  return store
}

/** LMDB_MAP_SIZE's default: far above what one gateway's memory and knowledge base need, below any real disk's worth of surprise. */
export const DEFAULT_MAP_SIZE = 32 * 1024 ** 3

interface TreeStats {
  treeBranchPageCount: number
  treeLeafPageCount: number
  overflowPages: number
}
interface EnvStats extends TreeStats {
  pageSize: number
  lastPageNumber: number
  free?: TreeStats
}

function treePages(s: TreeStats): number {
  return s.treeBranchPageCount + s.treeLeafPageCount + s.overflowPages
}

function ignore(): void {
  // Fulfilled: nothing to do. (A function, not undefined: lmdb-js's `committed` calls it.)
}

/** The internal batch's rejection: its error's `commitError` promise is handled too (see the `beforecommit` hook). */
function settleCommitError(err: unknown): void {
  const inner = (err as { commitError?: unknown } | null)?.commitError
  // Its reason is the same failure the callers' promises carry, and they report it: nothing more to do with it here.
  if (inner instanceof Promise) inner.catch(ignore)
}

function entries(db: Database<unknown, Key>): number {
  return (db.getStats() as { entryCount?: number }).entryCount ?? 0
}
