/**
 * The knowledge base's records in LMDB:
 *   files   [tenant, fileId]             → FileRow (the public file object)
 *   chunks  [tenant, fileId, chunkIndex] → ChunkRow
 *   vectors [namespace, label]           → float32 bytes of the chunk's embedding
 *   meta    ['index', namespace]         → IndexMeta (embedder, version, live count, next label)
 *   meta    ['ilog', namespace, version] → IndexLogEntry: what that version changed (the last INDEX_LOG_KEEP kept)
 *   meta    ['pending', namespace, fileId] → PendingUpload: a large file whose slices are being written, or whose
 *                                           rows and vectors are being removed after its delete
 *
 * A small file is written, and deleted, together with its chunks, vectors and namespace meta in one `store.durable`
 * unit (all or nothing even if it throws part-way, and flushed to disk before it resolves). A large file's delete is
 * final at its first unit (file record, version, change log entry), its rows removed after it (`deleteFile`). A large file
 * (more than `sliceRows` chunks) is written in slices, because one unit of all its rows held the event loop for its
 * whole encoding (13–35 µs a chunk: 200–400 ms for the ≈ 11,000 chunks of 5 MB of prose, the longest /healthz answer
 * during an upload, issue 28). It still appears all at once: the first slice reserves its labels (so concurrent uploads
 * never share one) and records it as pending; the middle slices add rows and vectors, which no reader shows (chunks
 * without a file record are skipped, vectors of a pending range are not loaded); the last writes the file record, the
 * namespace's new version and its change log entry. A failure between removes the slices; a process that died
 * between leaves a pending record, and the next ingestion or start (`recover`) removes what it names. Either way the
 * namespace version moves only with whole files (vector-index.ts relies on it).
 * The `vectors`/`meta` half (`IndexRecords`) is generic over namespaces, so session recall writes its messages' vectors
 * the same way, inside its own transactions.
 */
import type {
  ChunkRow,
  FileChunk,
  FileRow,
  FileStore,
  IndexChange,
  IndexLogEntry,
  IndexMeta,
  IndexRecordsReader,
  InsertFileOptions,
} from './interface.js'
import { INDEX_LOG_KEEP } from './interface.js'
import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import { decodeVector, encodeVector, metaAfterAdd, metaAfterRemove, newEpoch } from './index-meta.js'
import { storableId } from './ids.js'
import type { Store } from './store.js'

export { decodeVector, encodeVector, INDEX_LOG_KEEP, type ChunkRow, type FileRow, type IndexChange, type IndexLogEntry, type IndexMeta }

// Ids are ASCII ('file-…', hex tenant ids), so ['', '\uffff'] brackets every id under a prefix.
const LOW = ''
const HIGH = '\uffff'

/** A large file whose slices are being written (see the header). */
interface PendingUpload {
  tenant: string
  namespace: string
  fileId: string
  /** Its labels: `first` .. `first + count - 1`, reserved in the namespace's `nextLabel`. */
  first: number
  count: number
  /** The writing process: a pending record is removed by another only once this is known to be gone. */
  owner: { host: string; pid: number; boot: string }
  /** When the upload began (the clock's ms): past `STALE_MS` it is removed whoever wrote it. */
  at: number
}

/**
 * An upload's slices are written within seconds (a 20,000-chunk file: ≈ 80 slices); a pending record this old was
 * left by a process that cannot be checked from here (another host or container sharing DATA_DIR) and is gone. Were
 * it alive after all, its last slice finds its record removed and fails the upload rather than show half a file.
 */
const STALE_MS = 60 * 60 * 1000

const pendingKey = (namespace: string, fileId: string): [string, string, string] => ['pending', namespace, fileId]
/** A pending record's entry in WRITING. */
const writingId = (namespace: string, fileId: string): string => `${namespace}\u0000${fileId}`

/** A pending record as stored (values read back from LMDB are checked, not asserted). */
function isPending(v: unknown): v is PendingUpload {
  return typeof v === 'object' && v !== null && 'tenant' in v && typeof v.tenant === 'string' && 'namespace' in v &&
    typeof v.namespace === 'string' && 'fileId' in v && typeof v.fileId === 'string' && 'first' in v && typeof v.first === 'number' &&
    'count' in v && typeof v.count === 'number' && 'at' in v && typeof v.at === 'number' && 'owner' in v && typeof v.owner === 'object' && v.owner !== null
}

