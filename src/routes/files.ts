/**
 * /api/v1/files: upload (multipart or JSON), list, read, delete, and search of a tenant's knowledge base.
 * Uploads are bounded while they stream in (busboy's fileSize limit), so an oversized file is refused with 413 without
 * being held in memory whole; ingestion is finished (chunked, embedded, indexed, committed) when the 201 is sent.
 */
import { once } from 'node:events'
import { tenantOf } from '../http/tenant.js'
import busboy from 'busboy'
import type { IncomingMessage } from 'node:http'
import { gatewayError, invalidParam } from '../errors.js'
import { mediaType, readBody, readJsonObject } from '../http/body.js'
import { checkFilename, parseMetadata } from '../knowledge/json-upload.js'
import { contentCoding, decodeError, decoder } from '../http/content-encoding.js'
import { sendJson } from '../http/respond.js'
import type { Handler, RequestContext } from '../http/server.js'
import type { KnowledgeBase } from '../knowledge/knowledge-base.js'
import type { Quotas } from '../quotas/quotas.js'
import type { Bytes, Tenant } from '../types.js'
import { listPage } from './list-page.js'

export interface UploadedFile {
  filename: string
  contentType: string | undefined
  bytes: Buffer
  metadata: Record<string, unknown> | null
}

/** Longer than any id we issue (`file-` + 24 hex digits), and short enough never to overflow an LMDB key. */
const MAX_FILE_ID_LENGTH = 128

/** OpenAI's bounds on a page of `files.list`. */
const FILE_PAGES = { defaultLimit: 10_000, maxLimit: 10_000 }

function fileId(ctx: RequestContext): string {
  const id = ctx.params.id ?? ''
  if (id.length > MAX_FILE_ID_LENGTH) throw gatewayError('not_found', { message: 'No file with that id', param: 'id' })
  return id
}

export function readMultipart(req: IncomingMessage, maxFileBytes: Bytes, maxBodyBytes: Bytes): Promise<UploadedFile> {
  const coding = contentCoding(req)
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy
    try {
      bb = busboy({
        headers: req.headers,
        // Browsers and fetch's FormData send file names as raw UTF-8; busboy's default (latin1) would garble them.
        defParamCharset: 'utf8',
        limits: { files: 1, fileSize: maxFileBytes, fields: 8, fieldSize: 64 * 1024, parts: 16 },
      })
    } catch (err) {
      reject(gatewayError('invalid_parameter', { param: 'file', message: `Invalid multipart body: ${(err as Error).message}` }))
      return
    }
    let file: { filename: string; contentType: string; parts: Buffer[]; size: number; truncated: boolean } | undefined
    let metadataRaw: string | undefined
    let settled = false
    const fail = (err: unknown): void => {
      if (settled) return
      settled = true
      // Every destination: busboy, or the decoder in front of it.
      req.unpipe()
      req.resume()
      reject(err)
    }
    bb.on('file', (name, stream, info) => {
      // A truncated form makes busboy destroy each open file stream with an error; unhandled, that error would crash
      // the process. The same error also reaches `bb`'s own 'error' handler below, which answers the request.
      stream.on('error', () => undefined)
      // One file per request, in the field `file`: anything else is refused rather than dropped without a word.
      if (name !== 'file') {
        stream.resume()
        fail(invalidParam(name, `Send the file in the multipart field \`file\`, not \`${name}\``))
        return
      }
      const f = { filename: info.filename ?? '', contentType: info.mimeType, parts: [] as Buffer[], size: 0, truncated: false }
      file = f
      stream.on('data', (d: Buffer) => {
        f.size += d.length
        f.parts.push(d)
      })
      stream.on('limit', () => {
        f.truncated = true
        fail(gatewayError('payload_too_large', { param: 'file', message: `The file exceeds MAX_FILE_BYTES (${maxFileBytes} bytes)` }))
      })
    })
    bb.on('filesLimit', () => fail(invalidParam('file', 'One file per request: upload each file in its own request')))
    bb.on('field', (name, value) => {
      if (name === 'metadata') metadataRaw = value
    })
    bb.on('error', (err) =>
      fail(gatewayError('invalid_parameter', { param: 'file', message: `Invalid multipart body: ${(err as Error).message}` })),
    )
    bb.on('close', () => {
      if (settled) return
      settled = true
      try {
        if (file === undefined) throw gatewayError('missing_parameter', { param: 'file', message: 'multipart field `file` is required' })
        resolve({
          filename: checkFilename(file.filename),
          contentType: file.contentType,
          bytes: Buffer.concat(file.parts, file.size),
          metadata: parseMetadata(metadataRaw),
        })
      } catch (err) {
        reject(err)
      }
    })
    req.on('aborted', () => fail(gatewayError('client_closed_request', { message: 'The upload was aborted' })))
    // Aborted before this point (the request waited on its key or its route): 'aborted' will not come again.
    if (req.destroyed) {
      fail(gatewayError('client_closed_request', { message: 'The upload was aborted' }))
      return
    }
    const declared = Number(req.headers['content-length'] ?? 0)
    if (declared > maxBodyBytes) {
      // The limit checked is MAX_FILE_BYTES plus room for the form's framing; the message names the documented one.
      fail(gatewayError('payload_too_large', { param: 'file', message: `The upload exceeds MAX_FILE_BYTES (${maxFileBytes} bytes)` }))
      return
    }
    if (coding === 'identity') {
      req.pipe(bb)
      return
    }
    // An encoded form is decoded on its way to busboy, and the decoded bytes are bounded like a plain body's.
    const decode = decoder(coding)
    let decoded = 0
    decode.on('data', (d: Buffer) => {
      decoded += d.length
      if (decoded > maxBodyBytes) {
        decode.unpipe(bb)
        decode.destroy()
        fail(decodeError(new RangeError('too large'), coding, maxBodyBytes))
      }
    })
    decode.on('error', (err) => fail(decodeError(err, coding, maxBodyBytes)))
    req.pipe(decode).pipe(bb)
  })
}

