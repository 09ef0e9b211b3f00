/**
 * Hybrid (BM25 + HNSW) search over namespaces of documents: the one ranking engine, used by the knowledge base
 * (namespace per tenant, documents = file chunks) and meant for session recall (namespace per tenant+session,
 * documents = messages). It knows nothing of files or sessions: documents are (label, ref, text, vector), where the
 * label is a number unique in the namespace and never reused, and the ref is whatever the owner needs to find the
 * document again (e.g. [fileId, chunkIndex]).
 *
 * Consistency: the owner writes documents and vectors to LMDB in one transaction that also bumps the namespace's
 * `version`, and only after the commit calls `applyAdd`/`applyRemove` with the version it started from. A loaded
 * namespace applies a change only if it is at exactly that version; one that is already past it ignores it; anything
 * else means it missed a change, so it is dropped and reloaded from LMDB on next use. Loading rebuilds BM25 from the
 * documents and takes the HNSW graph from its file when the file is current (see vector-index.ts), else rebuilds it
 * from the stored vectors and saves it.
 *
 * Bounds: at most `maxLoaded` namespaces in memory (least recently used evicted, saved first if changed) and at most
 * `maxDocsPerNamespace` documents each. Changed graphs are saved `saveDelay` after the first unsaved change (later
 * while saving is expensive, see `SAVE_COST_FACTOR`), on eviction and on close.
 */
import { createHash } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { LRUCache } from 'lru-cache'
import { gatewayError } from '../errors.js'
import type { Ms } from '../types.js'
import { analyze } from './analyzer.js'
import { Bm25Index, type ScoredLabel } from './bm25.js'
import type { Embedder } from './embedder.js'
import { DEFAULT_RRF_K, reciprocalRankFusion } from './fusion.js'
import { DEFAULT_HNSW, VectorIndex, type HnswParams } from './vector-index.js'

export type DocRef = ReadonlyArray<string | number>
export type SearchMode = 'hybrid' | 'bm25' | 'vector'

export interface IndexedDoc {
  label: number
  ref: DocRef
  /** What BM25 indexes (the owner decides: e.g. heading path + chunk text). */
  text: string
  /** `analyze(text)`, when the owner has it already. */
  terms?: readonly string[]
}

export interface NamespaceMeta {
  embedderId: string
  dimension: number
  /** Bumped by every committed change to the namespace. */
  version: number
  /** Live documents. */
  count: number
  /** Next unused label. */
  nextLabel: number
  /**
   * The namespace's generation, set when it is created: versions start again when a namespace is deleted and
   * recreated, so (epoch, version) is what names a state. Absent in namespaces written before it existed.
   */
  epoch?: string | undefined
}

/** Read access to the committed state in LMDB, implemented by the owner's repository. */
export interface IndexSource {
  meta(namespace: string): NamespaceMeta | undefined
  documents(namespace: string): Iterable<IndexedDoc>
  vectors(namespace: string): Iterable<{ label: number; vector: Float32Array }>
}

export interface IndexHit {
  label: number
  ref: DocRef
  /** Hybrid: fused RRF score; bm25: BM25 score; vector: cosine similarity. */
  score: number
  /** Cosine similarity to the query when the vector ranking returned this document (hybrid and vector modes). */
  similarity?: number
}

export interface SearchIndexOptions {
  /** Directory for the graph files (created if missing). */
  dir: string
  source: IndexSource
  embedder: Embedder
  /** Namespaces kept loaded. Default 64. */
  maxLoaded?: number
  /** Documents per namespace. Default 1,000,000. */
  maxDocsPerNamespace?: number
  /**
   * Delay from the first unsaved change to the save. Default 5 s. At least `SAVE_COST_FACTOR` times the duration of
   * the previous timed save passes between two timed saves, so saving stays a small share of the time under continuous
   * changes.
   */
  saveDelay?: Ms
  hnsw?: Partial<HnswParams>
  /** RRF's k. */
  rrfK?: number
  /** Weight of the vector ranking in fusion (BM25's is 1); default: the embedder's `fusionWeight`, else 1. */
  vectorWeight?: number
  /** How deep each ranking is read before fusion (at least k). Default 40. */
  candidates?: number
  /**
   * Told when saving a graph file fails (disk full, directory gone). Saving is only a cache of LMDB, so the failure is
   * reported, not thrown: the next start rebuilds the graph. Default: a process warning.
   */
  onSaveError?: (err: unknown, namespaceFile: string) => void
}

