/**
 * Turning an uploaded file into what the knowledge base stores: extract → chunk → analyze (the BM25 terms, each stretch
 * of overlapping text once) → embed, when the embedder is the local one (a remote embedder is called from the main
 * thread: it is network I/O, not CPU). Pure CPU work with no storage or HTTP, so it can run in a worker thread
 * (prepare-worker.ts): for a 540 KB Markdown file it measured 150–500 ms of event-loop time (chunking 75–350 ms,
 * terms 20–55 ms, embedding 10–120 ms, issue 18), during which every other request and stream waited.
 */
import { gatewayError } from '../errors.js'
import { chunkText, type Chunk } from '../ingest/chunker.js'
import { DEFAULT_EXTRACT_LIMITS, extract, type ExtractLimits, type Format } from '../ingest/extract.js'
import { chunkTerms, codeTerms, type CodedTerms } from '../retrieval/chunk-terms.js'
import { LocalEmbedder } from '../retrieval/embedder.js'

export interface PrepareInput {
  filename: string
  contentType: string | undefined
  bytes: Uint8Array
}

export interface PrepareOptions {
  chunkTokens: number
  chunkOverlap: number
  maxChunksPerFile: number
  /** Embed with the local embedder of this dimension; undefined: leave embedding to the caller. */
  localDimension: number | undefined
  /** Bounds on extraction; the configuration's defaults when absent. */
  limits?: ExtractLimits
}

export interface Prepared {
  format: Format
  chunks: Chunk[]
  /** Each chunk's `analyze` terms, coded over the file's vocabulary (chunk-terms.ts `CodedTerms`). */
  terms: CodedTerms
  /** One vector per chunk when `localDimension` was given. */
  vectors: Float32Array[] | undefined
}

export async function prepareFile(file: PrepareInput, o: PrepareOptions): Promise<Prepared> {
  const bytes = Buffer.from(file.bytes.buffer, file.bytes.byteOffset, file.bytes.byteLength)
  const extracted = await extract({ filename: file.filename, contentType: file.contentType, bytes }, o.limits ?? DEFAULT_EXTRACT_LIMITS)
  const chunks = chunkText(extracted, { chunkTokens: o.chunkTokens, overlapTokens: o.chunkOverlap, maxChunks: o.maxChunksPerFile })
  if (chunks.length === 0) throw gatewayError('empty_file', { param: 'file', message: `${file.filename} has no extractable text` })
  // Analyzed once for BM25 and the embedder, and each stretch of text once although chunks overlap.
  const terms = codeTerms(chunkTerms(extracted.text, titleOf(file.filename), chunks))
  const vectors = o.localDimension === undefined ? undefined : new LocalEmbedder({ dimension: o.localDimension }).embedCoded(terms)
  return { format: extracted.format, chunks, terms, vectors }
}

export function titleOf(filename: string): string {
  return filename.replace(/\.[^.]*$/, '').replace(/[_\-.]+/g, ' ')
}