/**
 * This process's writes, whichever FileRepo makes them (tests open several on one store): a pending record of another
 * `boot` with this pid was left by an earlier process that had the same pid (a restarted container's pid 1).
 */
const OWNER = { host: hostname(), pid: process.pid, boot: randomBytes(6).toString('hex') }
/** Pending records of uploads this process is writing now (any other of its own is left from a failed clean-up). */
const WRITING = new Set<string>()

/** Labels `first` .. `first + count - 1` are reserved by an upload still being written. */
type Reserved = ReadonlyArray<readonly [first: number, count: number]>

/**
 * The generic half: vectors and meta of any index namespace. The `*InTxn` methods must run inside a `store.durable`
 * (or `transaction`) callback, so an owner (files here; sessions for recall) writes its own records and their index
 * entries atomically.
 */
export class IndexRecords implements IndexRecordsReader {
  readonly #store: Store

  constructor(store: Store) {
    this.#store = store
  }

  meta(namespace: string): IndexMeta | undefined {
    return this.#store.meta.get(['index', namespace]) as IndexMeta | undefined
  }

  metaNow(namespace: string): IndexMeta | undefined {
    return this.meta(namespace)
  }

  /** Namespaces with index meta whose name starts with `prefix`. */
  namespaces(prefix: string): string[] {
    const out: string[] = []
    for (const key of this.#store.meta.getKeys({ start: ['index', prefix], end: ['index', prefix + HIGH] })) {
      out.push((key as [string, string])[1])
    }
    return out
  }

  vector(namespace: string, label: number): Float32Array | undefined {
    const v = this.#store.vectors.get([namespace, label])
    return v === undefined ? undefined : decodeVector(v as Uint8Array)
  }

  vectorsAt(namespace: string, labels: readonly number[]): Map<number, Float32Array> {
    const out = new Map<number, Float32Array>()
    for (const label of labels) {
      const v = this.vector(namespace, label)
      if (v !== undefined) out.set(label, v)
    }
    return out
  }

  /** The log entries of versions `from`..`to` (inclusive), or undefined when any of them is no longer kept. */
  changes(namespace: string, from: number, to: number): IndexLogEntry[] | undefined {
    const out: IndexLogEntry[] = []
    for (let v = from; v <= to; v++) {
      const e = this.#store.meta.get(['ilog', namespace, v]) as IndexLogEntry | undefined
      if (e === undefined) return undefined
      out.push(e)
    }
    return out
  }

  /** Every vector of the namespace but those of uploads still being written (their documents are not shown either). */
  *vectors(namespace: string): Iterable<{ label: number; vector: Float32Array }> {
    const reserved = this.reserved(namespace)
    for (const { key, value } of this.#store.vectors.getRange({ start: [namespace, 0], end: [namespace, Number.MAX_SAFE_INTEGER] })) {
      const label = (key as [string, number])[1]
      if (reserved.length > 0 && reserved.some(([first, count]) => label >= first && label < first + count)) continue
      yield { label, vector: decodeVector(value as Uint8Array) }
    }
  }

