/**
 * Hybrid (BM25 + HNSW) search over namespaces of documents: the one ranking engine, used by the knowledge base
 * (namespace per tenant, documents = file chunks) and meant for session recall (namespace per tenant+session,
 * documents = messages). It knows nothing of files or sessions: documents are (label, ref, text, vector), where the
 * label is a number unique in the namespace and never reused, and the ref is whatever the owner needs to find the
 * document again (e.g. [fileId, chunkIndex]).
 *
 * Consistency: the owner writes documents and vectors to its store (LMDB, or PostgreSQL shared by replicas) in one
 * transaction that also bumps the namespace's `version`, and only after the commit calls `applyAdd`/`applyRemove` with
 * the version it started from. A loaded namespace applies a change only if it is at exactly that version; one that is
 * already past it ignores it; anything else means it missed a change (another process's), which it applies from the
 * source's change log when it can and else reloads from the store on next use. Every search reads the committed meta
 * first, so it sees every change committed before it. Loading rebuilds BM25 from the documents and takes the HNSW graph
 * from its file when the file is current (see vector-index.ts), else rebuilds it from the stored vectors and saves it.
 *
 * Bounds: at most `maxLoaded` namespaces in memory (least recently used evicted, saved first if changed) and at most
 * `maxDocsPerNamespace` documents each. Changed graphs are saved `saveDelay` after the first unsaved change (later
 * while saving is expensive, see `SAVE_COST_FACTOR`), on eviction and on close.
 *
 * The event loop is never held for long (issue 18: a 100k-chunk namespace took ≈ 8 s to load, a 5 MB upload's graph
 * insertions ≈ 1 s, a save ≈ 0.3 s, and every request of every tenant waited meanwhile): loading, rebuilding and
 * applying a change run in short slices (time-slice.ts) and graph files are read and written in the thread pool
 * (vector-index.ts). A search between two slices sees the documents applied so far. A namespace is loaded by its first
 * use; concurrent users wait for that one load only. Changes and saves of one namespace run one at a time, in order
 * (its `queue`): a save must not run while the graph changes, and a change applies only on top of the one before.
 */
import { namespaceHash } from './namespace-hash.js'
import { isZeroVector } from './zero-vector.js'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { LRUCache } from 'lru-cache'
import { gatewayError } from '../errors.js'
import type { Ms } from '../types.js'
import { ANALYZER_ID, analyze, foldTerms } from './analyzer.js'
import { Bm25Index, type ScoredLabel } from './bm25.js'
import type { Cancel, Embedder } from './embedder.js'
import { DEFAULT_RRF_K, reciprocalRankFusion } from './fusion.js'
import { DEFAULT_SLICE_MS, TimeSlicer } from './time-slice.js'
import { DEFAULT_HNSW, VectorIndex, type HnswParams } from './vector-index.js'
import { FreshVectors, mergeRankings } from './fresh-vectors.js'
import { chunkCodes, vocabularyOf, type CodedTerms } from './chunk-terms.js'
import { loadTerms, removeTerms, saveTerms, termsFile, type TermsRead, type TermsSnapshot } from './terms-file.js'

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

/**
 * A committed document handed to `applyAdd`: its vector, and its text, the terms already analyzed from it, or where
 * its terms are in a file's coded terms (chunk-terms.ts `CodedTerms`: chunk `doc` of `coded`).
 */
export type AddedIndexDoc = Pick<IndexedDoc, 'label' | 'ref'> & { vector: Float32Array } & (
    | { text: string; terms?: undefined; coded?: undefined }
    | { text?: undefined; terms: readonly string[]; coded?: undefined }
    | { text?: undefined; terms?: undefined; coded: CodedTerms; doc: number }
  )

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

/**
 * Read access to the committed state (LMDB, or PostgreSQL shared by replicas), implemented by the owner's repository.
 * An embedded engine answers synchronously; a network one with promises and pages (`for await` reads either).
 */
export interface IndexSource {
  meta(namespace: string): Awaitable<NamespaceMeta | undefined>
  documents(namespace: string): Iterable<IndexedDoc> | AsyncIterable<IndexedDoc>
  vectors(namespace: string): Iterable<{ label: number; vector: Float32Array }> | AsyncIterable<{ label: number; vector: Float32Array }>
  /**
   * Optional, for catching up with changes another process committed: the change log of versions `from`..`to`
   * (undefined when part of it is no longer kept), and the text and vector of the documents it added that are still
   * stored (those gone since are left out), asked for a batch at a time. Without them, or when the log falls short, a
   * namespace that is behind is reloaded whole.
   */
  changes?(namespace: string, from: number, to: number): Awaitable<ReadonlyArray<IndexLogEntry> | undefined>
  added?(namespace: string, docs: ReadonlyArray<readonly [label: number, ref: DocRef]>): Awaitable<ReadonlyArray<AddedDoc>>
}

/** A document a change log entry added, as stored now. */
export interface AddedDoc {
  label: number
  text: string
  vector: Float32Array
}

type Awaitable<T> = T | Promise<T>

/** Documents fetched per `added` call while catching up: one round trip per batch on a network engine. */
const CATCH_UP_BATCH = 512

/** One committed version of a namespace: the labels it added (with their refs) and removed. */
export interface IndexLogEntry {
  add?: ReadonlyArray<readonly [number, DocRef]>
  remove?: readonly number[]
}

