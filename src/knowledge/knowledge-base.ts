/**
 * The knowledge base: per-tenant files, ingested (extract → chunk → embed → one LMDB transaction → indexes) and
 * searched (BM25 + vectors, fused). The HTTP routes and the chat pipeline call this; it holds no HTTP knowledge.
 *
 * Tenants are separate all the way down: stored keys start with the tenant, and each tenant has its own index
 * namespace (`files:<tenant>`), so a search can only ever rank the caller's own chunks.
 *
 * The records live behind the store contract (`FileStore`: LMDB in DATA_DIR, or PostgreSQL shared by replicas); the
 * indexes are this process's cache of them, brought up to the namespace's committed version before every search.
 */
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { gatewayError } from '../errors.js'
import { LRUCache } from 'lru-cache'
import type { ChunkRow, FileChunk, FileRow, FileStore, IndexMeta } from '../storage/interface.js'
import type { Clock, Tokens } from '../types.js'
import type { Chunk } from '../ingest/chunker.js'
import { LocalEmbedder, type Cancel, type Embedder } from '../retrieval/embedder.js'
import { formatOfType, type Format } from '../ingest/extract.js'
import { IndexClosedError, SearchIndex, type SearchMode } from '../retrieval/search-index.js'
import { TimeSlicer } from '../retrieval/time-slice.js'
import type { HnswParams } from '../retrieval/vector-index.js'
import { prepareFile, titleOf } from './prepare.js'
import { focusSpan } from './focus.js'
import { DEFAULT_PHRASE_WEIGHT, relevantHits, type RelevanceGate } from './relevance.js'
import { countO200k } from '../context/token-count.js'
import { PreparePool, type PreparePoolOptions } from './prepare-pool.js'
import type { ExtractLimits } from '../ingest/extract.js'
import { readJsonUpload, type JsonUpload } from './json-upload.js'
import { decodeTerms } from '../retrieval/chunk-terms.js'

export { renderContextMessage, renderCounted } from './context-message.js'

export type FileRecord = FileRow

/** Chunks read per step when a file's text is put back together (fileTextPieces). */
const FILE_TEXT_BATCH = 256

export interface SearchHit {
  file_id: string
  filename: string
  /** The file's metadata as uploaded (tells copies of one name apart), null when it had none. */
  metadata: Record<string, unknown> | null
  chunk_index: number
  score: number
  /**
   * Share of the query's information this chunk holds, 0–1 (relevance.ts): what decides whether it is relevant. With
   * a learned embedder, the larger of that and the chunk's cosine similarity to the query.
   */
  relevance: number
  /**
   * The chunk's BM25 score when the lexical ranking found it (undefined for a chunk only the vectors found): the gate
   * keeps the chunks scoring near the best one (relevance.ts `scoreRatio`).
   */
  lexical?: number
  text: string
  tokens: Tokens
  heading_path?: string[]
  /** Character range of `text` in the file's extracted text (lets the renderer merge neighbouring chunks). */
  char_start: number
  char_end: number
  /** Set when `text` is the chunk's best-matching sentences only (KnowledgeBase.focus), not the whole chunk. */
  focused?: boolean
}

