/**
 * Request body reading with a hard byte limit: a declared Content-Length over the limit is refused before reading,
 * and a chunked body is cut off as soon as it passes the limit (we never buffer more than `limit` bytes).
 */
import { isUtf8 } from 'node:buffer'
import type { IncomingMessage } from 'node:http'
import { gatewayError } from '../errors.js'
import { contentCoding, decodeBody } from './content-encoding.js'
import type { Bytes } from '../types.js'

/**
 * How deeply JSON we accept may nest. JSON.parse copes with any depth, but everything after it that recurses
 * (JSON.stringify of the upstream body, msgpack, the JSON extractor) overflows the stack somewhere past ~5,000 levels
 * and would answer 500. 128 leaves room for deeply nested tool and response-format schemas.
 */
export const MAX_JSON_DEPTH = 128

/** The body, decoded when it came with a Content-Encoding (content-encoding.ts): `limit` bounds both sizes. */
export async function readBody(req: IncomingMessage, limit: Bytes): Promise<Buffer> {
  const coding = contentCoding(req)
  const declared = req.headers['content-length']
  if (declared !== undefined && Number(declared) > limit) {
    throw gatewayError('payload_too_large', { message: `Request body exceeds ${limit} bytes` })
  }
  const raw = await readUpTo(req, limit)
  return coding === 'identity' ? raw : decodeBody(raw, coding, limit)
}

const premature = (cause?: Error): Error =>
  gatewayError('client_closed_request', { message: 'The connection closed before the request body was complete', cause })

/**
 * The body, read with events, not `for await`: the promise and generator per chunk measured, with the upstream
 * body's, 43 of the 1,220 µs a request cost the gateway at 32 connections (profiler time, bench/relay.ts); and leaving
 * a `for await` loop early destroys the request and with it the socket, so a 413 for a chunked body over the limit
 * never reached the client. A declared length within the limit is the common case, and node's parser never delivers
 * more than it declares; a chunked body is cut off as soon as it passes the limit, the request paused with the rest
 * unread (the server reads and discards it after answering: drain.ts).
 */
function readUpTo(req: IncomingMessage, limit: Bytes): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // Gone before the body was read (while the request waited on its key or its route): its 'close' has been emitted
    // already, and listeners added now would wait for it forever, the request never ending.
    if (req.destroyed) {
      reject(premature())
      return
    }
    const parts: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer): void => {
      size += chunk.length
      if (size > limit) {
        cleanup()
        req.pause()
        parts.length = 0
        reject(gatewayError('payload_too_large', { message: `Request body exceeds ${limit} bytes` }))
        return
      }
      parts.push(chunk)
    }
    const onEnd = (): void => {
      cleanup()
      resolve(parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, size))
    }
    // The connection went away mid-body: the client left, or the server's request timeout cut it off (node has then
    // already answered 408 on the socket). Either way it is not our fault.
    const onError = (err: Error): void => {
      cleanup()
      reject(premature(err))
    }
    const onClose = (): void => {
      cleanup()
      reject(premature())
    }
    function cleanup(): void {
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onError)
      req.off('close', onClose)
    }
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onError)
    req.on('close', onClose)
  })
}

/** The media type of a request, lower-cased, without parameters (`application/json; charset=utf-8` → `application/json`). */
export function mediaType(req: IncomingMessage): string | undefined {
  const ct = req.headers['content-type']
  if (ct === undefined) return undefined
  return ct.split(';', 1)[0]?.trim().toLowerCase()
}

export function requireJson(req: IncomingMessage): void {
  const type = mediaType(req)
  if (type !== 'application/json' && !(type?.startsWith('application/') && type.endsWith('+json'))) {
    throw gatewayError('unsupported_media_type', {
      message: `Content-Type must be application/json, got ${type ?? 'none'}`,
    })
  }
}

/**
 * True when the JSON text nests arrays/objects deeper than `max`. A byte scan (quotes, backslashes and brackets are
 * ASCII, so they never occur inside a multi-byte UTF-8 sequence); brackets inside strings do not count.
 */