  /** The label ranges of the namespace's uploads still being written. */
  reserved(namespace: string): Reserved {
    const out: Array<[number, number]> = []
    for (const { value } of this.#store.meta.getRange({ start: ['pending', namespace, LOW], end: ['pending', namespace, HIGH] }))
      if (isPending(value)) out.push([value.first, value.count])
    return out
  }

  /**
   * Allocate labels for `vectors`, store them and bump the namespace version. `check` sees the meta first and may
   * throw to refuse (another embedder, too many documents), which aborts the caller's transaction.
   */
  addInTxn(
    namespace: string,
    vectors: readonly Float32Array[],
    embedderId: string,
    check: (meta: IndexMeta | undefined, adding: number) => void,
    /** The owner's ref of each vector's document (logged, so other processes can fetch the document). */
    refs?: ReadonlyArray<readonly (string | number)[]>,
  ): IndexChange {
    const before = this.meta(namespace)
    check(before, vectors.length)
    const first = before?.nextLabel ?? 0
    const labels = vectors.map((_, i) => first + i)
    vectors.forEach((v, i) => {
      this.#store.vectors.put([namespace, labels[i] as number], encodeVector(v))
    })
    const meta = metaAfterAdd(before, vectors.length, vectors[0]?.length ?? 0, embedderId)
    this.#store.meta.put(['index', namespace], meta)
    if (refs !== undefined) this.#log(namespace, meta.version, { add: labels.map((l, i) => [l, refs[i] ?? []]) })
    return { fromVersion: before?.version ?? 0, meta, labels }
  }

  /** Delete `labels`' vectors and bump the version. */
  removeInTxn(namespace: string, labels: readonly number[]): IndexChange {
    for (const label of labels) this.#store.vectors.remove([namespace, label])
    return this.retireInTxn(namespace, labels)
  }

  /**
   * Bump the version with `labels` removed, leaving their vectors to the caller (a large file's delete removes them in
   * slices afterwards, under a pending record that keeps them from being loaded meanwhile).
   */
  retireInTxn(namespace: string, labels: readonly number[]): IndexChange {
    const before = this.meta(namespace)
    const meta = metaAfterRemove(before, labels.length)
    this.#store.meta.put(['index', namespace], meta)
    this.#log(namespace, meta.version, { remove: [...labels] })
    return { fromVersion: before?.version ?? 0, meta, labels: [...labels] }
  }

  /** Delete a whole namespace (e.g. a deleted session): all its vectors and its meta. Returns the labels removed. */
  dropInTxn(namespace: string): number[] {
    const labels: number[] = []
    for (const key of this.#store.vectors.getKeys({ start: [namespace, 0], end: [namespace, Number.MAX_SAFE_INTEGER] })) {
      labels.push((key as [string, number])[1])
      this.#store.vectors.remove(key)
    }
    this.#store.meta.remove(['index', namespace])
    for (const key of this.#store.meta.getKeys({ start: ['ilog', namespace, 0], end: ['ilog', namespace, Number.MAX_SAFE_INTEGER] }))
      this.#store.meta.remove(key)
    return labels
  }

  /**
   * Reserve `count` labels for a file written in slices (in the first slice's transaction), and return the first.
   * The version and count stay: no reader sees the file until `commitReservedInTxn`.
   */
  reserveInTxn(namespace: string, count: number, dimension: number, embedderId: string): number {
    const before = this.meta(namespace)
    const first = before?.nextLabel ?? 0
    // A namespace created by the reservation is empty at version 0 (what a search reads as "no documents").
    const meta: IndexMeta = before === undefined ? { embedderId, dimension, version: 0, count: 0, nextLabel: count, epoch: newEpoch() } : { ...before, nextLabel: first + count }
    this.#store.meta.put(['index', namespace], meta)
    return first
  }

  /** The last slice: the reserved labels become the namespace's next version (its labels are not allocated again). */
  commitReservedInTxn(namespace: string, labels: readonly number[], dimension: number, embedderId: string, refs: ReadonlyArray<readonly (string | number)[]>): IndexChange {
    const before = this.meta(namespace)
    const meta = { ...metaAfterAdd(before, labels.length, dimension, embedderId), nextLabel: before?.nextLabel ?? 0 }
    this.#store.meta.put(['index', namespace], meta)
    this.#log(namespace, meta.version, { add: labels.map((l, i) => [l, refs[i] ?? []]) })
    return { fromVersion: before?.version ?? 0, meta, labels: [...labels] }
  }

  /** Record what `version` changed and forget the entry that fell out of the kept window. */
  #log(namespace: string, version: number, entry: IndexLogEntry): void {
    this.#store.meta.put(['ilog', namespace, version], entry)
    if (version > INDEX_LOG_KEEP) this.#store.meta.remove(['ilog', namespace, version - INDEX_LOG_KEEP])
  }
}

export interface FileRepoOptions {
  /**
   * A file of more chunks than this is written in slices of this many (see the header). Default 256: at 13–35 µs a
   * chunk, 3–9 ms of the event loop per slice; each slice is one more commit (≈ 1 ms here, not flushed).
   */
  sliceRows?: number
  /** Wall-clock ms, for the age of pending records. */
  clock?: () => number
  /** Told after each committed slice but the last, with the rows written so far (tests end a process there). */
  onSlice?: (written: number) => void | Promise<void>
  /** Told before each slice of a large file's removal, with the rows removed so far (tests look, or stop, there). */
  onDeleteSlice?: (removed: number) => void | Promise<void>
}

export class FileRepo implements FileStore {
  readonly #store: Store
  readonly index: IndexRecords
  readonly #sliceRows: number
  readonly #clock: () => number
  readonly #onSlice: ((written: number) => void | Promise<void>) | undefined
  readonly #onDeleteSlice: ((removed: number) => void | Promise<void>) | undefined

