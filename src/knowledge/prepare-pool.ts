/**
 * Runs prepare.ts in worker threads, so an upload's extraction, chunking, analysis and local embedding never hold
 * the event loop (a 5 MB upload held it ≈ 3.7 s, issue 18). At most `concurrency` jobs run at once, the rest queue in
 * order (one per upload request in progress, so bounded by the server's connections and MAX_FILE_BYTES each). A
 * thread starts when a job needs one and stops after `idleMs` without work (each holds its own copy of the
 * tokenizer's tables, ≈ 60 MB, and of the ingestion counter's rank table, ≈ 10 MB built in ≈ 90 ms on its first file:
 * context/o200k-bpe.ts).
 *
 * Bounds (issue 29: a 1 MB PDF inflating to 1 GiB took the process to 2.36 GB): each job has a time budget, after
 * which its thread is terminated; each thread a V8 heap ceiling (`resourceLimits`), past which it dies; either way
 * the job is refused with 422 `extraction_limit_exceeded` and the next job gets a new thread. A thread that holds a
 * lot after a job is ended, so memory returns to its idle level.
 *
 * The same threads read large JSON upload bodies (`readJsonUpload`), whose parsing was the longest block of the event
 * loop during an upload (json-upload.ts).
 */
import { Worker } from 'node:worker_threads'
import { GatewayError, gatewayError } from '../errors.js'
import type { Format } from '../ingest/extract.js'
import type { Chunk } from '../ingest/chunker.js'
import { TimeSlicer } from '../retrieval/time-slice.js'
import type { PrepareInput, PrepareOptions, Prepared } from './prepare.js'
import type { JsonUpload } from './json-upload.js'
import type { CodedTerms } from '../retrieval/chunk-terms.js'

/** What the worker sends back (see prepare-worker.ts). */
export interface PackedPrepared {
  format: Format
  /** Every chunk's text, one after the other. */
  texts: string
  /** Per chunk, CHUNK_NUMBERS of them: index, tokens, start, end, and its text's length in `texts`. */
  numbers: Int32Array
  /** Per chunk, its heading path as JSON ('' for none, the common case). */
  headings: string[]
  terms: CodedTerms
  vectors: Float32Array | undefined
  dimension: number
}

/** A job for the thread: prepare a file, or read a JSON upload body. */
export type WorkerJob =
  | { id: number; kind: 'prepare'; file: PrepareInput; options: PrepareOptions }
  | { id: number; kind: 'json-upload'; raw: Uint8Array; maxFileBytes: number }

/** `memory`: the thread's V8 heap plus external buffers after the job (the pool ends a thread that holds a lot). */
export type WorkerReply =
  | { id: number; memory: number; ok: PackedPrepared }
  | { id: number; memory: number; upload: Omit<JsonUpload, 'bytes'> & { bytes: Uint8Array } }
  | {
      id: number
      memory: number
      error: { message: string; gateway: { status: number; type: string; code: string; message: string; param: string | null } | undefined }
    }

export interface PreparePoolOptions {
  /** Stop an idle thread after this long without work. Default 30 s. */
  idleMs?: number
  /** Threads, so extractions at once (EXTRACT_CONCURRENCY); more jobs wait in order. Default 1. */
  concurrency?: number
  /** Longest one job may run (EXTRACT_TIMEOUT_MS): its thread is then terminated and the job refused. Default 60 s. */
  timeoutMs?: number
  /** Each thread's V8 heap ceiling in MiB (EXTRACT_WORKER_MEMORY_MB): past it the thread dies and the job is refused. */
  maxHeapMb?: number
  /**
   * A thread holding more than this (V8 heap plus external buffers) after a job is ended, so a big job's memory is
   * given back at once instead of whenever V8 decides. Default 256 MiB (an idle thread holds ≈ 60–100 MiB: the
   * tokenizer's tables).
   */
  recycleAboveBytes?: number
}

type Done = Exclude<WorkerReply, { error: unknown }>

interface Job {
  id: number
  message: WorkerJob
  /** Moved to the thread rather than copied. */
  transfer: ArrayBuffer[]
  /** The thread's answer: resolves the caller's promise (or rejects it, for an answer of the wrong kind). */
  accept: (reply: Done) => Promise<void>
  reject: (err: unknown) => void
}

