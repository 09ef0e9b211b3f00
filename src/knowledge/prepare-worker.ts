/**
 * Worker-thread entry for prepare.ts: one job at a time from the pool (prepare-pool.ts). Results travel packed so the
 * main thread's share of the hand-over stays small: all vectors in one transferred Float32Array, the terms coded over
 * the file's vocabulary in transferred arrays (chunk-terms.ts `CodedTerms`: a structured clone of hundreds of thousands
 * of little strings cost the main thread more than the work it saved), and the chunks as columns: their texts in one
 * string, their numbers in one transferred Int32Array, their heading paths as JSON strings. Receiving the chunks as
 * objects was one block of the main thread of 39–143 ms for the 14,730 chunks of 5 MB of prose (structured-clone
 * deserialization, load 7); these columns take ≈ 10 ms, and unpacking them into chunks runs in slices (prepare-pool.ts).
 */
import { getHeapStatistics } from 'node:v8'
import { parentPort } from 'node:worker_threads'
import { GatewayError } from '../errors.js'
import { readJsonUpload } from './json-upload.js'
import { prepareFile } from './prepare.js'
import { CHUNK_NUMBERS, type PackedPrepared, type WorkerJob, type WorkerReply } from './prepare-pool.js'

const port = parentPort
if (port === null) throw new Error('prepare-worker.ts runs as a worker thread')

port.on('message', (job: WorkerJob) => {
  // The pool's time budget for this job starts now.
  port.postMessage({ started: job.id })
  if (job.kind === 'json-upload') {
    let upload
    try {
      const raw = Buffer.from(job.raw.buffer, job.raw.byteOffset, job.raw.byteLength)
      upload = readJsonUpload(raw, job.maxFileBytes)
    } catch (err) {
      fail(job.id, err)
      return
    }
    // The content's bytes move back to the main thread; a view of part of a larger buffer is copied into its own first.
    let bytes: Uint8Array = upload.bytes
    if (bytes.byteOffset !== 0 || bytes.byteLength !== bytes.buffer.byteLength) bytes = new Uint8Array(bytes)
    port.postMessage({ id: job.id, memory: memory(), upload: { ...upload, bytes } } satisfies WorkerReply, [bytes.buffer as ArrayBuffer])
    return
  }
  prepareFile(job.file, job.options).then(
    (p) => {
      const dimension = p.vectors?.[0]?.length ?? 0
      const flat = new Float32Array(p.vectors === undefined ? 0 : p.vectors.length * dimension)
      p.vectors?.forEach((v, i) => flat.set(v, i * dimension))
      const numbers = new Int32Array(p.chunks.length * CHUNK_NUMBERS)
      p.chunks.forEach((c, i) => numbers.set([c.index, c.tokens, c.start, c.end, c.text.length], i * CHUNK_NUMBERS))
      const { terms } = p
      const packed: PackedPrepared = {
        format: p.format,
        texts: p.chunks.map((c) => c.text).join(''),
        numbers,
        headings: p.chunks.map((c) => (c.headingPath.length === 0 ? '' : JSON.stringify(c.headingPath))),
        terms,
        vectors: p.vectors ? flat : undefined,
        dimension,
      }
      port.postMessage({ id: job.id, memory: memory(), ok: packed } satisfies WorkerReply, [flat.buffer, numbers.buffer, terms.codes.buffer as ArrayBuffer, terms.ends.buffer as ArrayBuffer])
    },
    (err: unknown) => fail(job.id, err),
  )
})

function fail(id: number, err: unknown): void {
  const e = err instanceof GatewayError ? { status: err.status, type: err.type, code: err.code, message: err.message, param: err.param } : undefined
  port?.postMessage({ id, memory: memory(), error: { message: err instanceof Error ? err.message : String(err), gateway: e } } satisfies WorkerReply)
}

/** This thread's V8 heap (committed) plus the buffers it holds outside it (pdfjs's decoded streams). */
function memory(): number {
  const h = getHeapStatistics()
  return h.total_heap_size + h.external_memory
}
