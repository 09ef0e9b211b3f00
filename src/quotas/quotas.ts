/**
 * Per-tenant quotas by plan (config QUOTA_*): what a tenant may keep, checked before anything is written and reported
 * in GET /api/v1/usage. Engine-independent: files and their bytes are counted from the knowledge base's own listing,
 * sessions through the SessionStore contract, so LMDB and PostgreSQL answer alike.
 *
 * - Files and stored bytes: checked before an upload's body is read (nothing left) and again once its size is known,
 *   against the stored files plus this process's uploads still in flight (a reservation per upload, released when it
 *   ends), so concurrent uploads through one process cannot both take the last room. Uploads racing through different
 *   processes can overshoot by at most one file each.
 * - Sessions: the store counts them inside the save's own transaction (`SessionBounds.maxSessions`), exact across
 *   processes; `checkNewSession` refuses a chat before its upstream call when the session would be new and none is free.
 * - Messages per session: pruned, oldest first, in the save (`SessionBounds.maxMessages`), as MAX_SESSION_MESSAGES
 *   always did. Never an error: a session is a sliding window whose oldest turns the packer leaves out first anyway,
 *   and an error would come after the upstream had answered (and been paid), losing the reply.
 */
import type { Awaitable, SessionBounds, SessionStore } from '../storage/interface.js'
import type { Bytes, Plan, PlanQuotas, Tenant } from '../types.js'
import { QUOTA_NAMES, quotaExceeded, type QuotaName } from './quota-error.js'

/** What the quotas read of the knowledge base: its listing of a tenant's files (every engine has it). */
export interface FileListing {
  list(tenant: string): Awaitable<readonly { readonly bytes: number }[]>
}

export interface QuotaReport {
  /** The caller's plan; `limit` null is no quota. `used` of messages_per_session is the largest session's count. */
  plan: Plan
  quotas: Record<QuotaName, { limit: number | null; used: number }>
}

export class Quotas {
  readonly #plans: Readonly<Record<Plan, PlanQuotas>>
  readonly #files: FileListing
  readonly #sessions: Pick<SessionStore, 'get' | 'usage'>
  /** Bytes and files of uploads in flight per tenant; an entry lives while its tenant has one (bounded by them). */
  readonly #inFlight = new Map<string, { bytes: Bytes; files: number }>()

  constructor(o: { plans: Readonly<Record<Plan, PlanQuotas>>; files: FileListing; sessions: Pick<SessionStore, 'get' | 'usage'> }) {
    this.#plans = o.plans
    this.#files = o.files
    this.#sessions = o.sessions
  }

  of(plan: Plan): PlanQuotas {
    return this.#plans[plan]
  }

  /** What a save to a session of this plan passes to the store. Free: no store call. */
  sessionBounds(plan: Plan): SessionBounds {
    const q = this.#plans[plan]
    return {
      ...(Number.isFinite(q.sessions) ? { maxSessions: q.sessions } : {}),
      ...(Number.isFinite(q.messagesPerSession) ? { maxMessages: q.messagesPerSession } : {}),
    }
  }

  /**
   * Refuse a write to `sessionId` when it would be a new session and the tenant has none free. Costs one store read
   * (`get`) and, for a new session, one pass over the tenant's session records; callers ask only when the session
   * looked empty (a chat's history read came back with nothing), so a running session pays nothing.
   */
  async checkNewSession(tenant: Tenant, sessionId: string): Promise<void> {
    const limit = this.#plans[tenant.plan].sessions
    if (!Number.isFinite(limit) || (await this.#sessions.get(tenant.id, sessionId)) !== undefined) return
    const { sessions } = await this.#sessions.usage(tenant.id)
    if (sessions >= limit) throw quotaExceeded({ quota: 'sessions', limit, used: sessions, adding: 1, param: 'sessionId' })
  }

  /**
   * Before an upload's body is read: refuse when the tenant has no file or byte left. One listing of its files
   * (O(files), what GET /api/v1/files costs), skipped for plans without file quotas.
   */
  async checkUploadRoom(tenant: Tenant): Promise<void> {
    await this.#checkFiles(tenant, 0)
  }

  /**
   * Once an upload's size is known, before it is extracted or stored: refuse it if it does not fit, else hold its
   * room until `release` (call it whatever the upload's outcome: once stored, the listing counts it instead).
   */
  async reserveUpload(tenant: Tenant, bytes: Bytes): Promise<() => void> {
    await this.#checkFiles(tenant, bytes)
    const held = this.#inFlight.get(tenant.id) ?? { bytes: 0, files: 0 }
    held.bytes += bytes
    held.files += 1
    this.#inFlight.set(tenant.id, held)
    let released = false
    return () => {
      if (released) return
      released = true
      held.bytes -= bytes
      held.files -= 1
      if (held.files === 0) this.#inFlight.delete(tenant.id)
    }
  }

  /** Each quota's limit and use: one listing of the tenant's files and one pass over its sessions. */
  async report(tenant: Tenant): Promise<QuotaReport> {
    const q = this.#plans[tenant.plan]
    const [files, sessions] = await Promise.all([this.#fileUse(tenant.id), this.#sessions.usage(tenant.id)])
    const used: Record<keyof PlanQuotas, number> = {
      storedBytes: files.bytes,
      files: files.files,
      sessions: sessions.sessions,
      messagesPerSession: sessions.largestSession,
    }
    const quotas = {} as QuotaReport['quotas']
    for (const field of Object.keys(QUOTA_NAMES) as (keyof PlanQuotas)[])
      quotas[QUOTA_NAMES[field]] = { limit: Number.isFinite(q[field]) ? q[field] : null, used: used[field] }
    return { plan: tenant.plan, quotas }
  }

  /** `adding` bytes (0: only "is anything left") of one more file, against what is stored and in flight. */
  async #checkFiles(tenant: Tenant, adding: Bytes): Promise<void> {
    const q = this.#plans[tenant.plan]
    if (!Number.isFinite(q.files) && !Number.isFinite(q.storedBytes)) return
    const stored = await this.#fileUse(tenant.id)
    const held = this.#inFlight.get(tenant.id)
    const files = stored.files + (held?.files ?? 0)
    const bytes = stored.bytes + (held?.bytes ?? 0)
    if (files + 1 > q.files) throw quotaExceeded({ quota: 'files', limit: q.files, used: files, adding: 1, param: 'file' })
    // `>=` before the size is known: with the quota full to the byte, no file (not even an empty one) fits.
    if (adding === 0 ? bytes >= q.storedBytes : bytes + adding > q.storedBytes)
      throw quotaExceeded({ quota: 'stored_bytes', limit: q.storedBytes, used: bytes, ...(adding > 0 ? { adding } : {}), param: 'file' })
  }

  async #fileUse(tenant: string): Promise<{ files: number; bytes: Bytes }> {
    const list = await this.#files.list(tenant)
    let bytes = 0
    for (const f of list) bytes += f.bytes
    return { files: list.length, bytes }
  }
}
