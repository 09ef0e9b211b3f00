/**
 * One HNSW graph (hnswlib-node, cosine space) for one namespace, and its file on disk.
 *
 * The file is a cache: LMDB's `vectors` db is the source of truth, and `search-index.ts` rebuilds the graph from it
 * whenever `VectorIndex.load` returns undefined. A file is used only if its sidecar (`<file>.json`) says it reflects
 * exactly the namespace version and live count LMDB records, for the same dimension, and its SHA-256 matches — so a
 * missing, stale, truncated or corrupt file is never handed to the native reader, it is rebuilt.
 *
 * Writes go to a temporary name and are renamed into place (graph first, then sidecar), so a crash mid-save leaves
 * either the old pair or a pair whose checksum does not match, never a file that looks current but is not.
 *
 * Loading and saving run off the event loop: hnswlib-node's `readIndex`/`writeIndex` run in libuv's thread pool and the
 * checksum is computed over a streamed read. Done synchronously, one save of a 100k-vector graph (≈ 118 MB) blocked the
 * loop ≈ 0.3 s and one load ≈ 0.8 s (profiles, issue 18). The graph must not change while the pool reads or writes it:
 * the caller (search-index.ts) runs saves in the namespace's queue of changes. Searches may run meanwhile (both only
 * read the graph).
 */
import { createHash } from 'node:crypto'
import { createReadStream, rmSync } from 'node:fs'
import { readFile, rename, stat, writeFile } from 'node:fs/promises'
import { Worker } from 'node:worker_threads'
import hnswlib from 'hnswlib-node'
import type { ScoredLabel } from './bm25.js'
import type { GraphWorkerData, GraphWorkerIn, GraphWorkerOut } from './graph-worker.js'

export interface HnswParams {
  /** Graph degree. Default 16. */
  m: number
  /**
   * Candidate list size while inserting: higher builds a better graph, slower. Default 32: against 64, insertion
   * CPU −40% and recall@8 88% instead of 94% at 20k chunks (bench/rag-perf.ts); HNSW insertion is the largest
   * share of ingestion, and the vector ranking only refines BM25's in hybrid mode. Cheaper settings lose more recall
   * than they save time (100k chunks of the bench corpus, insertions interleaved so all see the same load; M/efC:
   * µs per insertion, recall@8): 16/32 162, 82.3% · 12/32 155, 79.8% · 20/24 131, 74.3% · 16/24 132, 72.3% ·
   * 12/24 128, 69.0% · 12/40 182, 81.4% · 10/48 191, 82.9%. Half of an insertion is distance computations (perf).
   */
  efConstruction: number
  /** Candidate list size while searching, at least k. Default 64. */
  efSearch: number
}

export const DEFAULT_HNSW: HnswParams = { m: 16, efConstruction: 32, efSearch: 64 }

/** What the caller knows from LMDB about the namespace the file should reflect. */
export interface Expected {
  dimension: number
  version: number
  count: number
  /** The namespace's generation (a deleted and recreated namespace starts its versions again under a new epoch). */
  epoch?: string | undefined
}

interface Sidecar extends Expected {
  format: 1
  deleted: number
  bytes: number
  sha256: string
}

