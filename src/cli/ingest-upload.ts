/**
 * One file's upload to POST /api/v1/files (multipart, streamed from disk with `fs.openAsBlob` so memory stays flat),
 * a 429 waited out (Retry-After) and retried, and the outcome: what was stored, or why not and whether the whole run
 * must stop (an unreachable gateway or a rejected key fails every remaining file the same way).
 */
import { openAsBlob } from 'node:fs'
import { basename, extname } from 'node:path'
import { FormData, fetch, type Agent, type Response } from 'undici'
import type { Bytes, Ms } from '../types.js'
import { errorReason, networkError, parseJson, readBounded, retryAfter } from './gateway-response.js'
import { MIME_TYPES, type Candidate } from './ingest-files.js'

const MAX_RETRIES = 5
/** Large PDFs are extracted, chunked and embedded before the gateway answers. */
export const UPLOAD_HEADERS_TIMEOUT: Ms = 10 * 60_000
/** Network errors after which no other upload can succeed either. */
const FATAL_NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'UND_ERR_CONNECT_TIMEOUT'])

/** `state`: a new path, a changed file that replaced its older copies, or an unchanged one that was not sent. */
export type Uploaded = { ok: true; file: Candidate; bytes: Bytes; chunks: number; state?: 'new' | 'replaced' | 'unchanged' }
export type Failed = { ok: false; file: Candidate | { display: string }; reason: string; fatal?: boolean }
export type Outcome = Uploaded | Failed

export interface UploadOptions {
  endpoint: string
  key: string
  agent: Agent
  sleep: (ms: Ms) => Promise<void>
  /** Called before waiting out a 429, with the wait in whole seconds. */
  onWait: (seconds: number) => void
  /** The file's content hash, sent in the metadata so a later run can tell it unchanged. */
  sha256?: string
}

export async function upload(file: Candidate, o: UploadOptions): Promise<Outcome> {
  const type = MIME_TYPES[extname(file.path).toLowerCase()] ?? 'application/octet-stream'
  for (let attempt = 0; ; attempt++) {
    const form = new FormData()
    // metadata first: a gateway that streams the upload sees it before the file part.
    form.append('metadata', JSON.stringify(o.sha256 === undefined ? { path: file.display } : { path: file.display, sha256: o.sha256 }))
    try {
      form.append('file', await openAsBlob(file.path, { type }), basename(file.path))
    } catch (err) {
      // Deleted or made unreadable since the folder was listed: this file fails, the run goes on.
      return { ok: false, file, reason: (err as NodeJS.ErrnoException).code ?? (err as Error).message }
    }
    let res: Response
    try {
      res = await fetch(o.endpoint, { method: 'POST', headers: { serviceKey: o.key }, body: form, dispatcher: o.agent })
    } catch (err) {
      const { code, text } = networkError(err)
      if (code !== undefined && FATAL_NETWORK_CODES.has(code))
        return { ok: false, file, reason: `gateway unreachable at ${new URL(o.endpoint).origin} (${code})`, fatal: true }
      return { ok: false, file, reason: `upload interrupted: ${text}` }
    }
    const text = await readBounded(res)
    if (res.status === 429 && attempt < MAX_RETRIES) {
      const wait = retryAfter(res.headers.get('retry-after'))
      o.onWait(Math.ceil(wait / 1000))
      await o.sleep(wait)
      continue
    }
    if (res.ok) {
      const body = parseJson(text) as { bytes?: unknown; chunks?: unknown } | undefined
      return {
        ok: true,
        file,
        bytes: typeof body?.bytes === 'number' ? body.bytes : file.size,
        chunks: typeof body?.chunks === 'number' ? body.chunks : 0,
      }
    }
    // A rejected key fails every file the same way: stop rather than repeat it for each.
    return { ok: false, file, reason: errorReason(res.status, text), fatal: res.status === 401 }
  }
}
