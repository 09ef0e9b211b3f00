/**
 * The API error for a used-up quota: 403 `quota_exceeded` (errors.ts), its message naming the quota, its limit, what
 * is in use and what to do. Built here and only here, from the quota check (quotas.ts) or from a store's own refusal
 * (http/store-failure.ts, for a session a racing save took first).
 */
import { gatewayError, type GatewayError } from '../errors.js'
import type { PlanQuotas } from '../types.js'

export type QuotaName = 'stored_bytes' | 'files' | 'sessions' | 'messages_per_session'

/** The wire name of each quota (GET /api/v1/usage, the error message) by its field in PlanQuotas. */
export const QUOTA_NAMES: Readonly<Record<keyof PlanQuotas, QuotaName>> = {
  storedBytes: 'stored_bytes',
  files: 'files',
  sessions: 'sessions',
  messagesPerSession: 'messages_per_session',
}

const REMEDY: Record<QuotaName, string> = {
  stored_bytes: 'delete files (DELETE /api/v1/files/{id}) to make room',
  files: 'delete files (DELETE /api/v1/files/{id}) to make room',
  sessions: 'delete sessions (DELETE /api/v1/sessions/{id}) to start new ones',
  messages_per_session: 'the oldest messages are pruned',
}

export function quotaExceeded(q: { quota: QuotaName; limit: number; used: number; adding?: number; param?: string }): GatewayError {
  const unit = q.quota === 'stored_bytes' ? ' bytes' : ''
  const adding = q.adding === undefined ? '' : `, and this request adds ${q.adding}${unit}`
  return gatewayError('quota_exceeded', {
    param: q.param ?? null,
    message: `Quota ${q.quota} exceeded: your plan allows ${q.limit}${unit} and ${q.used}${unit} are in use${adding}; ${REMEDY[q.quota]}`,
  })
}