export interface IndexHit {
  label: number
  ref: DocRef
  /** Hybrid: fused RRF score; bm25: BM25 score; vector: cosine similarity. */
  score: number
  /** Cosine similarity to the query when the vector ranking returned this document (hybrid and vector modes). */
  similarity?: number
  /** Bm25Index.relevance of the document for the query: how much of the query it holds, 0–1. */
  relevance: number
  /**
   * The document's BM25 score (proximity bonus included) when the lexical ranking returned it (hybrid and bm25 modes):
   * comparable across the hits of one search, which is what the relevance gate's score ratio compares.
   */
  lexical?: number
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
  /**
   * Whether the disk has room now for a graph file of this many bytes (storage/capacity.ts `roomForCache`). Without
   * room the save is skipped and the namespace's old file removed: the file is a cache, and a stale one is rebuilt from
   * the store at the next start anyway, while the space is the store's. Tried again at the next save. Default: always.
   */
  cacheRoom?: (bytes: number) => Promise<boolean>
  /**
   * Told when applying a committed change to a loaded namespace fails: LMDB has the change, so the namespace is unloaded
   * and reloaded from it on next use. Default: a process warning.
   */
  onApplyError?: (err: unknown, namespace: string) => void
  /** Longest stretch of loading or applying before it lets the event loop run (time-slice.ts). Default 5 ms. */
  sliceMs?: number
  /**
   * Most vectors of one namespace waiting for the graph (fresh-vectors.ts): an addition is searchable, and `applyAdd`
   * resolves, once its vectors are among them, and they move into the graph in the background. Every search of the
   * namespace pays a pass over them meanwhile (≈ 0.5 µs a vector of 256 dimensions), so an addition that would take
   * them past this waits for them to drain first, and the part of one larger than this goes into the graph before
   * `applyAdd` resolves. 0: every vector goes into the graph before `applyAdd` resolves. Default 20,000.
   */
  maxFresh?: number
  /**
   * A namespace of at least this many vectors whose graph must be rebuilt from the store (no current graph file: a
   * replica's first load, a stale or damaged file) is loaded without it, its vectors searched exactly, and has the
   * graph built in a worker thread meanwhile (`#buildLater`); a smaller one is built here in slices before the load
   * ends (a worker costs ≈ 30 ms to start). Default 5,000.
   */
  graphWorkerMin?: number
  /**
   * A namespace of at least this many documents keeps its analyzed terms in a file beside its graph (terms-file.ts),
   * so a later load reads them instead of every document's text from the store. Default 2,000 (below it the text is
   * analyzed again in well under 0.1 s).
   */
  termsFileMin?: number
  /**
   * BM25 (ranking and relevance) matches terms with accents folded and a final e dropped (analyzer.ts `foldTerm`);
   * the vectors are untouched. Default false. Nothing in the store changes: BM25 is rebuilt from the text at a load
   * (a terms file made with the other setting is not used).
   */
  foldTerms?: boolean
  /**
   * Weight of the query's word pairs found side by side in a hit's relevance (Bm25Index.relevance `phraseWeight`).
   * Default 0: relevance is the share of the query's terms alone.
   */
  phraseWeight?: number
  /**
   * Whether the namespaces keep an HNSW graph of their vectors. False for an owner that never ranks by vector (session
   * recall with the local embedder, whose vector weight is 0): the vectors stay in the store, but no graph is built,
   * inserted into, loaded or saved, and a graph file left from before is removed at the next save. A search in
   * 'vector' mode then finds nothing, and 'hybrid' ranks by BM25 alone. Default true.
   */
  graph?: boolean
  /**
   * A namespace holding fewer vectors than this keeps no graph: its vectors stay in the exact set (fresh-vectors.ts)
   * and every search compares the query with each of them. Why: an hnswlib graph costs ≈ 2.5 MB however few vectors it
   * holds (the library's 65,536 per-label locks), so 64 loaded tenants of a few files each held ≈ 160 MB of it, while
   * the exact scan of up to 256 vectors of 256 dimensions takes about what a graph search does (measured: 64 vectors
   * 39 against 35 µs; 256, 79 against 49 µs). The namespace gets its graph when an addition takes it to this size
   * (its vectors then drain into it in the background), and keeps it. At most `maxFresh`. Default 256; 0: always a graph.
   */
  graphMin?: number
}

interface Entry {
  readonly file: string
  bm25: Bm25Index
  vectors: VectorIndex | null
  refs: Map<number, DocRef>
  /**
   * Committed vectors not yet in `vectors` (the graph), moving into it in the background (`#drain`). Every live label
   * with a vector is in exactly one of the two; the graph is saved only when this is empty, so a saved graph holds
   * every vector of the version it claims.
   */
  fresh: FreshVectors
  version: number
  epoch: string | undefined
  /**
   * The state this entry will be at once its queued changes have run (set when a change is queued). A committed state
   * up to it is on its way here; one past it was committed by another process sharing the store, which this entry
   * missed.
   */
  pending: { version: number; epoch: string | undefined }
  /** A catch-up from the change log is queued or running: searches it covers wait for it (`#entry`). */
  catchingUp?: boolean
  /** A removal is running, in slices: searches it covers wait for it (`#entry`), so none ranks half of it. */
  removing?: boolean
  embedderId: string
  dimension: number
  dirty: boolean
  /** The tail of this namespace's changes and saves, run one at a time (never rejects). */
  queue: Promise<void>
  /** Its graph being built in a worker while its vectors are searched exactly (`#buildLater`). */
  building?: GraphBuild
}

