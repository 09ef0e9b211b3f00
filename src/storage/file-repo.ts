/**
 * The knowledge base's records in LMDB:
 *   files   [tenant, fileId]             → FileRow (the public file object)
 *   chunks  [tenant, fileId, chunkIndex] → ChunkRow
 *   vectors [namespace, label]           → float32 bytes of the chunk's embedding
 *   meta    ['index', namespace]         → IndexMeta (embedder, version, live count, next label)
 *   meta    ['ilog', namespace, version] → IndexLogEntry: what that version changed (the last INDEX_LOG_KEEP kept)
 *
 * A file is written, or deleted, together with its chunks, vectors and namespace meta in one `store.durable` unit (all
 * or nothing even if it throws part-way, and flushed to disk before it resolves): a failed ingestion leaves nothing,
 * and the namespace version always moves with its content (vector-index.ts relies on it).
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
import { decodeVector, encodeVector, metaAfterAdd, metaAfterRemove } from './index-meta.js'
import { storableId } from './ids.js'
import type { Store } from './store.js'

export { decodeVector, encodeVector, INDEX_LOG_KEEP, type ChunkRow, type FileRow, type IndexChange, type IndexLogEntry, type IndexMeta }

// Ids are ASCII ('file-…', hex tenant ids), so ['', '\uffff'] brackets every id under a prefix.
const LOW = ''
const HIGH = '\uffff'

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

  *vectors(namespace: string): Iterable<{ label: number; vector: Float32Array }> {
    for (const { key, value } of this.#store.vectors.getRange({ start: [namespace, 0], end: [namespace, Number.MAX_SAFE_INTEGER] })) {
      yield { label: (key as [string, number])[1], vector: decodeVector(value as Uint8Array) }
    }
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

  /** Record what `version` changed and forget the entry that fell out of the kept window. */
  #log(namespace: string, version: number, entry: IndexLogEntry): void {
    this.#store.meta.put(['ilog', namespace, version], entry)
    if (version > INDEX_LOG_KEEP) this.#store.meta.remove(['ilog', namespace, version - INDEX_LOG_KEEP])
  }
}

export class FileRepo implements FileStore {
  readonly #store: Store
  readonly index: IndexRecords

  constructor(store: Store) {
    this.#store = store
    this.index = new IndexRecords(store)
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

  /** Delete a file, its chunks and vectors in one transaction; undefined if the tenant has no such file. */
  async deleteFile(tenant: string, namespace: string, id: string, onChange?: (change: IndexChange) => void): Promise<IndexChange | undefined> {
    if (!storableId(id)) return undefined
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
}