const INITIAL_CAPACITY = 1024
/** Fixed so that a rebuild from the same vectors in the same order gives the same graph. */
const RANDOM_SEED = 100
/** Vectors per message to the graph worker (1 MB of 256-dimension vectors), and messages read ahead of it. */
const BUILD_BATCH = 1024
const BUILD_AHEAD = 4
const GRAPH_WORKER_URL = new URL(`./graph-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url)

export class VectorIndex {
  readonly dimension: number
  readonly #hnsw: hnswlib.HierarchicalNSW
  readonly #params: HnswParams
  #live: number
  #deleted: number

  private constructor(hnsw: hnswlib.HierarchicalNSW, dimension: number, params: HnswParams, live: number, deleted: number) {
    this.#hnsw = hnsw
    this.dimension = dimension
    this.#params = params
    this.#live = live
    this.#deleted = deleted
    hnsw.setEf(params.efSearch)
  }

  static create(dimension: number, params: HnswParams = DEFAULT_HNSW, capacity = INITIAL_CAPACITY): VectorIndex {
    const hnsw = new hnswlib.HierarchicalNSW('cosine', dimension)
    hnsw.initIndex({ maxElements: Math.max(16, capacity), m: params.m, efConstruction: params.efConstruction, randomSeed: RANDOM_SEED })
    return new VectorIndex(hnsw, dimension, params, 0, 0)
  }

  /** The graph in `file` if it is current for `expect`; undefined if missing, stale or corrupt (then rebuild). */
  static async load(file: string, expect: Expected, params: HnswParams = DEFAULT_HNSW): Promise<VectorIndex | undefined> {
    let side: Sidecar
    try {
      side = JSON.parse(await readFile(`${file}.json`, 'utf8')) as Sidecar
      if (side.format !== 1 || side.dimension !== expect.dimension || side.version !== expect.version || side.count !== expect.count ||
        (side.epoch ?? undefined) !== expect.epoch)
        return undefined
      if ((await stat(file)).size !== side.bytes) return undefined
      if ((await sha256Of(file)) !== side.sha256) return undefined
    } catch (err) {
      // Missing or unreadable sidecar or graph: the caller rebuilds from LMDB, which is the source of truth.
      if (isFsOrJsonError(err)) return undefined
      throw err
    }
    const hnsw = new hnswlib.HierarchicalNSW('cosine', expect.dimension)
    try {
      await hnsw.readIndex(file, false)
    } catch {
      // Checksum matched but the native reader refused it (written by another hnswlib version, or replaced since the
      // checksum was read): rebuild.
      return undefined
    }
    if (hnsw.getCurrentCount() !== side.count + side.deleted) return undefined
    return new VectorIndex(hnsw, expect.dimension, params, side.count, side.deleted)
  }

  /**
   * Build a graph from `vectors` (in this order) in a worker thread, and load it here from the file the worker writes
   * (`tmpFile`, removed afterwards): the graph `create` + `add` would build, without the event loop's CPU. `batched`
   * runs between batches read from `vectors` (the caller's time slicing). Rejects if the worker fails or `cancel`
   * fires (the worker is stopped either way).
   */
  static async buildInWorker(
    o: { dimension: number; params: HnswParams; capacity: number; tmpFile: string },
    vectors: AsyncIterable<{ label: number; vector: Float32Array }> | Iterable<{ label: number; vector: Float32Array }>,
    batched: () => Promise<void>,
    cancel: { signal?: AbortSignal } = {},
  ): Promise<VectorIndex> {
    const data: GraphWorkerData = { dimension: o.dimension, m: o.params.m, efConstruction: o.params.efConstruction, capacity: o.capacity, seed: RANDOM_SEED }
    const worker = new Worker(GRAPH_WORKER_URL, { workerData: data })
    // Replies in order: every batch's ack, then `saved`. Each waiter takes the next one.
    const waiting: Array<{ resolve: (m: GraphWorkerOut) => void; reject: (e: Error) => void }> = []
    let failed: Error | undefined
    const fail = (e: Error): void => {
      failed ??= e
      for (const w of waiting.splice(0)) w.reject(e)
    }
    worker.on('message', (m: GraphWorkerOut) => ('error' in m ? fail(new Error(`graph worker: ${m.error}`)) : waiting.shift()?.resolve(m)))
    worker.on('error', fail)
    worker.on('exit', (code) => fail(new Error(`graph worker exited (${code})`)))
    const onAbort = (): void => fail(new Error('graph build cancelled'))
    cancel.signal?.addEventListener('abort', onAbort)
    const next = (): Promise<GraphWorkerOut> => {
      const reply = failed !== undefined ? Promise.reject(failed) : new Promise<GraphWorkerOut>((resolve, reject) => waiting.push({ resolve, reject }))
      // Awaited in order by the loop; one still pending when another step fails must not surface as unhandled.
      reply.catch(() => undefined)
      return reply
    }
    try {
      let labels = new Float64Array(BUILD_BATCH)
      let rows = new Float32Array(BUILD_BATCH * o.dimension)
      let n = 0
      let count = 0
      const acks: Array<Promise<GraphWorkerOut>> = []
      const send = async (): Promise<void> => {
        acks.push(next())
        const batch = { labels: labels.subarray(0, n), vectors: rows.subarray(0, n * o.dimension) }
        worker.postMessage(batch, [labels.buffer, rows.buffer])
        labels = new Float64Array(BUILD_BATCH)
        rows = new Float32Array(BUILD_BATCH * o.dimension)
        n = 0
        // Bounded: at most this many batches read ahead of the worker.
        if (acks.length >= BUILD_AHEAD) await acks.shift()
        await batched()
      }
      for await (const { label, vector } of vectors) {
        if (failed !== undefined) throw failed
        if (vector.length !== o.dimension) throw new RangeError(`VectorIndex: vector has ${vector.length} dimensions, index has ${o.dimension}`)
        labels[n] = label
        rows.set(vector, n * o.dimension)
        n++
        count++
        if (n === BUILD_BATCH) await send()
      }
      if (n > 0) await send()
      await Promise.all(acks)
      const saved = next()
      worker.postMessage({ save: o.tmpFile } satisfies GraphWorkerIn)
      await saved
      const hnsw = new hnswlib.HierarchicalNSW('cosine', o.dimension)
      await hnsw.readIndex(o.tmpFile, false)
      if (hnsw.getCurrentCount() !== count) throw new Error(`graph worker wrote ${hnsw.getCurrentCount()} vectors of ${count}`)
      return new VectorIndex(hnsw, o.dimension, o.params, count, 0)
    } finally {
      cancel.signal?.removeEventListener('abort', onAbort)
      failed ??= new Error('graph build finished')
      await worker.terminate()
      rmSync(o.tmpFile, { force: true })
    }
  }

  /** Live vectors. */
  get size(): number {
    return this.#live
  }

  /** Vectors marked deleted but still occupying the graph (dropped by the next rebuild). */
  get deleted(): number {
    return this.#deleted
  }

  add(label: number, vector: Float32Array): void {
    if (vector.length !== this.dimension)
      throw new RangeError(`VectorIndex: vector has ${vector.length} dimensions, index has ${this.dimension}`)
    const max = this.#hnsw.getMaxElements()
    if (this.#hnsw.getCurrentCount() >= max) this.#hnsw.resizeIndex(max * 2)
    this.#hnsw.addPoint(toArray(vector), label)
    this.#live++
  }

  /** Mark `label` deleted; it is never returned again. The caller only removes labels it added. */
  remove(label: number): void {
    this.#hnsw.markDelete(label)
    this.#live--
    this.#deleted++
  }

  /** A stored vector (to copy it into a compacted graph). */
  vector(label: number): Float32Array {
    return Float32Array.from(this.#hnsw.getPoint(label))
  }

  /** Up to `k` nearest labels, best first, scored by cosine similarity. */
  search(vector: Float32Array, k: number): ScoredLabel[] {
    const n = Math.min(k, this.#live)
    if (n <= 0) return []
    if (this.#params.efSearch < n) this.#hnsw.setEf(n)
    const { neighbors, distances } = this.#hnsw.searchKnn(toArray(vector), n)
    if (this.#params.efSearch < n) this.#hnsw.setEf(this.#params.efSearch)
    return neighbors.map((label, i) => ({ label, score: 1 - (distances[i] as number) }))
  }

  /**
   * About how many bytes `save` writes, a little over: hnswlib writes each element's level-0 record (its vector, 2M
   * links and their count, its label) and the links of the upper levels, which one element in M reaches per level.
   */
  fileBytes(): number {
    const m = this.#params.m
    return 1024 + (this.#live + this.#deleted) * (this.dimension * 4 + 8 * m + 4 + 8 + 4 + (4 * m + 4) / (m - 1))
  }

  /**
   * Write the graph and its sidecar atomically (temporary names, then rename), in the thread pool. The graph must not
   * change until the promise settles (searching it is fine). A failed save leaves no temporary file behind: on a full
   * disk, a half-written graph would keep the space it took from the store.
   */
  async save(file: string, state: { version: number; epoch?: string | undefined }): Promise<void> {
    // Several processes may share DATA_DIR (WORKERS, replicas on one host): each writes its own temporary files, so
    // two saves of one graph never interleave in one file; the last rename wins and the sidecar's hash tells a graph
    // from another process's sidecar.
    const tmp = `${file}.${process.pid}.tmp`
    const sideTmp = `${file}.json.${process.pid}.tmp`
    const count = this.#live
    const deleted = this.#deleted
    try {
      await this.#hnsw.writeIndex(tmp)
      const side: Sidecar = {
        format: 1,
        dimension: this.dimension,
        version: state.version,
        ...(state.epoch !== undefined ? { epoch: state.epoch } : {}),
        count,
        deleted,
        bytes: (await stat(tmp)).size,
        sha256: await sha256Of(tmp),
      }
      await rename(tmp, file)
      await writeFile(sideTmp, JSON.stringify(side))
      await rename(sideTmp, `${file}.json`)
    } catch (err) {
      rmSync(tmp, { force: true })
      rmSync(sideTmp, { force: true })
      throw err
    }
  }

  /** Delete a namespace's files (after its last document is gone). */
  static remove(file: string): void {
    rmSync(`${file}.json`, { force: true })
    rmSync(file, { force: true })
  }
}

/**
 * hnswlib-node takes plain arrays only. An indexed copy: `Array.from` goes through the iterator protocol and cost
 * 12.5 µs per 256-dimension vector against 1.3 µs for this loop (3% of ingestion CPU at 20k chunks). The addon then
 * reads the array element by element (~20 µs a vector, 12% of an insertion at 100k chunks): that is the addon's.
 */
function toArray(v: Float32Array): number[] {
  const a = new Array<number>(v.length)
  for (let i = 0; i < v.length; i++) a[i] = v[i] as number
  return a
}

/** Streamed, so hashing a 100 MB graph is many short steps rather than one long block of the event loop. */
async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

function isFsOrJsonError(err: unknown): boolean {
  return err instanceof SyntaxError || (err instanceof Error && typeof (err as NodeJS.ErrnoException).code === 'string')
}
