/**
 * A service key on the wire: the admin API's answers and `recallgate keys list --json` alike, so a script reads one
 * shape whichever it uses. Never the hash; the raw key only in the answer that made it (`withSecret`).
 */
import type { KeyRecord } from '../storage/interface.js'
import { unixSeconds, type Plan } from '../types.js'

export interface KeyObject {
  id: string
  object: 'service_key'
  tenant: string
  plan: Plan
  label: string | null
  /** Unix seconds, as every time on the API. */
  created_at: number
  revoked_at: number | null
}

export function keyObject(r: KeyRecord): KeyObject {
  return {
    id: r.id,
    object: 'service_key',
    tenant: r.tenant,
    plan: r.plan,
    label: r.label ?? null,
    created_at: unixSeconds(r.createdAt),
    revoked_at: r.revokedAt === undefined ? null : unixSeconds(r.revokedAt),
  }
}

/** The answer to a create or a rotate: the only time the raw key is ever shown. */
export function withSecret(made: { key: string; record: KeyRecord }): KeyObject & { key: string } {
  return { ...keyObject(made.record), key: made.key }
}
