/**
 * Uploads to the knowledge base (`POST /api/v1/files`) as most tests make them: a JSON body. A test about the upload
 * itself (a hand-written body, raw bytes on a socket, the SDK's `files.create`) builds its request by hand, so what it
 * sends is in sight.
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
