/**
 * Storage failures as API errors: a store out of room is 507 `insufficient_storage`, one failing for another reason
 * 503 `storage_unavailable` with Retry-After (storage/store-errors.ts), a database that cannot answer now 503
 * `database_unavailable` (storage/interface.ts). The one place the two meet, used by the
 * server for every route and by the chat path for a save that fails after its stream has started.
 */
import { gatewayError, invalidParam, type GatewayError } from '../errors.js'
import { quotaExceeded } from '../quotas/quota-error.js'
import { DatabaseUnavailableError, InvalidSessionIdError, SessionLimitError } from '../storage/interface.js'
import { StoreUnavailableError } from '../storage/store-errors.js'

/** Seconds a client is asked to wait before retrying a write the store could not take. */
const RETRY_AFTER_SECONDS = 30

/**
 * Retry-After for `database_unavailable`: a PostgreSQL restart or failover takes seconds, and a client retrying in
 * one second costs one quick failure (every statement and connection wait is bounded) if it is not back yet.
 */
const DATABASE_RETRY_AFTER_SECONDS = 1

/** The API error for a storage failure (or a store's refusal: a quota, an id it cannot store); undefined for anything else. */
export function storeFailure(err: unknown): GatewayError | undefined {
  // Not a failure but a store's refusal, made in the save's own transaction: a racing save took the last session.
  if (err instanceof SessionLimitError) return quotaExceeded({ quota: 'sessions', limit: err.limit, used: err.used, adding: 1, param: 'sessionId' })
  if (err instanceof InvalidSessionIdError) return invalidParam('sessionId', err.message)
  if (err instanceof DatabaseUnavailableError) {
    return gatewayError('database_unavailable', { headers: { 'retry-after': String(DATABASE_RETRY_AFTER_SECONDS) }, cause: err })
  }
  if (!(err instanceof StoreUnavailableError)) return undefined
  if (err.full) {
    return gatewayError('insufficient_storage', {
      message: `The gateway's storage is full (${err.reason}): nothing was saved. Reads and chats with saveToMemory false still work; writes resume once space is freed (delete files or sessions)`,
      cause: err,
    })
  }
  return gatewayError('storage_unavailable', { headers: { 'retry-after': String(RETRY_AFTER_SECONDS) }, cause: err })
}
