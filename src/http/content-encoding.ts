/**
 * Request bodies sent with `Content-Encoding`: `gzip`, `deflate` and `br` are decoded, with the decoded size held to
 * the same limit as a plain body (a small body that inflates past it is a 413, found while inflating, never held
 * whole); any other coding, or more than one, is a 415. Before this (issue 29) a gzip body was read as if plain.
 */
import type { IncomingMessage } from 'node:http'
import { promisify } from 'node:util'
import { brotliDecompress, createBrotliDecompress, createGunzip, createInflate, gunzip, inflate, type ZlibOptions } from 'node:zlib'
import type { Transform } from 'node:stream'
import { gatewayError } from '../errors.js'
import type { Bytes } from '../types.js'

export type Coding = 'identity' | 'gzip' | 'deflate' | 'br'

const CODINGS: ReadonlySet<string> = new Set(['gzip', 'x-gzip', 'deflate', 'br'])

/** The body's one content coding; 415 for one we do not decode. */
export function contentCoding(req: IncomingMessage): Coding {
  const raw = req.headers['content-encoding']
  if (raw === undefined) return 'identity'
  const coding = raw.trim().toLowerCase()
  if (coding === '' || coding === 'identity') return 'identity'
  if (!CODINGS.has(coding))
    throw gatewayError('unsupported_media_type', {
      message: `Content-Encoding ${JSON.stringify(raw)} is not supported: send the body plain, or with one of gzip, deflate, br`,
    })
  return coding === 'x-gzip' ? 'gzip' : (coding as Coding)
}

const ONE_SHOT = { gzip: promisify(gunzip), deflate: promisify(inflate), br: promisify(brotliDecompress) } as const

/** A whole encoded body, decoded (off the event loop, in zlib's thread pool) to at most `limit` bytes. */
export async function decodeBody(raw: Buffer, coding: Exclude<Coding, 'identity'>, limit: Bytes): Promise<Buffer> {
  try {
    return await ONE_SHOT[coding](raw, { maxOutputLength: limit } satisfies ZlibOptions)
  } catch (err) {
    throw decodeError(err, coding, limit)
  }
}

/** A streaming decoder for bodies read as a stream (multipart uploads); the caller bounds what it yields. */
export function decoder(coding: Exclude<Coding, 'identity'>): Transform {
  return coding === 'gzip' ? createGunzip() : coding === 'deflate' ? createInflate() : createBrotliDecompress()
}

/** What a failed decode means for the client: over the limit (413), or not valid data of its coding (400). */
export function decodeError(err: unknown, coding: Coding, limit: Bytes): Error {
  if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError)
    return gatewayError('payload_too_large', { message: `Request body exceeds ${limit} bytes once decoded (Content-Encoding: ${coding})` })
  return gatewayError('invalid_json', { message: `Request body is not valid ${coding} data: ${(err as Error).message}`, cause: err })
}
