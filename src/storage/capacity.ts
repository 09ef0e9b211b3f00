/**
 * Room to write: the free-disk floor (MIN_FREE_DISK) and the store's map size (LMDB_MAP_SIZE), checked before an
 * upload starts and again once its size in the store is known, so a tenant filling the disk is refused with a clean
 * error before LMDB's commit fails (that failure is handled too, see store.ts, but is the last line, not the first).
 *
 * The room on disk counts the free pages inside LMDB's data file as well as the filesystem's free space: LMDB never
 * shrinks its file, it reuses the pages of deleted records, so after a delete the filesystem is still full while the
 * store has room again (the issue this answers: uploads kept failing after a file of the same size was deleted).
 */
import { statfs } from 'node:fs/promises'
import type { Store } from './store.js'
import { StoreUnavailableError } from './store-errors.js'

export interface CapacityOptions {
  store: Store
  /** The directory whose filesystem holds the store (DATA_DIR). */
  dir: string
  /** Bytes that must stay free on that filesystem (MIN_FREE_DISK); 0 turns the floor off. */
  minFreeDisk: number
  /** Monotonic ms clock for the cache. */
  clock: () => number
  /** How long a statfs answer is reused. Default 1 s (the call is cheap, but not free on a busy path). */
  ttl?: number
  /** The filesystem's free bytes (tests inject one); statfs's available blocks by default. */
  diskFree?: (dir: string) => Promise<number>
}

export interface Room {
  /** Free on the filesystem plus free inside the data file. */
  diskBytes: number
  /** Under the map size. */
  mapBytes: number
}

export class StoreCapacity {
  readonly #o: CapacityOptions
  readonly minFreeDisk: number
  readonly #ttl: number
  #cached: { at: number; free: number } | undefined
  #reading: Promise<number> | undefined

  constructor(o: CapacityOptions) {
    this.#o = o
    this.minFreeDisk = o.minFreeDisk
    this.#ttl = o.ttl ?? 1_000
  }

  /**
   * The room left for writes, each side of its bound. `fresh` reads the disk's free space now instead of from the
   * cache: what readiness decides on after a failed write (a reading from before the disk filled would say there is
   * room, and a one-record probe that fits in the file's last pages would then report the store ready).
   */
  async room(o: { fresh?: boolean } = {}): Promise<Room> {
    if (o.fresh === true) this.#cached = undefined
    const free = await this.#diskFree()
    const s = this.#o.store.space()
    return { diskBytes: free + Math.max(0, s.fileBytes - s.usedBytes) - this.#o.minFreeDisk, mapBytes: s.mapSize - s.usedBytes }
  }

  /**
   * Whether a cache file of `bytes` (a search graph, search-index.ts) may be written beside the store now: the
   * filesystem keeps MIN_FREE_DISK and as much again as the file free while it is written next to the copy it replaces.
   * The store's own free pages do not count (a file cannot use them). A cache must never take the store's last bytes:
   * on a 20 MB disk an upload after deletes was refused (507) while a graph was being rewritten beside its old copy,
   * and one on a full disk accepted once a rewrite ended (test/storage-full.e2e, under load).
   */
  async roomForCache(bytes: number): Promise<boolean> {
    return (await this.#diskFree()) >= 2 * bytes + this.minFreeDisk
  }

  /** Throws a StoreUnavailableError when writing `adding` more bytes would go below the floor or past the map size. */
  async check(adding = 0): Promise<void> {
    const room = await this.room()
    if (room.mapBytes <= adding) {
      throw new StoreUnavailableError('map_full', `The store has ${Math.max(0, room.mapBytes)} bytes left under LMDB_MAP_SIZE; this needs about ${adding}`)
    }
    if (this.#o.minFreeDisk > 0 && room.diskBytes <= adding) {
      throw new StoreUnavailableError(
        'disk_full',
        `The data directory's disk is below MIN_FREE_DISK (${this.#o.minFreeDisk} bytes kept free)${adding > 0 ? ` for about ${adding} more bytes` : ''}`,
      )
    }
  }

  async #diskFree(): Promise<number> {
    const now = this.#o.clock()
    if (this.#cached !== undefined && now - this.#cached.at < this.#ttl) return this.#cached.free
    // Concurrent callers share one statfs.
    this.#reading ??= (this.#o.diskFree ?? availableBytes)(this.#o.dir).finally(() => (this.#reading = undefined))
    const free = await this.#reading
    this.#cached = { at: now, free }
    return free
  }
}

async function availableBytes(dir: string): Promise<number> {
  const s = await statfs(dir)
  return s.bavail * s.bsize
}