  constructor(store: Store, opts: FileRepoOptions = {}) {
    this.#store = store
    this.index = new IndexRecords(store)
    this.#sliceRows = Math.max(1, opts.sliceRows ?? 256)
    this.#clock = opts.clock ?? Date.now
    this.#onSlice = opts.onSlice
    this.#onDeleteSlice = opts.onDeleteSlice
  }

  getFile(tenant: string, id: string): FileRow | undefined {
    if (!storableId(id)) return undefined
    return this.#store.files.get([tenant, id]) as FileRow | undefined
  }

  /** A tenant's files, oldest first. */
  listFiles(tenant: string): FileRow[] {
    const rows: FileRow[] = []
    for (const { value } of this.#store.files.getRange({ start: [tenant, LOW], end: [tenant, HIGH] })) rows.push(value as FileRow)
    return rows.sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : 1))
  }

  getChunk(tenant: string, fileId: string, index: number): ChunkRow | undefined {
    return this.#store.chunks.get([tenant, fileId, index]) as ChunkRow | undefined
  }

  chunksAt(tenant: string, refs: ReadonlyArray<readonly [fileId: string, index: number]>): Array<FileChunk | undefined> {
    const files = new Map<string, FileRow | undefined>()
    return refs.map(([fileId, index]) => {
      const chunk = this.getChunk(tenant, fileId, index)
      if (!files.has(fileId)) files.set(fileId, this.getFile(tenant, fileId))
      const file = files.get(fileId)
      return chunk === undefined || file === undefined ? undefined : { fileId, index, chunk, file }
    })
  }

  /** Every chunk of a tenant, in key order, from one read snapshot (the range iterator's). */
  *tenantChunks(tenant: string): Iterable<FileChunk> {
    const files = new Map<string, FileRow | undefined>()
    for (const { key, value } of this.#store.chunks.getRange({ start: [tenant, LOW], end: [tenant, HIGH] })) {
      const [, fileId, index] = key as [string, string, number]
      if (!files.has(fileId)) files.set(fileId, this.getFile(tenant, fileId))
      const file = files.get(fileId)
      if (file !== undefined) yield { fileId, index, chunk: value as ChunkRow, file }
    }
  }

