/**
 * The session ids every engine can store: the LMDB key encoding's limits, held by PostgreSQL too so that a session
 * moves between engines (migrate --from-lmdb) and answers the same on both. A refused id is an
 * `InvalidSessionIdError`; the HTTP layer makes it the API's 400 (http/store-failure.ts).
 */
import { InvalidSessionIdError } from './interface.js'

/** lmdb-js's default maximum key size, in bytes. */
const MAX_KEY_BYTES = 1978
/** Key bytes besides the two strings: separators, a number, slack for the escape byte. */
const KEY_FIXED_BYTES = 16
/**
 * ordered-binary writes long strings as raw UTF-8: a NUL would merge into its element separator and a lone
 * surrogate would become U+FFFD (two ids, one key), and control characters decode ambiguously. Such ids are refused
 * rather than silently aliased.
 */
const UNSAFE_ID = /[\u0000-\u001f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/** Refuse ids the key encoding cannot keep distinct, or too long for an LMDB key. */
export function checkSessionId(tenant: string, sessionId: string): void {
  if (sessionId.length === 0) throw new InvalidSessionIdError('sessionId must be a non-empty string')
  if (UNSAFE_ID.test(sessionId)) throw new InvalidSessionIdError('sessionId must not contain control characters or unpaired surrogates')
  if (Buffer.byteLength(tenant) + Buffer.byteLength(sessionId) + KEY_FIXED_BYTES > MAX_KEY_BYTES)
    throw new InvalidSessionIdError('sessionId is too long to store')
}

/** False for an id no stored session can have for its characters (`checkSessionId` refuses them): a cursor naming none. */
export function storableSessionIdChars(sessionId: string): boolean {
  return sessionId.length > 0 && !UNSAFE_ID.test(sessionId)
}

/**
 * A session as one string key (caches, per-session maps): tenant and id joined by a NUL, which `checkSessionId`
 * keeps out of every stored id, so that no two sessions share a key.
 */
export function sessionKey(tenant: string, sessionId: string): string {
  return `${tenant}\u0000${sessionId}`
}
