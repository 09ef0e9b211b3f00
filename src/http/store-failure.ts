/**
 * Storage failures (storage/store-errors.ts) as API errors: a store out of room is 507 `insufficient_storage`, one
 * failing for another reason 503 `storage_unavailable` with Retry-After. The one place the two meet, used by the
 * server for every route and by the chat path for a save that fails after its stream has started.
 */
import { gatewayError, type GatewayError } from '../errors.js'
import { StoreUnavailableError } from '../storage/store-errors.js'

/** Seconds a client is asked to wait before retrying a write the store could not take. */
const RETRY_AFTER_SECONDS = 30

/** The API error for a storage failure; undefined for anything else. */
export function storeFailure(err: unknown): GatewayError | undefined {
  if (!(err instanceof StoreUnavailableError)) return undefined
  if (err.full) {
    return gatewayError('insufficient_storage', {
      message: `The gateway's storage is full (${err.reason}): nothing was saved. Reads and chats with saveToMemory false still work; writes resume once space is freed (delete files or sessions)`,
      cause: err,
    })
  }
  return gatewayError('storage_unavailable', { headers: { 'retry-after': String(RETRY_AFTER_SECONDS) }, cause: err })
}