interface Entry {
  readonly file: string
  bm25: Bm25Index
  vectors: VectorIndex | null
  refs: Map<number, DocRef>
  version: number
  epoch: string | undefined
  embedderId: string
  dimension: number
  dirty: boolean
}

export class SearchIndex {
  readonly #dir: string
  readonly #source: IndexSource
  readonly #embedder: Embedder
  readonly #maxDocs: number
  readonly #saveDelay: Ms
  readonly #hnsw: HnswParams
  readonly #rrfK: number
  readonly #vectorWeight: number
  readonly #candidates: number
  readonly #loaded: LRUCache<string, Entry>
  readonly #onSaveError: (err: unknown, file: string) => void
  #timer: NodeJS.Timeout | undefined
  /** When the last timed save ended and how long it took (performance.now() ms: a cost measurement, not a clock). */
  #lastSave = { end: 0, took: 0 }

  constructor(opts: SearchIndexOptions) {
    this.#dir = opts.dir
    this.#source = opts.source
    this.#embedder = opts.embedder
    this.#maxDocs = opts.maxDocsPerNamespace ?? 1_000_000
    this.#saveDelay = opts.saveDelay ?? 5000
    this.#hnsw = { ...DEFAULT_HNSW, ...opts.hnsw }
    this.#rrfK = opts.rrfK ?? DEFAULT_RRF_K
    this.#vectorWeight = opts.vectorWeight ?? opts.embedder.fusionWeight ?? 1
    this.#candidates = opts.candidates ?? 40
    this.#onSaveError =
      opts.onSaveError ?? ((err, file) => process.emitWarning(`recallgate: could not save ${file}: ${String(err)}`, 'IndexSaveWarning'))
    mkdirSync(this.#dir, { recursive: true })
    this.#loaded = new LRUCache<string, Entry>({
      max: opts.maxLoaded ?? 64,
      dispose: (entry, _ns, reason) => {
        if (reason === 'evict' && entry.dirty) this.#save(entry)
      },
    })
  }

  /** Refuse a namespace built with another embedder (its vectors are not comparable with ours). */
  checkEmbedder(meta: Pick<NamespaceMeta, 'embedderId' | 'dimension' | 'count'> | undefined): void {
    if (meta === undefined || meta.count === 0) return
    const e = this.#embedder
    if (meta.embedderId !== e.id || (e.dimension !== 0 && meta.dimension !== e.dimension))
      throw gatewayError('embedder_mismatch', {
        message:
          `These documents were indexed with the embedder "${meta.embedderId}" (${meta.dimension} dimensions) but the ` +
          `gateway now uses "${e.id}"${e.dimension ? ` (${e.dimension} dimensions)` : ''}: delete and upload them ` +
          'again, or configure the embedder they were indexed with',
      })
  }

  /** Load `namespace` now (lazily done by search); init and owners about to write call it. */
  load(namespace: string): void {
    this.#entry(namespace)
  }

  async search(namespace: string, query: string, k: number, mode: SearchMode = 'hybrid'): Promise<IndexHit[]> {
    const meta = this.#source.meta(namespace)
    if (meta === undefined || meta.count === 0 || k <= 0) return []
    if (mode !== 'bm25') this.checkEmbedder(meta)
    // Embed before touching the entry: everything after the await is synchronous, so the entry cannot change under us.
    const qv = mode === 'bm25' ? undefined : (await this.#embedder.embed([query]))[0]
    const entry = this.#entry(namespace, meta)
    const depth = Math.max(k, this.#candidates)
    const lexical = mode === 'vector' ? [] : entry.bm25.search(analyze(query), depth)
    const semantic = qv === undefined || entry.vectors === null || isZero(qv) ? [] : entry.vectors.search(qv, depth)
    const ranked: ScoredLabel[] =
      mode === 'hybrid' ? reciprocalRankFusion([lexical, semantic], { k: this.#rrfK, weights: [1, this.#vectorWeight] }) : mode === 'bm25' ? lexical : semantic
    const cosine = new Map<number, number>()
    for (const h of semantic) cosine.set(h.label, h.score)
    const hits: IndexHit[] = []
    for (const { label, score } of ranked) {
      const ref = entry.refs.get(label)
      if (ref === undefined) continue
      const similarity = cosine.get(label)
      hits.push(similarity === undefined ? { label, ref, score } : { label, ref, score, similarity })
      if (hits.length === k) break
    }
    return hits
  }

  /**
   * Bm25Index.relevance of `labels` for `query` in `namespace` (0 for labels it does not hold): how much of the query
   * each document holds, for callers that keep only relevant hits.
   */
  relevance(namespace: string, query: string, labels: readonly number[]): number[] {
    if ((this.#source.meta(namespace)?.count ?? 0) === 0) return labels.map(() => 0)
    return this.#entry(namespace).bm25.relevance(analyze(query), labels)
  }

  /** A committed addition: `meta` is the namespace's state after it, `fromVersion` before it. */
  applyAdd(namespace: string, fromVersion: number, meta: NamespaceMeta, docs: ReadonlyArray<IndexedDoc & { vector: Float32Array }>): void {
    const entry = this.#applicable(namespace, fromVersion, meta)
    if (entry === undefined) return
    // An emptied namespace may start over with another embedder (another dimension): start a fresh graph then.
    if (entry.vectors === null || entry.refs.size === 0 || entry.vectors.dimension !== meta.dimension)
      entry.vectors = VectorIndex.create(meta.dimension, this.#hnsw, Math.max(1024, docs.length))
    for (const d of docs) {
      entry.bm25.add(d.label, d.terms ?? analyze(d.text))
      entry.refs.set(d.label, d.ref)
    }
    // Graph insertions back to back, not interleaved with BM25's, so the graph's hot nodes stay in cache between them
    // (with chunk-terms.ts: −3% ingestion CPU at 20k chunks).
    for (const d of docs) entry.vectors.add(d.label, d.vector)
    this.#changed(entry, meta)
  }

  /** A committed removal of `labels`. */
  applyRemove(namespace: string, fromVersion: number, meta: NamespaceMeta, labels: readonly number[]): void {
    const entry = this.#applicable(namespace, fromVersion, meta)
    if (entry === undefined) return
    for (const label of labels) {
      if (!entry.refs.delete(label)) continue
      entry.bm25.remove(label)
      entry.vectors?.remove(label)
    }
    // Deleted vectors still cost graph space and search time: rebuild once they outnumber the live ones.
    if (entry.vectors !== null && entry.vectors.deleted > Math.max(1024, entry.vectors.size)) {
      entry.vectors = entry.vectors.compacted(entry.refs.keys(), this.#hnsw)
    }
    this.#changed(entry, meta)
  }

  /** Forget a namespace whose records were deleted (after the commit): unload it and delete its graph file. */
  drop(namespace: string): void {
    this.#loaded.delete(namespace)
    VectorIndex.remove(this.#file(namespace))
  }

  /** Save every changed graph now. */
  flush(): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
    for (const entry of this.#loaded.values()) if (entry.dirty) this.#save(entry)
  }

  close(): Promise<void> {
    this.flush()
    this.#loaded.clear()
    return Promise.resolve()
  }

  /**
   * The loaded namespace, current with the committed `meta` (read now when not given). A loaded entry behind it
   * missed a change committed by another process sharing the store (WORKERS, replicas on one DATA_DIR): it is dropped
   * and loaded again, so every search sees every change committed before it started (read-your-writes across
   * processes). Checking costs one meta read, which search does anyway.
   */
  #entry(namespace: string, meta = this.#source.meta(namespace)): Entry {
    const cached = this.#loaded.get(namespace)
    if (cached !== undefined) {
      if (cached.version === (meta?.version ?? 0) && cached.epoch === meta?.epoch) return cached
      // Unsaved changes of a stale entry are older than what is committed: nothing worth saving.
      cached.dirty = false
      this.#loaded.delete(namespace)
    }
    const entry: Entry = {
      file: this.#file(namespace),
      bm25: new Bm25Index({ maxDocs: this.#maxDocs }),
      vectors: null,
      refs: new Map(),
      version: meta?.version ?? 0,
      epoch: meta?.epoch,
      embedderId: meta?.embedderId ?? this.#embedder.id,
      dimension: meta?.dimension ?? this.#embedder.dimension,
      dirty: false,
    }
    if (meta !== undefined && meta.count > 0) {
      for (const doc of this.#source.documents(namespace)) {
        entry.bm25.add(doc.label, analyze(doc.text))
        entry.refs.set(doc.label, doc.ref)
      }
      const expected = { dimension: meta.dimension, version: meta.version, count: meta.count, epoch: meta.epoch }
      entry.vectors = VectorIndex.load(entry.file, expected, this.#hnsw) ?? this.#buildVectors(namespace, meta)
    }
    this.#loaded.set(namespace, entry)
    return entry
  }

  /** Rebuild a graph from LMDB's vectors and save it at once, so the next start finds it current. */
  #buildVectors(namespace: string, meta: NamespaceMeta): VectorIndex {
    const index = VectorIndex.create(meta.dimension, this.#hnsw, meta.count)
    for (const { label, vector } of this.#source.vectors(namespace)) index.add(label, vector)
    try {
      index.save(this.#file(namespace), meta)
    } catch (err) {
      this.#onSaveError(err, this.#file(namespace))
    }
    return index
  }

  /** Namespaces may hold any characters (tenant ids, session ids): the file is named by their hash. */
  #file(namespace: string): string {
    return join(this.#dir, `${createHash('sha256').update(namespace).digest('hex').slice(0, 40)}.hnsw`)
  }

  #applicable(namespace: string, fromVersion: number, meta: NamespaceMeta): Entry | undefined {
    const entry = this.#loaded.get(namespace)
    if (entry === undefined || (entry.epoch === meta.epoch && entry.version >= meta.version)) return undefined
    // A change from version 0 created the namespace (and its epoch): an entry loaded empty is at that state.
    if (entry.version !== fromVersion || (fromVersion !== 0 && entry.epoch !== meta.epoch)) {
      // This entry missed a change: drop it unsaved; the next use reloads from LMDB.
      this.#loaded.delete(namespace)
      return undefined
    }
    return entry
  }

  #changed(entry: Entry, meta: NamespaceMeta): void {
    entry.version = meta.version
    entry.epoch = meta.epoch
    entry.embedderId = meta.embedderId
    entry.dimension = meta.dimension
    entry.dirty = true
    if (this.#timer !== undefined) return
    const wait = Math.max(this.#saveDelay, this.#lastSave.end + SAVE_COST_FACTOR * this.#lastSave.took - performance.now())
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      const start = performance.now()
      this.flush()
      this.#lastSave = { end: performance.now(), took: performance.now() - start }
    }, wait).unref()
  }

  #save(entry: Entry): void {
    entry.dirty = false
    try {
      mkdirSync(this.#dir, { recursive: true })
      if (entry.vectors === null || entry.refs.size === 0) VectorIndex.remove(entry.file)
      else entry.vectors.save(entry.file, { version: entry.version, epoch: entry.epoch })
    } catch (err) {
      this.#onSaveError(err, entry.file)
    }
  }
}

/**
 * Each save rewrites, rereads and hashes a whole graph file, so saving every `saveDelay` while a namespace keeps
 * growing costs O(n²): 8% of ingestion CPU while building to 100k chunks (profile of bench/rag-perf.ts's corpus;
 * ~0.3 s per save of the 100k graph).
 * The file is only a cache (a stale one is rebuilt from LMDB), so under continuous change it is saved at most 1% of
 * the time.
 */
const SAVE_COST_FACTOR = 100

function isZero(v: Float32Array): boolean {
  for (let i = 0; i < v.length; i++) if (v[i] !== 0) return false
  return true
}