  /**
   * Store a file with its chunks and their vectors in one transaction. Labels are allocated inside it, so concurrent
   * ingestions into one namespace never collide. `check` sees the namespace meta first and may throw to refuse
   * (e.g. another embedder, too many documents); nothing is written then.
   */
  async insertFile(opts: InsertFileOptions): Promise<IndexChange> {
    const { tenant, file, chunks, vectors } = opts
    if (vectors.length !== chunks.length) throw new RangeError('insertFile: one vector per chunk')
    if (chunks.length > this.#sliceRows) return this.#insertSliced(opts)
    const store = this.#store
    return store.durable(() => {
      // Ids are random; a repeat (only possible with an injected random source) must not overwrite a file.
      if (store.files.get([tenant, file.id]) !== undefined) throw new Error(`insertFile: ${file.id} already exists`)
      const refs = chunks.map((_, i) => [file.id, i])
      const change = this.index.addInTxn(opts.namespace, vectors, opts.embedderId, opts.check, refs)
      store.files.put([tenant, file.id], file)
      chunks.forEach((c, i) => {
        store.chunks.put([tenant, file.id, i], { ...c, label: change.labels[i] as number } satisfies ChunkRow)
      })
      opts.onChange?.(change)
      return change
    })
  }

  /** A large file, in slices of `sliceRows` (see the header). */
  async #insertSliced(opts: InsertFileOptions): Promise<IndexChange> {
    const { tenant, namespace, file, chunks, vectors, embedderId } = opts
    const store = this.#store
    const n = chunks.length
    const dimension = vectors[0]?.length ?? 0
    const key = pendingKey(namespace, file.id)
    const id = writingId(namespace, file.id)
    await this.recover()
    WRITING.add(id)
    let pending: PendingUpload | undefined
    try {
      pending = await store.durable(() => {
        if (store.files.get([tenant, file.id]) !== undefined || store.meta.get(key) !== undefined)
          throw new Error(`insertFile: ${file.id} already exists`)
        // Authoritative, as in one transaction: uploads still being written count with the committed chunks.
        let reserved = 0
        for (const [, count] of this.index.reserved(namespace)) reserved += count
        opts.check(this.index.meta(namespace), n + reserved)
        const first = this.index.reserveInTxn(namespace, n, dimension, embedderId)
        const p: PendingUpload = { tenant, namespace, fileId: file.id, first, count: n, owner: OWNER, at: this.#clock() }
        store.meta.put(key, p)
        this.#putRows(tenant, file.id, namespace, first, chunks, vectors, 0, this.#sliceRows)
        return p
      }, { flush: false })
      const first = pending.first
      for (let from = this.#sliceRows; from < n; from += this.#sliceRows) {
        await this.#onSlice?.(from)
        await store.durable(() => {
          this.#stillPending(key)
          this.#putRows(tenant, file.id, namespace, first, chunks, vectors, from, from + this.#sliceRows)
        }, { flush: false })
      }
      await this.#onSlice?.(n)
      return await store.durable(() => {
        this.#stillPending(key)
        // The embedder may have changed meanwhile only if the namespace emptied and another filled it: refused then.
        opts.check(this.index.meta(namespace), n)
        const labels = Array.from({ length: n }, (_, i) => first + i)
        const change = this.index.commitReservedInTxn(namespace, labels, dimension, embedderId, labels.map((_, i) => [file.id, i]))
        store.files.put([tenant, file.id], file)
        store.meta.remove(key)
        opts.onChange?.(change)
        return change
      })
    } catch (err) {
      if (pending !== undefined) await this.#abandon(pending)
      throw err
    } finally {
      WRITING.delete(id)
    }
  }

  #putRows(
    tenant: string,
    fileId: string,
    namespace: string,
    first: number,
    chunks: InsertFileOptions['chunks'],
    vectors: InsertFileOptions['vectors'],
    from: number,
    to: number,
  ): void {
    const store = this.#store
    // Inside the transaction callback the puts are written with it; their promises are the transaction's.
    for (const [j, v] of vectors.slice(from, to).entries()) void store.vectors.put([namespace, first + from + j], encodeVector(v))
    for (const [j, c] of chunks.slice(from, to).entries()) void store.chunks.put([tenant, fileId, from + j], { ...c, label: first + from + j } satisfies ChunkRow)
  }

  /** Inside a slice: the upload's pending record is still there (it is removed when found stale, see STALE_MS). */
  #stillPending(key: [string, string, string]): void {
    if (this.#store.meta.get(key) === undefined) throw new Error(`insertFile: ${key[2]} was removed as abandoned while it was written`)
  }

  /** Remove what a pending upload wrote (or a deleted file left), and its record. */
  #removeSlicesInTxn(p: PendingUpload): void {
    // A record whose slices were taken over by a committed file (never: the last slice removes the record with it).
    if (this.#store.files.get([p.tenant, p.fileId]) === undefined) this.#removeRowsInTxn(p, 0, p.count)
    this.#store.meta.remove(pendingKey(p.namespace, p.fileId))
  }