export interface KnowledgeBaseOptions {
  /** Where files, chunks, vectors and the index change log are kept (storage/open-stores.ts chooses the engine). */
  files: FileStore
  /** Graph files go to `<dataDir>/index/`. */
  dataDir: string
  embedder: Embedder
  chunkTokens: Tokens
  chunkOverlap: Tokens
  maxChunksPerFile: number
  clock: Clock
  /** Source of file ids; crypto-random by default. Returns [0, 1). */
  random?: () => number
  /** Chunks per tenant across all files. Default 1,000,000. */
  maxChunksPerTenant?: number
  /** Tenants whose indexes stay loaded. Default 64. */
  maxLoadedTenants?: number
  /** RRF's k, the vector ranking's weight in it, and the depth of each ranking fed to it. */
  rrfK?: number
  vectorWeight?: number
  candidates?: number
  hnsw?: Partial<HnswParams>
  /** Vectors searched exactly while they wait for the graph (SearchIndexOptions.maxFresh). Default 20,000. */
  maxFreshVectors?: number
  /** SearchIndexOptions.graphMin: a tenant with fewer chunks keeps no HNSW graph (searched exactly). Default 256. */
  graphMin?: number
  /**
   * BM25 matches words with their accents folded and a final e dropped ("Möngke" finds "Mongke", "renounce" finds
   * "renounced"; search-index.ts `foldTerms`). Default true; false ranks on the analyzer's terms as they are.
   */
  foldTerms?: boolean
  /**
   * Weight of the query's word pairs found side by side in a chunk's relevance (relevance.ts, Bm25Index.relevance
   * `phraseWeight`). Default DEFAULT_PHRASE_WEIGHT; 0: the share of the query's terms alone.
   */
  phraseWeight?: number
  /** Told when an index file cannot be saved (it is rebuilt from the store at the next start); a process warning by default. */
  onIndexSaveError?: (err: unknown, file: string) => void
  /** Whether the disk has room for a graph file of this many bytes (SearchIndexOptions.cacheRoom). */
  indexCacheRoom?: (bytes: number) => Promise<boolean>
  /**
   * Prepare uploads (extract, chunk, analyze, embed locally) in a worker thread, off the event loop. Default true;
   * false runs it inline (one-shot tools that do nothing else meanwhile).
   */
  prepareInWorker?: boolean
  /**
   * Throws when the store has no room for about this many more bytes (the free-disk floor, the map size): asked once
   * a file's stored size is known, before anything is written. None: no check (the commit's own failure still is).
   */
  checkRoom?: (bytes: number) => Promise<void>
  /** Bounds on reading a file (defaults: the configuration's). */
  extract?: ExtractLimits & Pick<PreparePoolOptions, 'concurrency' | 'timeoutMs' | 'maxHeapMb'>
}

const MAX_K = 100

/**
 * JSON upload bodies from this size on are read in the prepare thread. Inline, reading one costs the event loop ≈ 10
 * ms a MB (5 MB: 45–55 ms, issue 28), so this bounds that block to ≈ 2.5 ms; below it the hand-over (and, with no
 * thread running, starting one) would cost more than it saves.
 */
const OFF_THREAD_JSON_BYTES = 256 * 1024

export class KnowledgeBase {
  readonly #repo: FileStore
  /**
   * Chunk rows by [tenant, file, index], for the hits of a search: a file is never changed, only deleted, and a
   * deleted file's chunks leave the index before the next search ranks (it catches up first), so a cached row is
   * never shown for a file the ranking no longer holds. With PostgreSQL this spares a search its second round trip
   * (bench --only stores); 5,000 rows of at most a chunk's text each.
   */
  readonly #rows = new LRUCache<string, FileChunk>({ max: 5_000 })
  readonly #index: SearchIndex
  readonly #embedder: Embedder
  readonly #opts: KnowledgeBaseOptions
  readonly #maxChunksPerTenant: number
  readonly #pool: PreparePool | undefined