/** A graph built after its namespace was loaded: what changed meanwhile is applied to it when it is swapped in. */
interface GraphBuild {
  /** The labels the graph is built from. */
  readonly labels: ReadonlySet<number>
  /** Of those, the ones removed since (the graph still holds them). */
  readonly removed: Set<number>
  readonly stop: AbortController
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
  readonly #sliceMs: number
  readonly #maxFresh: number
  readonly #graphWorkerMin: number
  /** Namespaces of at least this many documents keep a terms file beside their graph (terms-file.ts). */
  readonly #termsFileMin: number
  /** The terms BM25 indexes and searches, from `analyze`'s (foldTerms, or as they are). */
  readonly #lexical: (terms: readonly string[]) => readonly string[]
  /** Which analysis made those terms: a terms file made by another is not used. */
  readonly #analyzerId: string
  readonly #phraseWeight: number
  readonly #graph: boolean
  readonly #graphMin: number
  readonly #loaded: LRUCache<string, Entry>
  readonly #onSaveError: (err: unknown, file: string) => void
  readonly #cacheRoom: ((bytes: number) => Promise<boolean>) | undefined
  readonly #onApplyError: (err: unknown, namespace: string) => void
  /** Loads in progress, so concurrent first uses of a namespace share one. */
  readonly #loading = new Map<string, Promise<Entry>>()
  /** Work of entries no longer loaded (an evicted namespace's save), awaited by flush and close. */
  readonly #detached = new Set<Promise<void>>()
  /** Graphs being built for loaded namespaces (`#buildLater`), awaited by idle and stopped by close. */
  readonly #builds = new Map<Promise<void>, AbortController>()
  #timer: NodeJS.Timeout | undefined
  #closed = false
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
    this.#sliceMs = opts.sliceMs ?? DEFAULT_SLICE_MS
    this.#maxFresh = Math.max(0, opts.maxFresh ?? DEFAULT_MAX_FRESH)
    this.#graphWorkerMin = opts.graphWorkerMin ?? 5000
    this.#termsFileMin = opts.termsFileMin ?? DEFAULT_TERMS_FILE_MIN
    this.#lexical = opts.foldTerms === true ? foldTerms : (terms) => terms
    this.#analyzerId = `${ANALYZER_ID}${opts.foldTerms === true ? '+fold' : ''}`
    this.#phraseWeight = opts.phraseWeight ?? 0
    this.#graph = opts.graph ?? true
    this.#graphMin = Math.min(this.#maxFresh, Math.max(0, opts.graphMin ?? DEFAULT_GRAPH_MIN))
    this.#onSaveError =
      opts.onSaveError ?? ((err, file) => process.emitWarning(`recallgate: could not save ${file}: ${String(err)}`, 'IndexSaveWarning'))
    this.#cacheRoom = opts.cacheRoom
    this.#onApplyError =
      opts.onApplyError ?? ((err, ns) => process.emitWarning(`recallgate: index of ${ns} unloaded after: ${String(err)}`, 'IndexApplyWarning'))
    mkdirSync(this.#dir, { recursive: true })
    this.#loaded = new LRUCache<string, Entry>({
      max: opts.maxLoaded ?? 64,
      dispose: (entry, _ns, reason) => {
        if (reason !== 'evict') return
        entry.building?.stop.abort()
        const done = this.#enqueue(entry, () => (entry.dirty ? this.#save(entry) : undefined))
        this.#detached.add(done)
        void done.then(() => this.#detached.delete(done))
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

  /**
   * Load `namespace` now (lazily done by search), and wait for its pending work (a rebuilt graph's save); warm-up and
   * owners about to write call it.
   */
  async load(namespace: string): Promise<void> {
    const entry = await this.#entry(namespace, await this.#source.meta(namespace))
    await entry.queue
  }

  /** Loaded, or being loaded (for tests and metrics). */
  isLoaded(namespace: string): boolean {
    return this.#loaded.has(namespace)
  }

  /**
   * `cancel`: the client's departure stops the query's embedding call (a remote embedder's).
   *
   * The committed state is read first and the entry brought up to it before ranking (read-your-writes across
   * processes). When that read is a round trip (PostgreSQL) and the namespace is loaded, the round trip runs while
   * the loaded entry ranks, and the ranking is returned only if the entry had applied the state read when it ranked
   * (so every change committed before the search began); else the entry catches up as above and ranks again. A replica's warm search cost a
   * round trip more than the embedded one (1.24–1.91× in bench --only stores); this takes it off the critical path.
   */
  async search(namespace: string, query: string, k: number, mode: SearchMode = 'hybrid', cancel: Cancel = {}): Promise<IndexHit[]> {
    if (k <= 0) return []
    const read = this.#source.meta(namespace)
    if (read instanceof Promise && this.#ranksAhead(namespace, mode)) return this.#searchAhead(namespace, read, query, k, mode, cancel)
    const meta = await read
    if (meta === undefined || meta.count === 0) return []
    if (mode !== 'bm25') this.checkEmbedder(meta)
    const qv = await this.#embedQuery(query, mode, cancel)
    // Everything after this await is synchronous, so the entry cannot change under the search (changes apply in slices
    // between event-loop turns: a search sees whole slices).
    const found = this.#entry(namespace, meta)
    return this.#rank(found instanceof Promise ? await found : found, query, qv, k, mode)
  }

  /** Whether a search may rank on the loaded entry before the committed state is read: one with documents, of our embedder. */
  #ranksAhead(namespace: string, mode: SearchMode): boolean {
    const entry = this.#loaded.peek(namespace)
    return entry !== undefined && entry.refs.size > 0 && (mode === 'bm25' || entry.embedderId === this.#embedder.id)
  }

  async #searchAhead(
    namespace: string,
    read: Promise<NamespaceMeta | undefined>,
    query: string,
    k: number,
    mode: SearchMode,
    cancel: Cancel,
  ): Promise<IndexHit[]> {
    // Awaited below; this only keeps a failed read from going unhandled while the embedding throws first.
    read.catch(() => {})
    // Put the read on the wire before ranking holds the event loop: node-postgres's pool hands a connection to a query
    // on process.nextTick, which runs only once the microtask queue has drained, so without this turn the read would
    // be sent after the ranking, not during it (measured: no overlap at all).
    await new Promise<void>((resolve) => process.nextTick(resolve))
    const qv = await this.#embedQuery(query, mode, cancel)
    const entry = this.#loaded.get(namespace)
    // The ranking and the state it had applied, taken in one synchronous step. Applied, not `pending`: a change queued
    // by another search's catch-up is not in this ranking.
    const ahead = entry === undefined ? undefined : { hits: this.#rank(entry, query, qv, k, mode), version: entry.version, epoch: entry.epoch }
    const meta = await read
    if (meta === undefined || meta.count === 0) return []
    if (mode !== 'bm25') this.checkEmbedder(meta)
    if (ahead !== undefined && ahead.epoch === meta.epoch && meta.version <= ahead.version) return ahead.hits
    const found = this.#entry(namespace, meta)
    return this.#rank(found instanceof Promise ? await found : found, query, qv, k, mode)
  }

  async #embedQuery(query: string, mode: SearchMode, cancel: Cancel): Promise<Float32Array | undefined> {
    return mode === 'bm25' ? undefined : (await this.#embedder.embed([query], cancel))[0]
  }

  /** The terms BM25 indexes for `text`, and searches for as a query. */
  #terms(text: string): readonly string[] {
    return this.#lexical(analyze(text))
  }

  /** Rank on `entry` as it is now (synchronous: the entry cannot change under it). */
  #rank(entry: Entry, query: string, qv: Float32Array | undefined, k: number, mode: SearchMode): IndexHit[] {
    const depth = Math.max(k, this.#candidates)
    const terms = this.#terms(query)
    const lexical = mode === 'vector' ? [] : entry.bm25.search(terms, depth)
    // While a large namespace's graph builds (`#buildLater`), a hybrid search ranks by BM25 alone: an exact pass over
    // more than maxFresh vectors would hold the event loop for every search (≈ 30 ms at 100k) until the graph is in.
    const unranked = qv === undefined || isZeroVector(qv) || (mode === 'hybrid' && entry.building !== undefined && entry.fresh.size > this.#maxFresh)
    const semantic = unranked ? [] : mergeRankings(entry.vectors?.search(qv, depth) ?? [], entry.fresh.search(qv, depth), depth)
    const ranked: ScoredLabel[] =
      mode === 'hybrid' ? reciprocalRankFusion([lexical, semantic], { k: this.#rrfK, weights: [1, this.#vectorWeight] }) : mode === 'bm25' ? lexical : semantic
    const cosine = new Map<number, number>()
    for (const h of semantic) cosine.set(h.label, h.score)
    const bm25 = new Map<number, number>()
    for (const h of lexical) bm25.set(h.label, h.score)
    const hits: IndexHit[] = []
    for (const { label, score } of ranked) {
      const ref = entry.refs.get(label)
      if (ref === undefined) continue
      const hit: IndexHit = { label, ref, score, relevance: 0 }
      const similarity = cosine.get(label)
      if (similarity !== undefined) hit.similarity = similarity
      const lexicalScore = bm25.get(label)
      if (lexicalScore !== undefined) hit.lexical = lexicalScore
      hits.push(hit)
      if (hits.length === k) break
    }
    // From the same entry the ranking used: no second read of the namespace's state (with PostgreSQL, a round trip).
    const relevance = entry.bm25.relevance(terms, hits.map((h) => h.label), this.#phraseWeight)
    hits.forEach((h, i) => {
      h.relevance = relevance[i] ?? 0
    })
    return hits
  }

  /**
   * The query's distinct BM25 terms with their idf in `namespace` as loaded now (terms no document has are left out),
   * and the analysis that produced them, so an owner can find where in a hit's text the query's words are
   * (knowledge/focus.ts). Empty when the namespace is not loaded.
   */
  queryWeights(namespace: string, query: string): { weights: Map<string, number>; terms: (text: string) => readonly string[] } {
    const weights = new Map<string, number>()
    const entry = this.#loaded.peek(namespace)
    const terms = (text: string): readonly string[] => this.#terms(text)
    if (entry === undefined) return { weights, terms }
    for (const t of terms(query)) {
      const idf = entry.bm25.idf(t)
      if (idf !== undefined) weights.set(t, idf)
    }
    return { weights, terms }
  }

  /**
   * An owner's write transaction is about to commit this change (called inside it): until the change is applied, a
   * search that reads the newer committed state still uses the loaded entry instead of taking it for one that missed
   * another process's change and reloading it (which for a large namespace is seconds of work).
   */
  expect(namespace: string, meta: NamespaceMeta): void {
    const entry = this.#loaded.get(namespace)
    if (entry !== undefined) this.#raisePending(entry, meta)
  }

  /**
   * A committed addition: `meta` is the namespace's state after it, `fromVersion` before it. Resolves once it is
   * searchable (never rejects: a failure unloads the namespace, which reloads from LMDB, and is reported).
   */
  applyAdd(namespace: string, fromVersion: number, meta: NamespaceMeta, docs: ReadonlyArray<AddedIndexDoc>): Promise<void> {
    return this.#apply(namespace, fromVersion, meta, async (entry) => {
      const slicer = new TimeSlicer(this.#sliceMs)
      const wasEmpty = entry.refs.size === 0
      // Per coded file (normally one): its vocabulary's BM25 term ids, made once.
      const termIds = new Map<CodedTerms, Uint32Array>()
      for (const d of docs) {
        if (d.coded !== undefined) {
          let ids = termIds.get(d.coded)
          if (ids === undefined) termIds.set(d.coded, (ids = await this.#vocabularyIds(entry.bm25, d.coded, slicer)))
          const codes = chunkCodes(d.coded, d.doc)
          const seq = new Uint32Array(codes.length)
          for (let k = 0; k < seq.length; k++) seq[k] = ids[codes[k] as number] as number
          entry.bm25.addIds(d.label, seq)
        } else entry.bm25.add(d.label, d.terms !== undefined ? this.#lexical(d.terms) : this.#terms(d.text))
        entry.refs.set(d.label, d.ref)
        if (slicer.due()) await slicer.pause()
      }
      if (this.#graph) await this.#addVectors(namespace, entry, meta, docs, wasEmpty, slicer)
    })
  }

  /**
   * applyAdd's vectors: into the fresh set, or (what the bound leaves over) straight into the graph. A namespace below
   * `graphMin` keeps them all in the fresh set, searched exactly, with no graph.
   */
  async #addVectors(
    namespace: string,
    entry: Entry,
    meta: NamespaceMeta,
    docs: ReadonlyArray<AddedIndexDoc>,
    wasEmpty: boolean,
    slicer: TimeSlicer,
  ): Promise<void> {
    // An emptied namespace may start over with another embedder (another dimension): start afresh then.
    if (wasEmpty || (entry.vectors !== null && entry.vectors.dimension !== meta.dimension)) {
      entry.vectors = null
      entry.fresh.clear()
    }
    if (entry.vectors === null) {
      // Below graphMin, or its graph still building (it takes these from the exact set once swapped in).
      if (!this.#graphDue(entry)) {
        for (const d of docs) entry.fresh.add(d.label, d.vector)
        return
      }
      entry.vectors = VectorIndex.create(meta.dimension, this.#hnsw, Math.max(1024, docs.length))
    }
    const vectors = entry.vectors
    // Over the bound: what is waiting goes into the graph first, then whatever of this addition does not fit.
    if (entry.fresh.size > 0 && entry.fresh.size + docs.length > this.#maxFresh) await this.#drainNow(entry, vectors, slicer)
    const direct = Math.max(0, docs.length - this.#maxFresh)
    // Graph insertions back to back, not interleaved with BM25's, so the graph's hot nodes stay in cache between them
    // (with chunk-terms.ts: −3% ingestion CPU at 20k chunks).
    for (let i = 0; i < docs.length; i++) {
      const d = docs[i] as AddedIndexDoc
      if (i < direct) vectors.add(d.label, d.vector)
      else entry.fresh.add(d.label, d.vector)
      if (slicer.due()) await slicer.pause()
    }
    // Queued behind this change (and any queued meanwhile), ahead of later ones: the next addition and every save
    // of this namespace wait for the graph to hold these vectors.
    if (entry.fresh.size > 0) void this.#enqueue(entry, () => this.#drain(namespace, entry))
  }

  /** The BM25 term id of each term of a coded file's vocabulary (folded as every BM25 term is), in slices. */
  async #vocabularyIds(bm25: Bm25Index, coded: CodedTerms, slicer: TimeSlicer): Promise<Uint32Array> {
    const vocab = vocabularyOf(coded)
    const ids = new Uint32Array(vocab.length)
    for (let from = 0; from < vocab.length; from += 1024) {
      const terms = this.#lexical(vocab.slice(from, from + 1024))
      for (let i = 0; i < terms.length; i++) ids[from + i] = bm25.termId(terms[i] as string)
      if (slicer.due()) await slicer.pause()
    }
    return ids
  }

  /** Runs in the entry's queue: move the fresh vectors into the graph, in slices; a search between two sees each once. */
  async #drain(namespace: string, entry: Entry): Promise<void> {
    // Unloaded since (a failure, a reload, eviction): its graph will never be searched or saved as current.
    if (this.#loaded.peek(namespace) !== entry || entry.vectors === null) return
    await this.#drainNow(entry, entry.vectors, new TimeSlicer(this.#sliceMs))
    // A save that ran while vectors were waiting was skipped (see #save): the namespace is still dirty.
    if (entry.dirty) this.#scheduleSave()
  }

  async #drainNow(entry: Entry, vectors: VectorIndex, slicer: TimeSlicer): Promise<void> {
    for (let next = entry.fresh.first(); next !== undefined; next = entry.fresh.first()) {
      // Into the graph, then out of the fresh set, in one synchronous step.
      vectors.add(next.label, next.vector)
      entry.fresh.delete(next.label)
      if (slicer.due()) await slicer.pause()
    }
  }

  /**
   * Documents leave the loaded entry, in slices: BM25, refs, and each vector from the fresh set if it is still waiting
   * there, else from the graph. Labels it does not hold are skipped.
   */
  async #removeDocs(entry: Entry, labels: Iterable<number>, slicer: TimeSlicer): Promise<void> {
    for (const label of labels) {
      if (!entry.refs.delete(label)) continue
      entry.bm25.remove(label)
      if (!entry.fresh.delete(label)) entry.vectors?.remove(label)
      if (entry.building?.labels.has(label) === true) entry.building.removed.add(label)
      if (slicer.due()) await slicer.pause()
    }
  }

  /** A committed removal of `labels` (resolves and fails like applyAdd). */
  applyRemove(namespace: string, fromVersion: number, meta: NamespaceMeta, labels: readonly number[]): Promise<void> {
    return this.#apply(namespace, fromVersion, meta, async (entry) => {
      // In slices, as an addition is: a large file's 14,730 labels were one block of the event loop. A search that
      // read the committed state meanwhile waits for the whole removal (`removing`), so none ranks half of it.
      const slicer = new TimeSlicer(this.#sliceMs)
      entry.removing = true
      try {
        await this.#removeDocs(entry, labels, slicer)
      } finally {
        entry.removing = false
      }
      // Deleted vectors still cost graph space and search time: rebuild once they outnumber the live ones. Searches
      // keep using the old graph until the new one is complete.
      const old = entry.vectors
      if (old !== null && old.deleted > Math.max(1024, old.size)) {
        const next = VectorIndex.create(old.dimension, this.#hnsw, old.size)
        for (const label of [...entry.refs.keys()]) {
          // Still waiting in the fresh set: it goes into the new graph when the fresh set drains.
          if (entry.fresh.has(label)) continue
          next.add(label, old.vector(label))
          if (slicer.due()) await slicer.pause()
        }
        entry.vectors = next
      }
    })
  }

  /** Forget a namespace whose records were deleted (after the commit): unload it and delete its graph file. */
  drop(namespace: string): void {
    const entry = this.#loaded.get(namespace)
    entry?.building?.stop.abort()
    this.#loaded.delete(namespace)
    this.#removeFiles(this.#file(namespace))
    // A save of this namespace still in the thread pool would put a file back: delete it again once that is done.
    if (entry !== undefined) void entry.queue.then(() => this.#removeFiles(entry.file))
  }

  /** Wait until every queued change and save (an evicted namespace's too) has run. */
  async idle(): Promise<void> {
    await Promise.all([...this.#builds.keys()])
    await Promise.all([...this.#detached, ...[...this.#loaded.values()].map((e) => e.queue)])
  }

  /** Save every changed graph now, and wait for saves in progress. */
  async flush(): Promise<void> {
    clearTimeout(this.#timer)
    this.#timer = undefined
    const pending = [...this.#detached]
    for (const entry of this.#loaded.values()) pending.push(this.#enqueue(entry, () => (entry.dirty ? this.#save(entry) : undefined)))
    await Promise.all(pending)
  }

  async close(): Promise<void> {
    // Loads in progress stop at their next pause (a 100k-chunk load is seconds: shutdown should not wait for it).
    this.#closed = true
    for (const stop of this.#builds.values()) stop.abort()
    await Promise.allSettled([...this.#loading.values(), ...this.#builds.keys()])
    await this.flush()
    this.#loaded.clear()
  }

  /**
   * The loaded namespace (synchronously: the search hot path), or the one load in progress, or a new load. A loaded
   * entry behind the committed `meta` by more than its queued changes missed a change committed by another process
   * sharing the store (WORKERS, replicas on one DATA_DIR): it is dropped and loaded again, so every search sees every
   * change committed before it started (read-your-writes across processes).
   */
  #entry(namespace: string, meta: NamespaceMeta | undefined): Entry | Promise<Entry> {
    const cached = this.#loaded.get(namespace)
    if (cached !== undefined) {
      const { version, epoch } = cached.pending
      if (epoch === meta?.epoch ? (meta?.version ?? 0) <= version : meta === undefined && version === 0) {
        // Covered by a catch-up another search started and that is still applying: wait for it in the queue, or this
        // search would rank on the index from before another process's delete (final from the next request on).
        if ((cached.catchingUp === true || cached.removing === true) && meta !== undefined && cached.version < meta.version)
          return this.#catchUp(namespace, cached, meta)
        return cached
      }
      // Behind within the same generation: apply what it missed from the change log (a few documents) rather than
      // reload the namespace (seconds at 100k chunks).
      if (meta !== undefined && epoch === meta.epoch && this.#hasLog()) return this.#catchUp(namespace, cached, meta)
      // Unsaved changes of a stale entry are older than what is committed: nothing worth saving.
      cached.dirty = false
      this.#loaded.delete(namespace)
    }
    let loading = this.#loading.get(namespace)
    if (loading === undefined) {
      loading = this.#build(namespace).finally(() => this.#loading.delete(namespace))
      this.#loading.set(namespace, loading)
    }
    return loading
  }

  /**
   * Read a namespace from the source in slices. The documents come from one LMDB read snapshot (a range iterator holds
   * its read transaction until it ends), taken in the same turn as the meta. A change committed meanwhile is not
   * applied to an entry that is not loaded yet, so if the version moved, the load starts over.
   */
  async #build(namespace: string): Promise<Entry> {
    const pause = async (slicer: TimeSlicer): Promise<void> => {
      await slicer.pause()
      if (this.#closed) throw new IndexClosedError()
    }
    for (;;) {
      const meta = await this.#source.meta(namespace)
      const entry: Entry = {
        file: this.#file(namespace),
        bm25: new Bm25Index({ maxDocs: this.#maxDocs }),
        vectors: null,
        refs: new Map(),
        fresh: new FreshVectors(),
        version: meta?.version ?? 0,
        epoch: meta?.epoch,
        pending: { version: meta?.version ?? 0, epoch: meta?.epoch },
        embedderId: meta?.embedderId ?? this.#embedder.id,
        dimension: meta?.dimension ?? this.#embedder.dimension,
        dirty: false,
        queue: Promise.resolve(),
      }
      let rebuilt = false
      let deferred = false
      let termsRead = false
      if (meta !== undefined && meta.count > 0) {
        const expected = { dimension: meta.dimension, version: meta.version, count: meta.count, epoch: meta.epoch }
        const wantsGraph = this.#graph && meta.count >= this.#graphMin
        const current = wantsGraph ? await VectorIndex.load(entry.file, expected, this.#hnsw) : undefined
        rebuilt = wantsGraph && current === undefined
        // A large graph to rebuild (no current file: a replica's first load, a stale or damaged file) is built in a
        // worker once the namespace is loaded; until then its vectors are searched exactly (`#buildLater`).
        deferred = rebuilt && meta.count >= this.#graphWorkerMin
        // The vectors searched exactly (a small namespace, or one whose graph is built later) are read while BM25 is
        // built, so the store's two reads overlap (a replica's first load at 101k chunks: 9.5 s one after the other,
        // 5.6 s together).
        const exact = this.#graph && (!wantsGraph || deferred) ? this.#loadExact(namespace, entry, pause) : undefined
        // Awaited below; this only keeps it from going unhandled if the documents' load fails first.
        exact?.catch(() => undefined)
        const slicer = new TimeSlicer(this.#sliceMs)
        const saved = meta.count >= this.#termsFileMin ? await loadTerms(termsFile(entry.file), { ...expected, analyzer: this.#analyzerId }) : undefined
        termsRead = saved !== undefined && (await this.#restore(entry, saved, slicer, pause))
        if (!termsRead) {
          if (saved !== undefined) {
            // A file found inconsistent (a term twice in its vocabulary, a code outside it): start over from the text.
            entry.bm25 = new Bm25Index({ maxDocs: this.#maxDocs })
            entry.refs.clear()
          }
          for await (const doc of this.#source.documents(namespace)) {
            entry.bm25.add(doc.label, this.#terms(doc.text))
            entry.refs.set(doc.label, doc.ref)
            if (slicer.due()) await pause(slicer)
          }
        }
        if (wantsGraph && !deferred) entry.vectors = current ?? (await this.#buildVectors(meta.dimension, meta.count, this.#source.vectors(namespace), pause))
        else await exact
      }
      const now = await this.#source.meta(namespace)
      if ((now?.version ?? 0) !== entry.version || now?.epoch !== entry.epoch) continue
      this.#loaded.set(namespace, entry)
      // Saved at once (a deferred graph once built), so the next start finds the graph current; a current graph
      // without its terms file gets that.
      if (deferred) this.#buildLater(namespace, entry)
      else if (rebuilt) void this.#enqueue(entry, () => this.#save(entry))
      else if (!termsRead && entry.refs.size >= this.#termsFileMin) void this.#enqueue(entry, () => this.#saveTermsOnly(entry))
      return entry
    }
  }

  /**
   * BM25 and the refs from a terms file (terms-file.ts): the documents as they were analyzed, no text read. False when
   * the file is found inconsistent on the way (a term twice in its vocabulary, so its ids are not the index's; a code
   * outside it; a ref it lacks): the caller starts over from the store.
   */
  async #restore(entry: Entry, saved: TermsRead, slicer: TimeSlicer, pause: (s: TimeSlicer) => Promise<void>): Promise<boolean> {
    // A fresh index hands out ids in order: each term must get the next one.
    for (let i = 0; i < saved.vocab.length; i++) {
      if (entry.bm25.termId(saved.vocab[i] as string) !== i) return false
      if ((i & 1023) === 1023 && slicer.due()) await pause(slicer)
    }
    const terms = saved.vocab.length
    let from = 0
    for (let d = 0; d < saved.labels.length; d++) {
      const label = saved.labels[d] as number
      const end = saved.ends[d] as number
      const ref = saved.ref(d)
      if (end < from || ref === undefined) return false
      const seq = saved.codes.subarray(from, end)
      for (let i = 0; i < seq.length; i++) if ((seq[i] as number) >= terms) return false
      entry.bm25.addIds(label, seq)
      entry.refs.set(label, ref)
      from = end
      if (slicer.due()) await pause(slicer)
    }
    return true
  }

  /**
   * Build a loaded namespace's graph from its exact set in a worker thread (vector-index.ts `buildInWorker`), while
   * searches rank that set exactly; if the worker cannot run (no thread, its module missing), on this thread in
   * slices. Then, in the entry's queue: the removals made meanwhile applied to the graph, the vectors it holds taken
   * out of the exact set (what was added meanwhile stays there and drains into the graph), and the graph saved.
   *
   * Why not before the first search: at 100k chunks the graph takes ≈ 16 s of one core to build, and a replica's first
   * search of that tenant waited for all of it (18–19 s in `bench --only stores`; 5.6 s now, the rest of the build
   * after it). Meanwhile a namespace of up to maxFresh vectors is searched exactly; a larger one's hybrid searches
   * rank by BM25 alone (`#rank`). The cost: the vectors are held twice while the graph builds.
   */
  #buildLater(namespace: string, entry: Entry): void {
    const labels: number[] = []
    const vectors: Float32Array[] = []
    entry.fresh.forEach((label, vector) => {
      labels.push(label)
      vectors.push(vector)
    })
    const stop = new AbortController()
    const build: GraphBuild = { labels: new Set(labels), removed: new Set(), stop }
    entry.building = build
    const dimension = entry.dimension
    const items = function* (): Iterable<{ label: number; vector: Float32Array }> {
      for (let i = 0; i < labels.length; i++) yield { label: labels[i] as number, vector: vectors[i] as Float32Array }
    }
    const done = (async (): Promise<void> => {
      let graph: VectorIndex
      try {
        graph = await VectorIndex.buildInWorker(
          { dimension, params: this.#hnsw, capacity: labels.length, tmpFile: `${entry.file}.${process.pid}.build` },
          items(),
          () => Promise.resolve(),
          { signal: stop.signal },
        )
      } catch (err) {
        if (this.#closed || stop.signal.aborted) return
        process.emitWarning(`recallgate: graph of ${namespace} rebuilt on the main thread: ${String(err)}`, 'IndexBuildWarning')
        const pause = async (slicer: TimeSlicer): Promise<void> => {
          await slicer.pause()
          if (stop.signal.aborted) throw new IndexClosedError()
        }
        try {
          graph = await this.#buildVectors(dimension, labels.length, items(), pause)
        } catch (stopped) {
          if (stopped instanceof IndexClosedError) return
          throw stopped
        }
      }
      await this.#enqueue(entry, () => {
        entry.building = undefined
        // Unloaded meanwhile, or started over with another embedder: this graph is of nothing current.
        if (stop.signal.aborted || this.#loaded.peek(namespace) !== entry || entry.dimension !== dimension) return
        for (const label of build.removed) graph.remove(label)
        for (const label of labels) entry.fresh.delete(label)
        entry.vectors = graph
        if (entry.fresh.size > 0) void this.#enqueue(entry, () => this.#drain(namespace, entry))
        void this.#enqueue(entry, () => this.#save(entry))
      })
    })()
      // Never rejects (idle awaits it; nothing else would): a failed build leaves the namespace searched exactly.
      .catch((err: unknown) => this.#onApplyError(err, namespace))
      .finally(() => {
        if (entry.building === build) entry.building = undefined
        this.#builds.delete(done)
      })
    this.#builds.set(done, stop)
  }

  /**
   * Whether a namespace with no graph gets one now, for the vectors being added: it has reached `graphMin`, and no graph
   * of it is being built (that one takes them from the exact set once swapped in). One rule for additions and catch-ups.
   */
  #graphDue(entry: Entry): boolean {
    return entry.refs.size >= this.#graphMin && entry.building === undefined
  }

  /** A namespace searched exactly (below `graphMin`, or its graph built later): its vectors into the exact set, in slices. */
  async #loadExact(namespace: string, entry: Entry, pause: (s: TimeSlicer) => Promise<void>): Promise<void> {
    const slicer = new TimeSlicer(this.#sliceMs)
    for await (const { label, vector } of this.#source.vectors(namespace)) {
      entry.fresh.add(label, vector)
      if (slicer.due()) await pause(slicer)
    }
  }

  /** Build a graph on this thread from `vectors` (the store's, or a namespace's exact set), in slices. */
  async #buildVectors(
    dimension: number,
    capacity: number,
    vectors: Iterable<{ label: number; vector: Float32Array }> | AsyncIterable<{ label: number; vector: Float32Array }>,
    pause: (s: TimeSlicer) => Promise<void>,
  ): Promise<VectorIndex> {
    const index = VectorIndex.create(dimension, this.#hnsw, capacity)
    const slicer = new TimeSlicer(this.#sliceMs)
    for await (const { label, vector } of vectors) {
      index.add(label, vector)
      if (slicer.due()) await pause(slicer)
    }
    return index
  }

  /** Namespaces may hold any characters (tenant ids, session ids): the file is named by their hash. */
  #file(namespace: string): string {
    return join(this.#dir, `${namespaceHash(namespace)}.hnsw`)
  }

  /**
   * Run `change` on the loaded entry in its queue, if the entry is then at exactly `fromVersion`; one already past it
   * ignores it; one that missed a change is dropped unsaved (the next use reloads from LMDB). Not loaded: nothing to do.
   */
  #apply(namespace: string, fromVersion: number, meta: NamespaceMeta, change: (entry: Entry) => Promise<void>): Promise<void> {
    const entry = this.#loaded.get(namespace)
    if (entry === undefined) return Promise.resolve()
    this.#raisePending(entry, meta)
    return this.#enqueue(entry, async () => {
      if (entry.epoch === meta.epoch && entry.version >= meta.version) return
      // A change from version 0 created the namespace (and its epoch): an entry loaded empty is at that state.
      if (entry.version !== fromVersion || (fromVersion !== 0 && entry.epoch !== meta.epoch)) {
        // Another process committed in between (WORKERS): the log has its change and this one; else reload.
        if (entry.epoch === meta.epoch && entry.version < fromVersion && (await this.#catchUpNow(namespace, entry, meta))) return
        if (this.#loaded.peek(namespace) === entry) this.#loaded.delete(namespace)
        return
      }
      try {
        await change(entry)
      } catch (err) {
        // Half applied: unload it (LMDB has the whole change) and never save it.
        entry.dirty = false
        if (this.#loaded.peek(namespace) === entry) this.#loaded.delete(namespace)
        this.#onApplyError(err, namespace)
        return
      }
      this.#changed(entry, meta)
    })
  }

  #hasLog(): boolean {
    const s = this.#source
    return s.changes !== undefined && s.added !== undefined
  }

  /**
   * Bring a loaded entry that missed other processes' changes up to `meta` from the change log, in its queue (after any
   * change of this process already queued), and resolve with the entry to search: this one, or a reload when the log
   * could not bring it there.
   */
  #catchUp(namespace: string, entry: Entry, meta: NamespaceMeta): Promise<Entry> {
    this.#raisePending(entry, meta)
    entry.catchingUp = true
    const done = this.#enqueue(entry, async () => {
      try {
        if (entry.epoch === meta.epoch && entry.version >= meta.version) return
        if (!(await this.#catchUpNow(namespace, entry, meta)) && this.#loaded.peek(namespace) === entry) this.#loaded.delete(namespace)
      } finally {
        entry.catchingUp = false
      }
    })
    return done.then(() => {
      if (this.#loaded.peek(namespace) === entry) return entry
      return Promise.resolve(this.#source.meta(namespace)).then((meta) => this.#entry(namespace, meta))
    })
  }

  /**
   * Runs in the entry's queue: apply versions entry.version+1 .. meta.version from the log, in slices. False when the
   * log does not reach back that far (or another dimension started over): the caller unloads. A failure part-way
   * unloads the entry (never saved) and is reported, like a failed apply.
   */
  async #catchUpNow(namespace: string, entry: Entry, meta: NamespaceMeta): Promise<boolean> {
    const src = this.#source
    if (src.changes === undefined || src.added === undefined) return false
    if (entry.refs.size > 0 && (entry.vectors?.dimension ?? entry.dimension) !== meta.dimension) return false
    try {
      const log = await src.changes(namespace, entry.version + 1, meta.version)
      if (log === undefined) return false
      // Labels are never reused, so a label removed by any version of the log is left out of the additions, and the
      // documents still to add are fetched in batches (what is gone since is not returned: a later version removed it).
      const removed = new Set<number>()
      for (const change of log) for (const label of change.remove ?? []) removed.add(label)
      const adds: Array<readonly [number, DocRef]> = []
      for (const change of log) for (const add of change.add ?? []) if (!removed.has(add[0]) && !entry.refs.has(add[0])) adds.push(add)
      const slicer = new TimeSlicer(this.#sliceMs)
      await this.#removeDocs(entry, removed, slicer)
      // An emptied namespace may start over with another embedder (the log reaches back that far only within its epoch).
      if (entry.refs.size === 0) {
        entry.vectors = null
        entry.fresh.clear()
      }
      const refs = new Map(adds)
      for (let i = 0; i < adds.length; i += CATCH_UP_BATCH) {
        for (const { label, text, vector } of await src.added(namespace, adds.slice(i, i + CATCH_UP_BATCH))) {
          const ref = refs.get(label)
          if (ref === undefined || entry.refs.has(label)) continue
          entry.bm25.add(label, this.#terms(text))
          entry.refs.set(label, ref)
          if (!this.#graph) continue
          if (entry.vectors === null && this.#graphDue(entry)) entry.vectors = VectorIndex.create(meta.dimension, this.#hnsw)
          if (entry.vectors === null) entry.fresh.add(label, vector)
          else entry.vectors.add(label, vector)
          if (slicer.due()) await slicer.pause()
        }
      }
    } catch (err) {
      entry.dirty = false
      if (this.#loaded.peek(namespace) === entry) this.#loaded.delete(namespace)
      this.#onApplyError(err, namespace)
      return true
    }
    this.#changed(entry, meta)
    // A graph made by this catch-up (the namespace grew past graphMin) takes the exact set's vectors in the background.
    if (entry.vectors !== null && entry.fresh.size > 0) void this.#enqueue(entry, () => this.#drain(namespace, entry))
    return true
  }

  #raisePending(entry: Entry, meta: NamespaceMeta): void {
    const p = entry.pending
    if (p.epoch !== meta.epoch || p.version < meta.version) entry.pending = { version: meta.version, epoch: meta.epoch }
  }

  /** Append `work` to the entry's queue; the returned promise settles when it has run and never rejects. */
  #enqueue(entry: Entry, work: () => Promise<void> | void): Promise<void> {
    const run = entry.queue.then(work).catch((err: unknown) => this.#onApplyError(err, entry.file))
    entry.queue = run
    return run
  }

  #changed(entry: Entry, meta: NamespaceMeta): void {
    entry.version = meta.version
    entry.epoch = meta.epoch
    entry.embedderId = meta.embedderId
    entry.dimension = meta.dimension
    entry.dirty = true
    this.#scheduleSave()
  }

  #scheduleSave(): void {
    if (this.#timer !== undefined) return
    const wait = Math.max(this.#saveDelay, this.#lastSave.end + SAVE_COST_FACTOR * this.#lastSave.took - performance.now())
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      const start = performance.now()
      void this.flush().then(() => {
        this.#lastSave = { end: performance.now(), took: performance.now() - start }
      })
    }, wait).unref()
  }

  /** The entry's documents for its terms file, and about how many bytes the file takes. */
  #termsOf(entry: Entry): { snapshot: TermsSnapshot; bytes: number } {
    const { vocab, labels, ends, codes } = entry.bm25.snapshot()
    const refs: DocRef[] = []
    for (const label of labels) refs.push(entry.refs.get(label) ?? [])
    return { snapshot: { vocab, labels, ends, codes, refs }, bytes: codes.length * 4 + labels.length * 32 + vocab.length * 10 }
  }

  async #saveTermsOnly(entry: Entry): Promise<void> {
    // Changed since it loaded: the next full save writes both files.
    if (entry.dirty) return
    try {
      const terms = this.#termsOf(entry)
      if (this.#cacheRoom !== undefined && !(await this.#cacheRoom(terms.bytes))) return
      await this.#writeTerms(entry, terms.snapshot)
    } catch (err) {
      this.#onSaveError(err, termsFile(entry.file))
    }
  }

  /** The terms file of `entry` as it is now (its `#termsOf`, taken in its queue). */
  #writeTerms(entry: Entry, snapshot: TermsSnapshot): Promise<void> {
    const state = { version: entry.version, epoch: entry.epoch, count: entry.refs.size, analyzer: this.#analyzerId }
    return saveTerms(termsFile(entry.file), state, snapshot)
  }

  /**
   * `#save` of a namespace with no graph (none kept, below graphMin, its build stopped, or emptied): the terms file
   * alone, and no graph file (one left from when it had a graph).
   */
  async #saveWithoutGraph(entry: Entry, terms: { snapshot: TermsSnapshot; bytes: number } | undefined): Promise<void> {
    VectorIndex.remove(entry.file)
    if (terms === undefined || (this.#cacheRoom !== undefined && !(await this.#cacheRoom(terms.bytes)))) removeTerms(termsFile(entry.file))
    else await this.#writeTerms(entry, terms.snapshot)
  }

  #removeFiles(graph: string): void {
    VectorIndex.remove(graph)
    removeTerms(termsFile(graph))
  }

  /** Runs in the entry's queue (the graph must not change while the thread pool writes it). */
  async #save(entry: Entry): Promise<void> {
    // The graph lacks vectors of the version it would claim: saved once they have drained (`#drain` asks again). A
    // namespace with no graph (below graphMin) has none to save, and a file left from when it had one goes.
    if ((entry.fresh.size > 0 && entry.vectors !== null) || entry.building !== undefined) return
    entry.dirty = false
    try {
      mkdirSync(this.#dir, { recursive: true })
      // Taken now, in the entry's queue: the state the graph is saved at (no change runs until this save is done).
      const terms = entry.refs.size >= this.#termsFileMin ? this.#termsOf(entry) : undefined
      if (entry.vectors === null || entry.refs.size === 0) await this.#saveWithoutGraph(entry, terms)
      else if (this.#cacheRoom !== undefined && !(await this.#cacheRoom(entry.vectors.fileBytes() + (terms?.bytes ?? 0)))) {
        this.#removeFiles(entry.file)
        entry.dirty = true
      } else {
        await entry.vectors.save(entry.file, { version: entry.version, epoch: entry.epoch })
        if (terms === undefined) removeTerms(termsFile(entry.file))
        else await this.#writeTerms(entry, terms.snapshot)
      }
    } catch (err) {
      this.#onSaveError(err, entry.file)
    }
  }
}

/** A load cut short because the index was closed (shutdown). */
export class IndexClosedError extends Error {
  constructor() {
    super('the search index was closed while loading')
    this.name = 'IndexClosedError'
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

const DEFAULT_TERMS_FILE_MIN = 2_000

/** SearchIndexOptions.maxFresh's default: MAX_CHUNKS_PER_FILE's, so an upload of any allowed size answers early. */
export const DEFAULT_MAX_FRESH = 20_000
/** SearchIndexOptions.graphMin's default. */
export const DEFAULT_GRAPH_MIN = 256
