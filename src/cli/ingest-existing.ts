/**
 * What the knowledge base already holds, so `recallgate ingest` can be run again on the same folder: each upload
 * carries `{path, sha256}` as metadata; a file whose path and content are already there is skipped, one whose content
 * changed is uploaded and the older copies of that path are deleted after the new one is stored (a failed upload
 * leaves the old copy searchable).
 */
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { fetch, type Agent } from 'undici'
import { errorReason } from './gateway-response.js'

/** Ids and content hashes of the stored files, by the `path` in their metadata. */
export type Existing = Map<string, Array<{ id: string; sha256: string | undefined }>>

/** The key was refused (401): every upload would be too, so the run stops before the first (as a 401 upload does). */
export class KeyRefused extends Error {}

/**
 * Lists the tenant's files (GET /api/v1/files, page after page while `has_more`). Throws with a reason the run
 * reports; `KeyRefused` on a 401.
 */
export async function listExisting(url: string, key: string, agent: Agent): Promise<Existing> {
  const out: Existing = new Map()
  for (let after: string | undefined; ; ) {
    const page = `${url}/api/v1/files?order=asc${after === undefined ? '' : `&after=${encodeURIComponent(after)}`}`
    const res = await fetch(page, { headers: { serviceKey: key }, dispatcher: agent })
    const text = await res.text()
    if (res.status === 401) throw new KeyRefused(errorReason(res.status, text))
    if (!res.ok) throw new Error(errorReason(res.status, text))
    const body = JSON.parse(text) as { data?: Array<{ id?: unknown; metadata?: unknown }>; has_more?: unknown; last_id?: unknown }
    for (const f of body.data ?? []) {
      const m = f.metadata as { path?: unknown; sha256?: unknown } | null | undefined
      if (typeof f.id !== 'string' || typeof m?.path !== 'string') continue
      const list = out.get(m.path) ?? []
      list.push({ id: f.id, sha256: typeof m.sha256 === 'string' ? m.sha256 : undefined })
      out.set(m.path, list)
    }
    // A gateway from before pages (no `has_more`) sent every file at once.
    if (body.has_more !== true || typeof body.last_id !== 'string') return out
    after = body.last_id
  }
}

/** The file's SHA-256, hex, read as a stream (memory stays flat for large PDFs). */
export async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

/** Deletes the stored copies `ids`; returns the ones that could not be deleted (reported, the run goes on). */
export async function deleteFiles(url: string, key: string, agent: Agent, ids: readonly string[]): Promise<string[]> {
  const failed: string[] = []
  for (const id of ids) {
    const res = await fetch(`${url}/api/v1/files/${encodeURIComponent(id)}`, { method: 'DELETE', headers: { serviceKey: key }, dispatcher: agent })
    await res.text()
    if (!res.ok && res.status !== 404) failed.push(id)
  }
  return failed
}