  constructor(opts: KnowledgeBaseOptions) {
    this.#opts = opts
    const e = opts.extract
    this.#pool =
      opts.prepareInWorker === false
        ? undefined
        : new PreparePool({ concurrency: e?.concurrency, timeoutMs: e?.timeoutMs, maxHeapMb: e?.maxHeapMb })
    this.#embedder = opts.embedder
    this.#repo = opts.files
    this.#maxChunksPerTenant = opts.maxChunksPerTenant ?? 1_000_000
    const repo = this.#repo
    this.#index = new SearchIndex({
      dir: join(opts.dataDir, 'index'),
      embedder: opts.embedder,
      maxLoaded: opts.maxLoadedTenants,
      maxDocsPerNamespace: this.#maxChunksPerTenant,
      rrfK: opts.rrfK,
      vectorWeight: opts.vectorWeight,
      candidates: opts.candidates,
      hnsw: opts.hnsw,
      ...(opts.maxFreshVectors === undefined ? {} : { maxFresh: opts.maxFreshVectors }),
      ...(opts.graphMin === undefined ? {} : { graphMin: opts.graphMin }),
      foldTerms: opts.foldTerms ?? true,
      phraseWeight: opts.phraseWeight ?? DEFAULT_PHRASE_WEIGHT,
      onSaveError: opts.onIndexSaveError,
      ...(opts.indexCacheRoom ? { cacheRoom: opts.indexCacheRoom } : {}),
      source: {
        meta: (ns) => repo.index.meta(ns),
        vectors: (ns) => repo.index.vectors(ns),
        changes: (ns, from, to) => repo.index.changes(ns, from, to),
        async added(ns, docs) {
          const refs: Array<[string, number]> = []
          for (const [, [fileId, index]] of docs) if (typeof fileId === 'string' && typeof index === 'number') refs.push([fileId, index])
          const [chunks, vectors] = await Promise.all([
            repo.chunksAt(tenantOf(ns), refs),
            repo.index.vectorsAt(ns, docs.map(([label]) => label)),
          ])
          const out = []
          for (const c of chunks) {
            const vector = c === undefined ? undefined : vectors.get(c.chunk.label)
            if (c !== undefined && vector !== undefined) out.push({ label: c.chunk.label, text: indexText(c.file.filename, c.chunk), vector })
          }
          return out
        },
        async *documents(ns) {
          for await (const { fileId, index, chunk, file } of repo.tenantChunks(tenantOf(ns)))
            yield { label: chunk.label, ref: [fileId, index], text: indexText(file.filename, chunk) }
        },
      },
    })
  }

  /**
   * Warm up: load tenants' indexes one after another (up to the LRU bound), rebuilding missing, stale or corrupt graph
   * files from the store. Nothing waits for it: the gateway serves at once, and a tenant's first search loads that tenant's
   * index (or joins its load in progress) without waiting for the others. Loading runs in short slices (a 100k-chunk
   * tenant is seconds of CPU), so requests keep being served meanwhile.
   */
  async init(): Promise<void> {
    await this.#repo.recover?.()
    const namespaces = await this.#repo.index.namespaces(NS_PREFIX)
    try {
      for (const ns of namespaces.slice(0, this.#opts.maxLoadedTenants ?? 64)) {
        if (((await this.#repo.index.meta(ns))?.count ?? 0) > 0) await this.#index.load(ns)
      }
    } catch (err) {
      // Closed while warming up (shutdown): nothing left to do.
      if (!(err instanceof IndexClosedError)) throw err
    }
  }

  async ingest(
    tenant: string,
    file: { filename: string; contentType: string | undefined; bytes: Buffer; metadata: Record<string, unknown> | null },
  ): Promise<FileRecord> {
    const local = this.#embedder instanceof LocalEmbedder ? this.#embedder.dimension : undefined
    const prepareOptions = {
      chunkTokens: this.#opts.chunkTokens,
      chunkOverlap: this.#opts.chunkOverlap,
      maxChunksPerFile: this.#opts.maxChunksPerFile,
      localDimension: local,
      ...(this.#opts.extract ? { limits: { maxDecodedBytes: this.#opts.extract.maxDecodedBytes, maxTextChars: this.#opts.extract.maxTextChars } } : {}),
    }
    const input = { filename: file.filename, contentType: file.contentType, bytes: file.bytes }
    const prepared = this.#pool !== undefined ? await this.#pool.prepare(input, prepareOptions) : await prepareFile(input, prepareOptions)
    const { chunks, terms } = prepared
    const ns = namespaceOf(tenant)
    const check = (meta: IndexMeta | undefined, adding: number): void => {
      this.#index.checkEmbedder(meta)
      if ((meta?.count ?? 0) + adding > this.#maxChunksPerTenant)
        throw gatewayError('payload_too_large', {
          param: 'file',
          message: `This file would take the knowledge base past ${this.#maxChunksPerTenant} chunks: delete some files first`,
        })
    }
    // Refuse before paying for embeddings; checked again inside the transaction, where it is authoritative.
    check(await this.#repo.index.meta(ns), chunks.length)
    // Only an embedder that reads text needs each chunk's index text: BM25 is given the terms the worker analyzed from
    // it. Made for every chunk, it was one more block of the event loop (a copy of the file's text: ≈ 10 MB for 5 MB).
    const vectors =
      prepared.vectors ??
      (this.#embedder.embedTerms ? await this.#embedder.embedTerms(decodeTerms(terms)) : await this.#embedder.embed(chunks.map((c) => indexText(file.filename, c))))
    validateVectors(vectors, chunks.length, this.#embedder.dimension)
    await this.#opts.checkRoom?.(storedBytes(chunks, vectors))
    const at = this.#opts.clock()
    const record: FileRecord = {
      id: `file-${this.#newId(at)}`,
      object: 'file',
      filename: file.filename,
      bytes: file.bytes.length,
      chunks: chunks.length,
      status: 'processed',
      created_at: Math.floor(at / 1000),
      metadata: file.metadata,
      content_type: contentTypeOf(prepared.format, file.contentType),
    }
    // Loaded before the write, so the change is applied in memory instead of forcing a rebuild later.
    await this.#index.load(ns)
    const change = await this.#repo.insertFile({
      tenant,
      namespace: ns,
      file: record,
      chunks: chunks.map(toRow),
      vectors,
      embedderId: this.#embedder.id,
      check,
      onChange: (c) => this.#index.expect(ns, c.meta),
    })
    // Resolves once the chunks are searchable: the upload is finished when its response comes.
    await this.#index.applyAdd(
      ns,
      change.fromVersion,
      change.meta,
      chunks.map((c, i) => ({
        label: change.labels[i] as number,
        ref: [record.id, c.index],
        coded: terms,
        doc: i,
        vector: vectors[i] as Float32Array,
      })),
    )
    return record
  }

  /**
   * The file in a JSON upload body (json-upload.ts): read in the prepare thread when the body is large, since its
   * reading is one block of the event loop that cannot be cut into slices (JSON.parse). Here because the thread is the
   * knowledge base's. `raw` is handed over (PreparePool.readJsonUpload): not to be read afterwards.
   */
  async readJsonUpload(raw: Buffer, maxFileBytes: number): Promise<JsonUpload> {
    if (this.#pool === undefined || raw.length < OFF_THREAD_JSON_BYTES) return readJsonUpload(raw, maxFileBytes)
    return this.#pool.readJsonUpload(raw, maxFileBytes)
  }

  async list(tenant: string): Promise<FileRecord[]> {
    return this.#repo.listFiles(tenant)
  }

  async get(tenant: string, id: string): Promise<FileRecord | undefined> {
    return this.#repo.getFile(tenant, id)
  }

  /**
   * A file's extracted text, for a message that names the file (chat/file-inputs.ts), with about the tokens it holds
   * (its chunks' without their overlap). Undefined for a file this tenant does not have; `{ tooLarge }` without
   * reading it when that is more than `maxTokens`.
   */
  async fileText(tenant: string, id: string, maxTokens: Tokens): Promise<{ filename: string; text: string; tokens: Tokens } | { tooLarge: Tokens } | undefined> {
    const file = await this.#repo.getFile(tenant, id)
    if (file === undefined) return undefined
    // What the chunks hold without their overlap: a file of one chunk is that chunk.
    const estimate = file.chunks * Math.max(1, this.#opts.chunkTokens - this.#opts.chunkOverlap)
    if (estimate > maxTokens) return { tooLarge: estimate }
    let text = ''
    for await (const piece of this.fileTextPieces(tenant, file)) text += piece
    return { filename: file.filename, text, tokens: estimate }
  }

  /**
   * A file's extracted text in pieces, stitched back from its chunks: each is an exact slice of the text at its range,
   * in order, overlapping the one before (a gap between two, white space the chunker left out, becomes a blank line).
   * Read a batch of chunks at a time, straight from the store (not through the search's row cache, which a whole file
   * would empty), with the event loop let run between batches: a 20 MB file is ≈ 100,000 chunks.
   */
  async *fileTextPieces(tenant: string, file: Pick<FileRecord, 'id' | 'chunks'>): AsyncGenerator<string> {
    const slicer = new TimeSlicer()
    let covered = -1
    for (let from = 0; from < file.chunks; from += FILE_TEXT_BATCH) {
      const refs = Array.from({ length: Math.min(FILE_TEXT_BATCH, file.chunks - from) }, (_, i) => [file.id, from + i] as const)
      let piece = ''
      for (const row of await this.#repo.chunksAt(tenant, refs)) {
        // Gone meanwhile (the file deleted while read): what was read so far is all there is.
        if (row === undefined) continue
        const c = row.chunk
        if (covered < 0 || c.start > covered) piece += (covered < 0 ? '' : '\n\n') + c.text
        else if (c.end > covered) piece += c.text.slice(covered - c.start)
        covered = Math.max(covered, c.end)
      }
      if (piece !== '') yield piece
      if (slicer.due()) await slicer.pause()
    }
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    const ns = namespaceOf(tenant)
    const change = await this.#repo.deleteFile(tenant, ns, id, (c) => this.#index.expect(ns, c.meta))
    if (change === undefined) return false
    await this.#index.applyRemove(ns, change.fromVersion, change.meta, change.labels)
    return true
  }

  /** The tenant's best chunks for `query`, best first. No files → []. `cancel`: the client's departure stops its embedding. */
  async search(tenant: string, query: string, k: number, mode: SearchMode = 'hybrid', cancel: Cancel = {}): Promise<SearchHit[]> {
    const hits = await this.#index.search(namespaceOf(tenant), query, Math.min(Math.max(1, Math.floor(k)), MAX_K), mode, cancel)
    // A learned embedder finds passages worded apart from the query, which the lexical share misses: its cosine
    // similarity counts too (the local embedder's vectors only repeat BM25's terms, so it does not).
    const learned = (this.#embedder.fusionWeight ?? 1) >= 1
    const out: SearchHit[] = []
    const rows = await this.#chunksAt(tenant, hits.map((h) => h.ref as [string, number]))
    for (const [i, { score, similarity, relevance: lexical, lexical: bm25 }] of hits.entries()) {
      const row = rows[i]
      // A hit whose rows are gone was deleted between ranking and lookup: it is not returned.
      if (row === undefined) continue
      const { fileId, index, chunk, file } = row
      out.push({
        file_id: fileId,
        filename: file.filename,
        metadata: file.metadata,
        chunk_index: index,
        score,
        relevance: learned && similarity !== undefined ? Math.max(lexical, similarity) : lexical,
        ...(bm25 === undefined ? {} : { lexical: bm25 }),
        text: chunk.text,
        tokens: chunk.tokens,
        ...(chunk.headingPath.length ? { heading_path: chunk.headingPath } : {}),
        char_start: chunk.start,
        char_end: chunk.end,
      })
    }
    return out
  }

  /**
   * The relevance gate on `ranked` (from `search` with the same query, relevance.ts), with the hits it says to focus cut
   * to their best-matching sentences: what goes into the prompt, best first.
   */
  relevant(tenant: string, query: string, ranked: readonly SearchHit[], gate: RelevanceGate): ReturnType<typeof relevantHits<SearchHit>> {
    const r = relevantHits(ranked, gate)
    if (r.focusFrom >= r.hits.length) return r
    return { ...r, hits: [...r.hits.slice(0, r.focusFrom), ...this.focus(tenant, query, r.hits.slice(r.focusFrom), gate.focusNeighbours ?? 0)] }
  }

  /**
   * `hits` (from `search` with the same query) cut to the sentences that match the query best and `neighbours` either
   * side (focus.ts): text, range and tokens narrowed, `focused` set. A hit with nothing to cut is returned as it is.
   */
  focus(tenant: string, query: string, hits: readonly SearchHit[], neighbours: number): SearchHit[] {
    if (hits.length === 0) return []
    const q = this.#index.queryWeights(namespaceOf(tenant), query)
    return hits.map((h) => {
      const span = focusSpan(h.text, q, neighbours)
      if (span === undefined) return h
      const text = h.text.slice(span[0], span[1])
      // `focused` first: a literal that starts with a spread and then adds a key takes V8's slow path (search hits
      // never carry `focused`, so the spread cannot undo it).
      return { focused: true, ...h, text, tokens: countO200k(text), char_start: h.char_start + span[0], char_end: h.char_start + span[1] }
    })
  }

  async #chunksAt(tenant: string, refs: ReadonlyArray<readonly [string, number]>): Promise<Array<FileChunk | undefined>> {
    const key = (r: readonly [string, number]): string => `${tenant}\u0000${r[0]}\u0000${r[1]}`
    const out = refs.map((r) => this.#rows.get(key(r)))
    const missing = refs.filter((_, i) => out[i] === undefined)
    if (missing.length === 0) return out
    const fetched = await this.#repo.chunksAt(tenant, missing)
    let m = 0
    return out.map((row, i) => {
      if (row !== undefined) return row
      const got = fetched[m++]
      if (got !== undefined) this.#rows.set(key(refs[i] as readonly [string, number]), got)
      return got
    })
  }

  /**
   * `hasChunks` without an await, where the store can answer synchronously (the embedded one); undefined where it
   * cannot (a database): the planner's short path for a tenant without files.
   */
  hasChunksNow(tenant: string): boolean | undefined {
    const index = this.#repo.index
    if (index.metaNow === undefined) return undefined
    return (index.metaNow(namespaceOf(tenant))?.count ?? 0) > 0
  }

  /** Whether the tenant has any indexed chunk (tells "no files" from "nothing matched"). */
  async hasChunks(tenant: string): Promise<boolean> {
    return ((await this.#repo.index.meta(namespaceOf(tenant)))?.count ?? 0) > 0
  }

  /** Save changed index files now (they are also saved a few seconds after changes and on close). */
  flush(): Promise<void> {
    return this.#index.flush()
  }

  async close(): Promise<void> {
    await this.#pool?.close()
    await this.#index.close()
  }

  /**
   * 24 hex digits: the upload's time in ms (12), then 12 random ones. Files list by `created_at`, which is in seconds,
   * and then by id, so files uploaded within one second list in the order they were uploaded, through every replica.
   * With random ids only, such a pair listed in either order (test/replicas-postgres.e2e.test.ts failed on it now
   * and then).
   */
  #newId(at: number): string {
    const ms = Math.max(0, Math.floor(at)).toString(16).padStart(12, '0').slice(-12)
    const random = this.#opts.random
    if (random === undefined) return ms + randomBytes(6).toString('hex')
    let id = ms
    for (let i = 0; i < 12; i++) id += Math.floor(random() * 16).toString(16)
    return id
  }
}

const NS_PREFIX = 'files:'
const namespaceOf = (tenant: string): string => `${NS_PREFIX}${tenant}`
const tenantOf = (ns: string): string => ns.slice(NS_PREFIX.length)

/**
 * What BM25 and the embedder see: the file's name and the heading path give a chunk the words of the document and
 * section it belongs to, which its own sentences often leave out ("it", "the city"). Measured in bench/rag-eval.ts.
 */
function indexText(filename: string, c: Pick<Chunk | ChunkRow, 'headingPath' | 'text'>): string {
  return [titleOf(filename), ...c.headingPath, c.text].filter(Boolean).join('\n')
}


/**
 * About what a file takes in the store (measured in LMDB): chunk text, vectors and a per-chunk allowance for keys, records and the label log,
 * times 1.5 for B-tree pages that are not full (1 MB of text, 4,400 chunks, measured 12.7 MB stored in issue 29; this
 * gives ≈ 13 MB).
 */
function storedBytes(chunks: readonly Chunk[], vectors: readonly Float32Array[]): number {
  let bytes = 0
  for (const c of chunks) bytes += Buffer.byteLength(c.text) + 256 + c.headingPath.reduce((n, h) => n + h.length, 0)
  for (const v of vectors) bytes += v.byteLength
  return Math.ceil(bytes * 1.5)
}

function toRow(c: Chunk): Omit<ChunkRow, 'label'> {
  return { text: c.text, tokens: c.tokens, start: c.start, end: c.end, headingPath: c.headingPath }
}

/** One vector per chunk, all of the embedder's dimension (when it declares one). */
function validateVectors(vectors: readonly Float32Array[], expected: number, declared: number): void {
  const dimension = declared || (vectors[0]?.length ?? 0)
  if (vectors.length !== expected || dimension === 0 || vectors.some((v) => v.length !== dimension))
    throw gatewayError('upstream_invalid_response', {
      message: `The embedder returned ${vectors.length} vectors for ${expected} chunks, or not all of ${dimension} dimensions`,
    })
}

const FORMAT_TYPES: Record<Format, string> = {
  text: 'text/plain',
  markdown: 'text/markdown',
  html: 'text/html',
  json: 'application/json',
  csv: 'text/csv',
  pdf: 'application/pdf',
}

/** The type the file was read as: the client's own spelling when it names that format, else the format's type. */
function contentTypeOf(format: Format, given: string | undefined): string {
  return formatOfType(given) === format ? (given?.split(';')[0]?.trim().toLowerCase() ?? FORMAT_TYPES[format]) : FORMAT_TYPES[format]
}