interface Slot {
  worker: Worker
  job: Job | undefined
  timer: NodeJS.Timeout | undefined
  idleTimer: NodeJS.Timeout | undefined
}

// The worker is this folder's prepare-worker, compiled (.js) or, under the test runner's TypeScript loader, the source.
const WORKER_URL = new URL(`./prepare-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url)

export class PreparePool {
  readonly #idleMs: number
  readonly #concurrency: number
  readonly #timeoutMs: number
  readonly #maxHeapMb: number | undefined
  readonly #recycleAbove: number
  readonly #slots = new Set<Slot>()
  readonly #queue: Job[] = []
  #nextId = 1
  #closed = false

  constructor(o: PreparePoolOptions = {}) {
    this.#idleMs = o.idleMs ?? 30_000
    this.#concurrency = Math.max(1, o.concurrency ?? 1)
    this.#timeoutMs = o.timeoutMs ?? 60_000
    this.#maxHeapMb = o.maxHeapMb
    this.#recycleAbove = o.recycleAboveBytes ?? 256 * 1024 * 1024
  }

  prepare(file: PrepareInput, options: PrepareOptions): Promise<Prepared> {
    return this.#run({ kind: 'prepare', file, options }, [], async (reply) => {
      if (!('ok' in reply)) throw new Error('the ingestion worker answered a prepare job with another kind of result')
      return unpack(reply.ok)
    })
  }

  /**
   * The file in a JSON upload body (json-upload.ts `readJsonUpload`), read in a thread. `raw` is handed over:
   * when it is the sole view of its memory (a body read whole is), that memory moves to the thread, so `raw` reads
   * as empty afterwards; the content's bytes come back the same way, without a copy.
   */
  readJsonUpload(raw: Buffer, maxFileBytes: number): Promise<JsonUpload> {
    const whole = raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength && raw.buffer instanceof ArrayBuffer
    return this.#run({ kind: 'json-upload', raw, maxFileBytes }, whole ? [raw.buffer] : [], (reply) => {
      if (!('upload' in reply)) throw new Error('the ingestion worker answered a JSON upload with another kind of result')
      const { bytes } = reply.upload
      // Structured clone hands a Buffer over as a plain Uint8Array: the same memory, seen as a Buffer again.
      return Promise.resolve({ ...reply.upload, bytes: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) })
    })
  }

  #run<T>(job: DistributiveOmit<WorkerJob, 'id'>, transfer: ArrayBuffer[], accept: (reply: Done) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const id = this.#nextId++
      const message = { ...job, id } as WorkerJob
      this.#queue.push({ id, message, transfer, accept: async (reply) => resolve(await accept(reply)), reject })
      this.#dispatch()
    })
  }

  /** Threads running now (tests watch a big job's thread go). */
  get threads(): number {
    return this.#slots.size
  }

  async close(): Promise<void> {
    this.#closed = true
    const slots = [...this.#slots]
    this.#slots.clear()
    for (const s of slots) {
      clearTimeout(s.timer)
      clearTimeout(s.idleTimer)
    }
    await Promise.all(slots.map((s) => s.worker.terminate()))
  }

  #dispatch(): void {
    while (this.#queue.length > 0) {
      let slot = [...this.#slots].find((s) => s.job === undefined)
      if (slot === undefined) {
        if (this.#slots.size >= this.#concurrency || this.#closed) return
        slot = this.#start()
      }
      const job = this.#queue.shift() as Job
      clearTimeout(slot.idleTimer)
      slot.job = job
      // Keeps the process alive while a job runs, and only then (an idle thread must not hold a script open).
      slot.worker.ref()
      // The budget starts when the thread takes the job (its 'started'), so a new thread's start-up (loading the
      // tokenizer's tables, ≈ 0.5–3 s) is not counted against the file.
      slot.worker.postMessage(job.message, job.transfer)
    }
  }

  #start(): Slot {
    const worker = new Worker(WORKER_URL, this.#maxHeapMb === undefined ? {} : { resourceLimits: { maxOldGenerationSizeMb: this.#maxHeapMb } })
    const slot: Slot = { worker, job: undefined, timer: undefined, idleTimer: undefined }
    this.#slots.add(slot)
    worker.on('message', (reply: WorkerReply | { started: number }) => void this.#settle(slot, reply))
    const gone = (err: unknown): void => {
      if (!this.#slots.delete(slot)) return
      clearTimeout(slot.timer)
      clearTimeout(slot.idleTimer)
      const job = slot.job
      slot.job = undefined
      job?.reject(err)
      // The next queued job gets a new thread.
      this.#dispatch()
    }
    worker.on('error', (err: Error & { code?: string }) =>
      gone(
        err.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? limitError(`Reading the file needed more than EXTRACT_WORKER_MEMORY_MB (${this.#maxHeapMb ?? 'V8 default'} MiB)`, err)
          : err,
      ),
    )
    worker.on('exit', (code) => gone(new Error(`the ingestion worker exited (code ${code})`)))
    return slot
  }

  /** End a thread (a job over its time budget): its job gets `err`, and the next queued job a new thread. */
  #kill(slot: Slot, err: Error): void {
    const job = slot.job
    slot.job = undefined
    this.#slots.delete(slot)
    clearTimeout(slot.idleTimer)
    job?.reject(err)
    // terminate() resolves once the thread has stopped; its exit handler finds the slot gone and does nothing.
    void slot.worker.terminate()
    this.#dispatch()
  }

  async #settle(slot: Slot, reply: WorkerReply | { started: number }): Promise<void> {
    const job = slot.job
    if ('started' in reply) {
      if (job?.id === reply.started) {
        slot.timer = setTimeout(() => this.#kill(slot, limitError(`The file took longer than EXTRACT_TIMEOUT_MS (${this.#timeoutMs} ms) to read`)), this.#timeoutMs)
      }
      return
    }
    if (job === undefined || job.id !== reply.id) return
    clearTimeout(slot.timer)
    slot.job = undefined
    if (reply.memory > this.#recycleAbove) {
      // A big job's buffers: give the memory back now (the next job starts a fresh thread).
      this.#slots.delete(slot)
      void slot.worker.terminate()
    } else {
      slot.worker.unref()
      slot.idleTimer = setTimeout(() => {
        if (slot.job !== undefined) return
        this.#slots.delete(slot)
        void slot.worker.terminate()
      }, this.#idleMs).unref()
    }
    this.#dispatch()
    if ('error' in reply) {
      const g = reply.error.gateway
      job.reject(g !== undefined ? new GatewayError(g) : new Error(reply.error.message))
      return
    }
    await job.accept(reply).catch(job.reject)
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

function limitError(message: string, cause?: unknown): GatewayError {
  return gatewayError('extraction_limit_exceeded', { param: 'file', message, cause })
}

/** Numbers per chunk in PackedPrepared.numbers. */
export const CHUNK_NUMBERS = 5

/** Unpacks in slices (a 20k-chunk file's chunks are 20k objects to make); the terms stay coded until BM25 takes them. */
async function unpack(packed: PackedPrepared): Promise<Prepared> {
  const slicer = new TimeSlicer()
  const { terms, numbers, texts, headings } = packed
  const chunks: Chunk[] = []
  let at = 0
  for (let i = 0; i < headings.length; i++) {
    const o = i * CHUNK_NUMBERS
    const length = numbers[o + 4] as number
    const heading = headings[i] as string
    chunks.push({
      index: numbers[o] as number,
      text: texts.slice(at, at + length),
      tokens: numbers[o + 1] as number,
      start: numbers[o + 2] as number,
      end: numbers[o + 3] as number,
      headingPath: heading === '' ? [] : (JSON.parse(heading) as string[]),
    })
    at += length
    if (slicer.due()) await slicer.pause()
  }
  const { vectors: flat, dimension } = packed
  const vectors = flat === undefined ? undefined : chunks.map((_, i) => flat.subarray(i * dimension, (i + 1) * dimension))
  return { format: packed.format, chunks, terms, vectors }
}
