/**
 * An upload sent as JSON (`{filename, content, metadata}`), read from its raw body into the file it carries, and the
 * checks on a file's name and metadata that a multipart upload shares. Pure (no I/O), so it runs where its cost is
 * best paid: inline for a small body, in the prepare thread for a large one (prepare-worker.ts). For a 5 MB body the
 * reading — the nesting scan, UTF-8 check and decode, JSON.parse, the `__proto__` search and the content's encoding
 * back to bytes — was one block of the event loop of 45–55 ms, the longest `/healthz` answer during an upload (issue 28).
 */
import { gatewayError, invalidParam } from '../errors.js'
import type { Bytes } from '../types.js'
import { parseBoundedJson, parseJsonObject } from '../http/body.js'

export interface JsonUpload {
  filename: string
  /** `content` as UTF-8. */
  bytes: Buffer
  metadata: Record<string, unknown> | null
}

/** The file in a JSON upload body; a GatewayError (400, 413) names what is wrong with it. */
export function readJsonUpload(raw: Buffer, maxFileBytes: Bytes): JsonUpload {
  const { filename, content, metadata } = parseJsonObject(raw)
  if (filename === undefined || filename === null) throw gatewayError('missing_parameter', { param: 'filename', message: 'filename is required' })
  const name = checkFilename(filename)
  if (content === undefined || content === null) throw gatewayError('missing_parameter', { param: 'content', message: 'content is required' })
  if (typeof content !== 'string') throw invalidParam('content', 'content must be a string')
  const bytes = Buffer.from(content, 'utf8')
  if (bytes.length > maxFileBytes) throw gatewayError('payload_too_large', { param: 'content', message: `The file exceeds MAX_FILE_BYTES (${maxFileBytes} bytes)` })
  return { filename: name, bytes, metadata: parseMetadata(metadata) }
}

/** A file's metadata as sent (a JSON object, or a form field of JSON text); null when it has none. */
export function parseMetadata(raw: unknown): Record<string, unknown> | null {
  if (raw === undefined || raw === null || raw === '') return null
  let value: unknown = raw
  if (typeof raw === 'string') {
    value = parseBoundedJson(Buffer.from(raw, 'utf8'), (problem) => invalidParam('metadata', `metadata is ${problem}`), 'metadata')
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalidParam('metadata', 'metadata must be a JSON object')
  }
  if (JSON.stringify(value).length > 16 * 1024) throw invalidParam('metadata', 'metadata must be at most 16 KiB of JSON')
  return value as Record<string, unknown>
}

/** A file's name as stored, or a 400. */
export function checkFilename(name: unknown): string {
  if (typeof name !== 'string' || name.trim() === '') throw invalidParam('filename', 'filename must be a non-empty string')
  if (name.length > 255) throw invalidParam('filename', 'filename must be at most 255 characters')
  // Stored as UTF-8, an unpaired surrogate would come back as U+FFFD: a different name from the one the 201 showed.
  if (/\p{Surrogate}/u.test(name)) throw invalidParam('filename', 'filename must be valid Unicode')
  // A NUL, CR or LF in a name would reach logs, clients' headers and shells as a line break or a terminator: each
  // becomes a space (the 201 shows the name as stored). Cleaned rather than refused, so a file whose name on disk
  // has one (Linux allows it) can still be ingested by `recallgate ingest`.
  return name.replace(/[\u0000\r\n]/g, ' ')
}
