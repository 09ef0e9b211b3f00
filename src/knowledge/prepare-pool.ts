/**
 * Runs prepare.ts in one worker thread, so an upload's extraction, chunking, analysis and local embedding never hold
 * the event loop (a 5 MB upload held it ≈ 3.7 s, issue 18). Jobs queue in order (one per upload request in progress,
 * so bounded by the server's connections and MAX_FILE_BYTES each); the thread
 * starts on the first upload and stops after `idleMs` without one (it holds its own copy of the tokenizer's tables,
 * ≈ 60 MB). A crashed thread fails the jobs it had and is replaced by the next one.
 */
import { Worker } from 'node:worker_threads'
import { GatewayError } from '../errors.js'
import type { Format } from '../ingest/extract.js'
import type { Chunk } from '../ingest/chunker.js'
import { TimeSlicer } from '../retrieval/time-slice.js'
import type { PrepareInput, PrepareOptions, Prepared } from './prepare.js'

/** What the worker sends back (see prepare-worker.ts). */
export interface PackedPrepared {
  format: Format
  chunks: Chunk[]
  terms: string[]
  vectors: Float32Array | undefined
  dimension: number
}

export type WorkerReply =
  | { id: number; ok: PackedPrepared }
  | { id: number; error: { message: string; gateway: { status: number; type: string; code: string; message: string; param: string | null } | undefined } }

export interface PreparePoolOptions {
  /** Stop the thread after this long without work. Default 30 s. */
  idleMs?: number
}

interface Pending {
  resolve: (p: Prepared) => void
  reject: (err: unknown) => void
}

// The worker is this folder's prepare-worker, compiled (.js) or, under the test runner's TypeScript loader, the source.
const WORKER_URL = new URL(`./prepare-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url)

export class PreparePool {
  readonly #idleMs: number
  #worker: Worker | undefined
  readonly #pending = new Map<number, Pending>()
  #nextId = 1
  #idleTimer: NodeJS.Timeout | undefined

  constructor(o: PreparePoolOptions = {}) {
    this.#idleMs = o.idleMs ?? 30_000
  }

  prepare(file: PrepareInput, options: PrepareOptions): Promise<Prepared> {
    clearTimeout(this.#idleTimer)
    const worker = this.#start()
    // Keeps the process alive while a job runs, and only then (an idle thread must not hold a script open).
    worker.ref()
    const id = this.#nextId++
    return new Promise<Prepared>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject })
      worker.postMessage({ id, file, options })
    })
  }

  async close(): Promise<void> {
    clearTimeout(this.#idleTimer)
    const w = this.#worker
    this.#worker = undefined
    if (w !== undefined) await w.terminate()
  }

  #start(): Worker {
    if (this.#worker !== undefined) return this.#worker
    const worker = new Worker(WORKER_URL)
    this.#worker = worker
    worker.on('message', (reply: WorkerReply) => void this.#settle(reply))
    const fail = (err: unknown): void => {
      if (this.#worker === worker) this.#worker = undefined
      for (const p of this.#pending.values()) p.reject(err)
      this.#pending.clear()
    }
    worker.on('error', fail)
    worker.on('exit', (code) => fail(new Error(`the ingestion worker exited (code ${code})`)))
    return worker
  }

  async #settle(reply: WorkerReply): Promise<void> {
    const p = this.#pending.get(reply.id)
    if (p === undefined) return
    this.#pending.delete(reply.id)
    if (this.#pending.size === 0) {
      this.#worker?.unref()
      this.#idleTimer = setTimeout(() => void this.close(), this.#idleMs).unref()
    }
    if ('error' in reply) {
      const g = reply.error.gateway
      p.reject(g !== undefined ? new GatewayError(g) : new Error(reply.error.message))
      return
    }
    p.resolve(await unpack(reply.ok))
  }
}

/** Unpacks in slices: a 20k-chunk file's terms are ≈ 3M strings to split. */
async function unpack(packed: PackedPrepared): Promise<Prepared> {
  const slicer = new TimeSlicer()
  const terms: string[][] = []
  for (const t of packed.terms) {
    terms.push(t === '' ? [] : t.split('\u0000'))
    if (slicer.due()) await slicer.pause()
  }
  const { vectors: flat, dimension } = packed
  const vectors = flat === undefined ? undefined : packed.chunks.map((_, i) => flat.subarray(i * dimension, (i + 1) * dimension))
  return { format: packed.format, chunks: packed.chunks, terms, vectors }
}