export function nestsDeeperThan(raw: Buffer, max: number): boolean {
  let depth = 0
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]
    if (c === 0x22) {
      // A string, which is most of a body's bytes (message text): jumped over to its closing quote with the native
      // search, not read byte by byte in JS (4–6 ns a byte: ≈ 150 µs for a 33 KB chat history). `"` and `\` never occur
      // inside a UTF-8 sequence, and a quote is escaped when an odd run of backslashes precedes it.
      let q = raw.indexOf(0x22, i + 1)
      while (q !== -1 && escapedQuote(raw, q)) q = raw.indexOf(0x22, q + 1)
      // Unterminated: nothing after it is structure; JSON.parse reports it.
      if (q === -1) return false
      i = q
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return false
}

/** Whether the quote at `q` is escaped: preceded by an odd number of backslashes (each run is read once). */
function escapedQuote(raw: Buffer, q: number): boolean {
  let slashes = 0
  while (q - 1 - slashes >= 0 && raw[q - 1 - slashes] === 0x5c) slashes++
  return slashes % 2 === 1
}

/**
 * Parse JSON text under the nesting limit; a failure is a GatewayError from `fail`. `at` names the text's place in
 * the request (`metadata` for a form field), for the param of a refused `__proto__` key.
 */
export function parseBoundedJson(raw: Buffer, fail: (message: string) => Error, at = ''): unknown {
  if (nestsDeeperThan(raw, MAX_JSON_DEPTH)) throw fail(`nested deeper than ${MAX_JSON_DEPTH} levels`)
  // JSON is UTF-8 (RFC 8259). Decoding invalid bytes would turn them into U+FFFD, so different byte strings (ids,
  // filenames) would name one thing (issue 29): refused instead. isUtf8 is simdutf, ≈ GB/s.
  if (!isUtf8(raw)) throw fail('not valid UTF-8')
  let value: unknown
  try {
    value = JSON.parse(raw.toString('utf8'))
  } catch (err) {
    throw fail(`not valid JSON: ${(err as Error).message}`)
  }
  refuseProtoKeys(raw, value, at)
  return value
}

/**
 * A `__proto__` key anywhere in a JSON body is refused with a 400 naming where it is: LMDB's encoding (msgpackr)
 * renames it `__proto_` when it reads a record back (its guard against prototype pollution), so file metadata and
 * stored messages would come back changed without a word (issue 29). Refused for every body alike, saved or not.
 *
 * Cost: a body can only hold the key as the letters `proto` or with a `\u` escape, so one search for each
 * (Buffer.indexOf, memchr speed) clears nearly every body; only the rest are walked.
 */
function refuseProtoKeys(raw: Buffer, value: unknown, at: string): void {
  if (raw.indexOf('proto') === -1 && raw.indexOf('\\u') === -1) return
  const path = protoKeyPath(value, at)
  if (path !== undefined)
    throw gatewayError('invalid_parameter', {
      param: path,
      message: `${path} is a \`__proto__\` key, which cannot be stored as sent: rename it`,
    })
}

function protoKeyPath(v: unknown, path: string): string | undefined {
  if (v === null || typeof v !== 'object') return undefined
  if (Array.isArray(v)) {
    for (const [i, x] of v.entries()) {
      const found = protoKeyPath(x, `${path}[${i}]`)
      if (found !== undefined) return found
    }
    return undefined
  }
  // JSON.parse makes `__proto__` an own property (never the prototype), so it shows up among the keys.
  for (const [k, x] of Object.entries(v)) {
    const here = path === '' ? k : `${path}.${k}`
    if (k === '__proto__') return here
    const found = protoKeyPath(x, here)
    if (found !== undefined) return found
  }
  return undefined
}

/** Read and parse a JSON object body. Anything but a JSON object is a 400 naming the body. */
export async function readJsonObject(req: IncomingMessage, limit: Bytes): Promise<Record<string, unknown>> {
  requireJson(req)
  return parseJsonObject(await readBody(req, limit))
}

/** A request body already read, parsed as a JSON object (readJsonObject's checks; 400 `invalid_json` otherwise). */
export function parseJsonObject(raw: Buffer): Record<string, unknown> {
  const value = parseBoundedJson(raw, (problem) => gatewayError('invalid_json', { message: `Request body is ${problem}` }))
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw gatewayError('invalid_json', { message: 'Request body must be a JSON object' })
  }
  return value as Record<string, unknown>
}
