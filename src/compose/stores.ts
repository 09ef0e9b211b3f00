/**
 * The stores part of the gateway: DATA_DIR's LMDB environment and its capacity check, the engine's stores (LMDB or
 * PostgreSQL, storage/open-stores.ts), the token counter they price messages with, and the first service key.
 */
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import type { Config } from '../config.js'
import { TokenCounter } from '../context/tokenizer.js'
import type { Logger } from '../log.js'
import type { Metrics } from '../metrics.js'
import type { ReadinessCheck } from '../routes/ready.js'
import { StoreCapacity } from '../storage/capacity.js'
import type { KeyStore } from '../storage/interface.js'
import { openStores, type Stores } from '../storage/open-stores.js'
import { openStore, type Store } from '../storage/store.js'
import type { Clock } from '../types.js'
import type { Closers } from './closers.js'

export interface GatewayStores {
  /** DATA_DIR's LMDB environment (the knowledge base lives there whatever the engine). */
  readonly store: Store
  readonly capacity: StoreCapacity
  readonly counter: TokenCounter
  readonly stores: Stores
  /** One entry per engine; every one is required, since requests fail without it. */
  readonly readiness: ReadinessCheck[]
}

export async function openGatewayStores(opts: {
  config: Config
  clock: Clock
  now: () => number
  logger: Logger
  metrics: Metrics
  closers: Closers
  onBootstrapKey: ((line: string) => void) | undefined
}): Promise<GatewayStores> {
  const { config, clock, now, logger, metrics, closers } = opts
  // openStore creates a missing DATA_DIR: said once, since a wrong working directory otherwise passes unnoticed.
  if (!existsSync(config.dataDir)) logger.warn({ dataDir: resolve(config.dataDir) }, 'DATA_DIR did not exist: created it empty')
  const store = openStore({
    dir: config.dataDir,
    mapSize: config.lmdbMapSize,
    clock,
    onDurable: (ms, ok) => metrics.storeOp({ store: 'lmdb', op: 'commit', ms, ok }),
  })
  closers.add(() => store.close())
  const capacity = new StoreCapacity({ store, dir: config.dataDir, minFreeDisk: config.minFreeDisk, clock })
  const counter = new TokenCounter({ margins: config.tokenMargins, media: config.mediaTokens })
  counter.load()
  const stores = await openStores({
    ...databaseOptions(config),
    lmdb: store,
    checkLmdbRoom: (bytes) => capacity.check(bytes),
    maxMessagesPerSession: config.maxSessionMessages,
    now,
    counter,
    observe: (op, ms, ok) => metrics.storeOp({ store: 'postgres', op, ms, ok }),
    log: (level, msg, fields) => logger[level](fields ?? {}, msg),
  })
  closers.add(() => stores.close())
  await ensureFirstKey(config, stores.keys, opts.onBootstrapKey)
  // The stored-records gauge counts DATA_DIR's LMDB, which holds the records only when it is the engine: on PostgreSQL
  // it would report zeros beside a database full of them, so it reports nothing (counting there on every scrape would
  // cost a scan of each table).
  metrics.setCollectors({
    corrections: () => counter.corrections(),
    ...(stores.engine === 'lmdb' ? { sizes: () => store.sizes() } : {}),
    lmdbSpace: () => store.space(),
  })
  // DATA_DIR's LMDB is also not ready when it has no room (MIN_FREE_DISK, LMDB_MAP_SIZE) or its last write failed.
  const readiness: ReadinessCheck[] = [
    { name: 'lmdb', required: true, check: () => lmdbReady(store, capacity, now) },
    ...stores.readiness.filter((r) => r.name !== 'lmdb').map((r) => ({ name: r.name, required: true, check: () => r.check() })),
  ]
  return { store, capacity, counter, stores, readiness }
}

/**
 * The primary of `serve --workers N` creates the first key before forking, so that N workers starting at once do not
 * each create one.
 */
export async function ensureFirstKeyOnce(config: Config): Promise<void> {
  const store = openStore({ dir: config.dataDir })
  try {
    const counter = new TokenCounter({ margins: config.tokenMargins, media: config.mediaTokens })
    const stores = await openStores({ ...databaseOptions(config), lmdb: store, maxMessagesPerSession: config.maxSessionMessages, now: Date.now, counter })
    try {
      await ensureFirstKey(config, stores.keys)
    } finally {
      await stores.close()
    }
  } finally {
    await store.close()
  }
}

/**
 * The store is ready when it reads, has room (above MIN_FREE_DISK, under LMDB_MAP_SIZE) and its last write did not
 * fail. After a failed write, readiness tries a one-record write itself: space freed outside the gateway (a bigger
 * volume, files removed) makes it ready again without waiting for a client's write to succeed first.
 */
async function lmdbReady(store: Store, capacity: StoreCapacity, now: () => number): Promise<void> {
  void store.meta.get('schemaVersion')
  await capacity.check()
  const failure = store.writeFailure()
  if (failure === undefined) return
  // A one-record write nearly always fits in the pages a full store still has, so it proves little: probe only once
  // at least RECOVERED_ROOM more is free than when the write failed (the disk's free space was ~0 then).
  const room = await capacity.room({ fresh: true })
  if (room.diskBytes + capacity.minFreeDisk < failure.freeInFileAtFailure + RECOVERED_ROOM) throw failure
  await store.durable(() => store.meta.put('readyProbe', now()))
}

/** Space that must have been freed since a failed write before readiness tries writing again. */
const RECOVERED_ROOM = 1024 * 1024

/** On a first start with no keys at all, create one (plan pro) and print it once. */
async function ensureFirstKey(config: Config, keys: KeyStore, onBootstrapKey?: (line: string) => void): Promise<void> {
  if (config.serviceKeys.size > 0 || (await keys.countActive()) > 0) return
  const { key, record } = await keys.create('pro', 'bootstrap')
  const line = `recallgate: created the first service key (${record.id}, plan pro). It is shown only once: ${key}`
  ;(onBootstrapKey ?? ((l: string) => process.stderr.write(`${l}\n`)))(line)
}

/** The store engine settings (storage/open-stores.ts chooses LMDB or PostgreSQL from them). */
function databaseOptions(config: Config): Pick<Parameters<typeof openStores>[0], 'databaseUrl' | 'databasePoolSize' | 'databaseStatementTimeout'> {
  return {
    databaseUrl: config.databaseUrl,
    databasePoolSize: config.databasePoolSize,
    databaseStatementTimeout: config.databaseStatementTimeout,
  }
}