  /** Rows `from` .. `to - 1` of a pending record's file and their vectors (chunk i has label first + i); absent ones are skipped. */
  #removeRowsInTxn(p: PendingUpload, from: number, to: number): void {
    for (let i = from; i < to; i++) {
      this.#store.chunks.remove([p.tenant, p.fileId, i])
      this.#store.vectors.remove([p.namespace, p.first + i])
    }
  }

  /** After a failed slice: remove the others. If that fails too, the record stays for `recover`. */
  async #abandon(p: PendingUpload): Promise<void> {
    try {
      await this.#store.durable(() => this.#removeSlicesInTxn(p), { releasing: true })
    } catch {
      // Deliberately not rethrown: the caller reports the upload's own failure; the slices stay invisible (no file
      // record) and are removed by the next `recover`, which takes this process's records not being written as left.
    }
  }

  /**
   * Remove the slices of uploads that will never finish: left by a process that died part-way (its pid is gone from
   * this host, or it was an earlier process with this pid), by a failure whose clean-up failed, or older than
   * STALE_MS. Run by the knowledge base at start and before each large upload. Returns how many were removed.
   */
  async recover(): Promise<number> {
    const stale: PendingUpload[] = []
    for (const { value } of this.#store.meta.getRange({ start: ['pending', LOW], end: ['pending', HIGH] }))
      if (isPending(value) && this.#isStale(value)) stale.push(value)
    for (const p of stale) await this.#store.durable(() => this.#removeSlicesInTxn(p), { releasing: true })
    return stale.length
  }

  #isStale(p: PendingUpload): boolean {
    if (WRITING.has(writingId(p.namespace, p.fileId))) return false
    if (this.#clock() - p.at > STALE_MS) return true
    const { host, pid, boot } = p.owner
    if (boot === OWNER.boot) return true
    if (host !== OWNER.host) return false
    return pid === process.pid || !alive(pid)
  }

  /**
   * Delete a file, its chunks and vectors; undefined if the tenant has no such file. A small file goes in one
   * transaction. A large one (more than `sliceRows` chunks) is gone for every reader at its first commit — the file
   * record, the namespace's new version and its change log entry — and its rows and vectors are removed after it in
   * slices, under a pending record naming their label range (not loaded meanwhile; `recover` finishes the removal if
   * the process dies part-way). In one transaction, 14,730 chunks held the event loop for 0.5–0.7 s (issue 28).
   */
  async deleteFile(tenant: string, namespace: string, id: string, onChange?: (change: IndexChange) => void): Promise<IndexChange | undefined> {
    if (!storableId(id)) return undefined
    const file = this.getFile(tenant, id)
    if (file !== undefined && file.chunks > this.#sliceRows) {
      const sliced = await this.#deleteSliced(tenant, namespace, file, onChange)
      if (sliced !== NOT_SLICED) return sliced
    }
    const store = this.#store
    return store.durable(() => {
      if (store.files.get([tenant, id]) === undefined) return undefined
      const labels: number[] = []
      const keys: Array<[string, string, number]> = []
      for (const { key, value } of store.chunks.getRange({ start: [tenant, id, 0], end: [tenant, id, Number.MAX_SAFE_INTEGER] })) {
        keys.push(key as [string, string, number])
        labels.push((value as ChunkRow).label)
      }
      for (const key of keys) store.chunks.remove(key)
      store.files.remove([tenant, id])
      const change = this.index.removeInTxn(namespace, labels)
      onChange?.(change)
      return change
    }, { releasing: true })
  }

  async #deleteSliced(
    tenant: string,
    namespace: string,
    file: FileRow,
    onChange: ((change: IndexChange) => void) | undefined,
  ): Promise<IndexChange | undefined | typeof NOT_SLICED> {
    const store = this.#store
    const n = file.chunks
    const key = pendingKey(namespace, file.id)
    const id = writingId(namespace, file.id)
    WRITING.add(id)
    try {
      const retired = await store.durable(() => {
        if (store.files.get([tenant, file.id]) === undefined) return undefined
        // Labels are allocated one range per file (addInTxn, reserveInTxn): its first and last chunk name the range.
        const a = this.getChunk(tenant, file.id, 0)
        const z = this.getChunk(tenant, file.id, n - 1)
        if (a === undefined || z === undefined || z.label - a.label !== n - 1 || this.getChunk(tenant, file.id, n) !== undefined) return NOT_SLICED
        const labels = Array.from({ length: n }, (_, i) => a.label + i)
        store.files.remove([tenant, file.id])
        const change = this.index.retireInTxn(namespace, labels)
        const p: PendingUpload = { tenant, namespace, fileId: file.id, first: a.label, count: n, owner: OWNER, at: this.#clock() }
        store.meta.put(key, p)
        onChange?.(change)
        return { change, pending: p }
      }, { releasing: true })
      if (retired === undefined || retired === NOT_SLICED) return retired
      try {
        for (let from = 0; from < n; from += this.#sliceRows) {
          await this.#onDeleteSlice?.(from)
          const to = Math.min(n, from + this.#sliceRows)
          await store.durable(() => {
            this.#removeRowsInTxn(retired.pending, from, to)
            if (to === n) store.meta.remove(key)
          }, { releasing: true, flush: false })
        }
      } catch {
        // Deliberately not rethrown: the file is deleted (the first commit); what is left is invisible under its
        // pending record, which the next `recover` (at start, before a large upload) takes as left and finishes.
      }
      return retired.change
    } finally {
      WRITING.delete(id)
    }
  }
}

/** A file whose labels are not one range (none written by this version): deleted in one transaction instead. */
const NOT_SLICED = Symbol('not sliced')

/** Whether a process of this pid runs on this host (EPERM: it does, as another user). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return err instanceof Error && 'code' in err && err.code === 'EPERM'
  }
}
