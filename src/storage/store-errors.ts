/**
 * What a failed LMDB write means, in storage terms. Storage does not speak HTTP: the HTTP and chat layers turn a
 * `StoreUnavailableError` into the API's error (507 `insufficient_storage`, 503 `storage_unavailable`).
 *
 * lmdb-js rejects a failed asynchronous commit with `Error('Commit failed (see commitError for details)')` whose
 * `commitError` is a promise of the real error (an errno such as ENOSPC, or an LMDB code such as MDB_MAP_FULL).
 * LMDB writes pages with pwrite and reports a short write as EIO, so on a full disk the error is usually EIO, not
 * ENOSPC (measured on a full tmpfs): EIO is counted as "full" too, since the two cannot be told apart from here.
 */

/** `full`: no room (disk, quota, map size); `failing`: anything else that stops writes (LMDB panic, …). */
export type StoreFailureReason = 'disk_full' | 'map_full' | 'io_error' | 'failing'

export class StoreUnavailableError extends Error {
  readonly reason: StoreFailureReason
  /** The errno or LMDB code, when there was one. */
  readonly errno: number | undefined
  /**
   * Free bytes inside the data file when a commit failed (set by the store): space freed since, by deletes or on the
   * disk, is measured against it (readiness, main.ts).
   */
  freeInFileAtFailure = 0

  constructor(reason: StoreFailureReason, message: string, opts: { cause?: unknown; errno?: number } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause })
    this.name = 'StoreUnavailableError'
    this.reason = reason
    this.errno = opts.errno
  }

  /** Out of room: freeing space (deleting records, growing the disk) lets writes go on. */
  get full(): boolean {
    return this.reason !== 'failing'
  }
}

/** True for a store failure that is a lack of space (disk full, quota, map size, a short write). */
export function isStorageFull(err: unknown): boolean {
  return err instanceof StoreUnavailableError && err.full
}

const ENOSPC = 28
const EDQUOT = 122
const EIO = 5
const MDB_MAP_FULL = -30792

function codeOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown; errno?: unknown } | null)?.code
  if (typeof code === 'number') return code
  if (code === 'ENOSPC') return ENOSPC
  if (code === 'EDQUOT') return EDQUOT
  if (code === 'EIO') return EIO
  return undefined
}

/** Classify an error thrown by a synchronous LMDB write (putSync, transactionSync). */
export function classifyStoreFailureSync(err: unknown, real: unknown = err): StoreUnavailableError {
  if (err instanceof StoreUnavailableError) return err
  const errno = codeOf(real)
  const detail = real instanceof Error ? real.message : String(real)
  const o = { cause: err, ...(errno !== undefined ? { errno } : {}) }
  if (errno === ENOSPC || errno === EDQUOT) return new StoreUnavailableError('disk_full', `The store's disk is full (${detail})`, o)
  if (errno === MDB_MAP_FULL) return new StoreUnavailableError('map_full', `The store's map is full (${detail})`, o)
  if (errno === EIO) return new StoreUnavailableError('io_error', `The store could not write (${detail}); usually a full disk`, o)
  return new StoreUnavailableError('failing', `The store could not commit (${detail})`, o)
}

/** Classify a failed asynchronous commit, reading lmdb-js's `commitError` for the real cause. */
export async function classifyStoreFailure(err: unknown): Promise<StoreUnavailableError> {
  if (err instanceof StoreUnavailableError) return err
  const inner = (err as { commitError?: unknown } | null)?.commitError
  if (inner instanceof Promise) {
    // Handling it here is also what keeps its rejection from reaching the process as unhandled.
    const real = await inner.then(
      () => err,
      (e: unknown) => e,
    )
    return classifyStoreFailureSync(err, real)
  }
  return classifyStoreFailureSync(err)
}
