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
import { randomBytes } from 'node:crypto'
import type { Store } from './store.js'

export interface FileRow {
  id: string
  object: 'file'
  filename: string
  bytes: number
  chunks: number
  status: 'processed'
  created_at: number
  metadata: Record<string, unknown> | null
  content_type: string
}

export interface ChunkRow {
  text: string
  tokens: number
  /** Character range in the file's extracted text. */
  start: number
  end: number
  headingPath: string[]
  /** The chunk's label in its namespace's indexes. */
  label: number
}

export interface IndexMeta {
  embedderId: string
  dimension: number
  version: number
  count: number
  nextLabel: number
  /** Set when the namespace is created: a recreated namespace's versions start again under a new epoch. */
  epoch?: string
}

/** What a write did to a namespace: apply it to the loaded indexes with `SearchIndex.applyAdd/applyRemove`. */
export interface IndexChange {
  fromVersion: number
  meta: IndexMeta
  labels: number[]
}

/**
 * One committed change to a namespace, by version: labels added (with the owner's ref of each) and removed. Another
 * process whose loaded index is a few versions behind applies these instead of reloading the whole namespace.
 */
export interface IndexLogEntry {
  add?: Array<[label: number, ref: readonly (string | number)[]]>
  remove?: number[]
}

/**
 * Versions of change log kept per namespace. A process further behind than this reloads the namespace whole; 256
 * covers minutes of uploads or chat turns, and the entries are small (labels and refs, no text or vectors).
 */
export const INDEX_LOG_KEEP = 256

// Ids are ASCII ('file-…', hex tenant ids), so ['', '\uffff'] brackets every id under a prefix.
const LOW = ''
const HIGH = '\uffff'

/**
 * The generic half: vectors and meta of any index namespace. The `*InTxn` methods must run inside a `store.durable`
 * (or `transaction`) callback, so an owner (files here; sessions for recall) writes its own records and their index
 * entries atomically.
 */
export class IndexRecords {
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
    const dimension = vectors[0]?.length ?? 0
    const first = before?.nextLabel ?? 0
    const labels = vectors.map((_, i) => first + i)
    vectors.forEach((v, i) => {
      this.#store.vectors.put([namespace, labels[i] as number], encodeVector(v))
    })
    // An emptied namespace takes the embedder of whatever is added next.
    const reuse = before !== undefined && before.count > 0
    const meta: IndexMeta = {
      embedderId: reuse ? before.embedderId : embedderId,
      dimension: reuse ? before.dimension : dimension,
      version: (before?.version ?? 0) + 1,
      count: (before?.count ?? 0) + vectors.length,
      nextLabel: first + vectors.length,
      epoch: before?.epoch ?? (before === undefined ? randomBytes(6).toString('hex') : undefined),
    }
    if (meta.epoch === undefined) delete meta.epoch
    this.#store.meta.put(['index', namespace], meta)
    if (refs !== undefined) this.#log(namespace, meta.version, { add: labels.map((l, i) => [l, refs[i] ?? []]) })
    return { fromVersion: before?.version ?? 0, meta, labels }
  }

  /** Delete `labels`' vectors and bump the version. */
  removeInTxn(namespace: string, labels: readonly number[]): IndexChange {
    for (const label of labels) this.#store.vectors.remove([namespace, label])
    const before = this.meta(namespace)
    const meta: IndexMeta = {
      embedderId: before?.embedderId ?? '',
      dimension: before?.dimension ?? 0,
      version: (before?.version ?? 0) + 1,
      count: Math.max(0, (before?.count ?? 0) - labels.length),
      // Labels are never reused: a label in a stale graph file can never name a newer document.
      nextLabel: before?.nextLabel ?? 0,
      ...(before?.epoch !== undefined ? { epoch: before.epoch } : {}),
    }
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

export class FileRepo {
  readonly #store: Store
  readonly index: IndexRecords

  constructor(store: Store) {
    this.#store = store
    this.index = new IndexRecords(store)
  }

  getFile(tenant: string, id: string): FileRow | undefined {
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

  /** Every chunk of a tenant, in key order. */
  *tenantChunks(tenant: string): Iterable<{ fileId: string; index: number; chunk: ChunkRow }> {
    for (const { key, value } of this.#store.chunks.getRange({ start: [tenant, LOW], end: [tenant, HIGH] })) {
      const k = key as [string, string, number]
      yield { fileId: k[1], index: k[2], chunk: value as ChunkRow }
    }
  }

  /**
   * Store a file with its chunks and their vectors in one transaction. Labels are allocated inside it, so concurrent
   * ingestions into one namespace never collide. `check` sees the namespace meta first and may throw to refuse
   * (e.g. another embedder, too many documents); nothing is written then.
   */
  async insertFile(opts: {
    tenant: string
    namespace: string
    file: FileRow
    chunks: ReadonlyArray<Omit<ChunkRow, 'label'>>
    vectors: readonly Float32Array[]
    embedderId: string
    check: (meta: IndexMeta | undefined, adding: number) => void
    /** Told inside the transaction, before the commit, what the change will be (see SearchIndex.expect). */
    onChange?: (change: IndexChange) => void
  }): Promise<IndexChange> {
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

export function encodeVector(v: Float32Array): Buffer {
  return Buffer.from(v.buffer, v.byteOffset, v.byteLength)
}

/** Copy out of LMDB's buffer (it may be reused, and may not be 4-byte aligned). */
export function decodeVector(bytes: Uint8Array): Float32Array {
  const copy = new Uint8Array(bytes.byteLength)
  copy.set(bytes)
  return new Float32Array(copy.buffer)
}
