/**
 * Uploads to the knowledge base (`POST /api/v1/files`) as most tests make them: a JSON body, or a form with one `file`
 * part. A test about the upload itself (two parts, another field name, parts in another order, a compressed or
 * hand-written body, raw bytes on a socket, the SDK's `files.create`) builds its request by hand, so what it sends is
 * in sight.
 */
import type { Harness } from './harness.js'

/** Who uploads, as `Harness.fetch` takes it: the first tenant's service key and the provider key unless overridden, `null` to send none. */
export interface Uploader {
  key?: string | null
  provider?: string | null
}

/** `POST /api/v1/files` with `body` as JSON; any value, so a test can leave a field out or give it the wrong type. */
export function uploadJson(h: Pick<Harness, 'fetch'>, body: unknown, as: Uploader = {}): Promise<Response> {
  return h.fetch('/api/v1/files', { ...as, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
}

export interface FilePart {
  filename: string
  content: string | Uint8Array
  /** The part's Content-Type; text/plain unless given. */
  type?: string
  /** Sent as the form's `metadata` field, after the file, as written (so it can be malformed JSON). */
  metadata?: string
}

/** `POST /api/v1/files` as multipart/form-data: one `file` part, then `metadata` when given. */
export function uploadMultipart(h: Pick<Harness, 'fetch'>, file: FilePart, as: Uploader = {}): Promise<Response> {
  const form = new FormData()
  form.append('file', new Blob([file.content], { type: file.type ?? 'text/plain' }), file.filename)
  if (file.metadata !== undefined) form.append('metadata', file.metadata)
  return h.fetch('/api/v1/files', { ...as, method: 'POST', body: form })
}