export function fileRoutes(
  kb: KnowledgeBase,
  opts: {
    maxFileBytes: Bytes
    maxBodyBytes: Bytes
    ragTopK: number
    /** Search hits below this relevance are left out unless the body's `min_relevance` says otherwise (RAG_SEARCH_MIN_RELEVANCE). */
    minRelevance: number
    /** Throws when the store is below its free-disk floor or at its map size: uploads are refused before they start. */
    checkRoom?: () => Promise<void>
    /** The tenant's plan's file and byte quotas: checked before the body is read, and held for the upload's size. */
    quotas?: Pick<Quotas, 'checkUploadRoom' | 'reserveUpload'>
  },
) {
  // Multipart framing adds a little on top of the file itself.
  const uploadLimit = opts.maxFileBytes + 64 * 1024

  const upload: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    await opts.checkRoom?.()
    await opts.quotas?.checkUploadRoom(tenant)
    const type = mediaType(ctx.req)
    let file: UploadedFile
    if (type === 'multipart/form-data') file = await readMultipart(ctx.req, opts.maxFileBytes, uploadLimit)
    else if (type === 'application/json') {
      // Read in the prepare thread when large (KnowledgeBase.readJsonUpload), so the body is not looked at here.
      file = { ...(await kb.readJsonUpload(await readBody(ctx.req, uploadLimit * 2), opts.maxFileBytes)), contentType: undefined }
    }
    else {
      throw gatewayError('unsupported_media_type', {
        message: `Upload with Content-Type multipart/form-data or application/json, got ${type ?? 'none'}`,
      })
    }
    const release = await opts.quotas?.reserveUpload(tenant, file.bytes.length)
    try {
      sendJson(ctx.res, 201, await kb.ingest(tenant.id, file))
    } finally {
      release?.()
    }
  }

  /**
   * OpenAI's `files.list`: newest first unless `order=asc`, pages of `limit` (default and most 10,000) after the file
   * `after` names, with `has_more` (the SDK's auto-pagination follows it). `purpose` is accepted and ignored: every
   * file here is one kind.
   */
  const list: Handler = async (ctx) => {
    sendJson(ctx.res, 200, listPage(await kb.list(tenantOf(ctx).id), ctx.query, (f) => f.id, FILE_PAGES))
  }

  const get: Handler = async (ctx) => {
    const id = fileId(ctx)
    const rec = await kb.get(tenantOf(ctx).id, id)
    if (rec === undefined) throw gatewayError('not_found', { message: `No file with id ${JSON.stringify(id)}`, param: 'id' })
    sendJson(ctx.res, 200, rec)
  }

  /**
   * GET /files/{id}/content (the SDK's `files.content`): the text recallgate extracted from the file, what search and a
   * message naming the file read, as UTF-8 text. Not the bytes uploaded: those are not kept. Seeing what was read out
   * of a PDF is how a caller finds why a fact in it is never retrieved. Streamed as it is read (a batch of chunks at a
   * time, waiting for a slow reader), so a large file holds neither the event loop nor its whole text in memory.
   */
  const content: Handler = async (ctx) => {
    const id = fileId(ctx)
    const tenant = tenantOf(ctx).id
    const file = await kb.get(tenant, id)
    if (file === undefined) throw gatewayError('not_found', { message: `No file with id ${JSON.stringify(id)}`, param: 'id' })
    const res = ctx.res
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' })
    for await (const piece of kb.fileTextPieces(tenant, file)) {
      if (ctx.clientGone.aborted) return
      if (!res.write(piece)) await once(res, 'drain', { signal: ctx.clientGone.signal }).catch(() => undefined)
    }
    res.end()
  }

  const del: Handler = async (ctx) => {
    const id = fileId(ctx)
    if (!(await kb.delete(tenantOf(ctx).id, id))) {
      throw gatewayError('not_found', { message: `No file with id ${JSON.stringify(id)}`, param: 'id' })
    }
    sendJson(ctx.res, 200, { id, object: 'file', deleted: true })
  }

  const search: Handler = async (ctx) => {
    const body = await readJsonObject(ctx.req, opts.maxBodyBytes)
    if (body.query === undefined || body.query === null) throw gatewayError('missing_parameter', { param: 'query', message: 'query is required' })
    if (typeof body.query !== 'string' || body.query.trim() === '') throw invalidParam('query', 'query must be a non-empty string')
    let k = opts.ragTopK
    if (body.k !== undefined && body.k !== null) {
      if (typeof body.k !== 'number' || !Number.isInteger(body.k) || body.k < 1 || body.k > 100) {
        throw invalidParam('k', 'k must be an integer from 1 to 100')
      }
      k = body.k
    }
    let minRelevance = opts.minRelevance
    if (body.min_relevance !== undefined && body.min_relevance !== null) {
      if (typeof body.min_relevance !== 'number' || !(body.min_relevance >= 0 && body.min_relevance <= 1))
        throw invalidParam('min_relevance', 'min_relevance must be a number from 0 to 1')
      minRelevance = body.min_relevance
    }
    // What chat would consider: a ranking always has a best hit, but a chunk that holds none of the query's words (the
    // vector side's nearest neighbours of anything) is not an answer, so by default it is not listed either.
    const hits = (await kb.search(tenantOf(ctx).id, body.query, k)).filter((h) => h.relevance > 0 && h.relevance >= minRelevance)
    sendJson(ctx.res, 200, {
      object: 'list',
      data: hits.map((h) => ({
        file_id: h.file_id,
        filename: h.filename,
        metadata: h.metadata,
        chunk_index: h.chunk_index,
        score: h.score,
        relevance: Math.round(h.relevance * 1000) / 1000,
        text: h.text,
      })),
    })
  }

  return { upload, list, get, content, del, search }
}
