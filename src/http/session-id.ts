/**
 * A session id as a client sends it (a body field, a path segment) made the one the stores key by. Shared by the chat
 * path, the Responses path and the session and conversation routes, so that every way in names the same session.
 */
import { invalidParam } from '../errors.js'

/**
 * A session id as it is stored: Unicode NFC (so "café" typed composed or decomposed is one session) without
 * surrounding white space (invisible in any list). A string that is empty or blank after that is refused.
 */
export function normalizeSessionId(raw: string, param: string): string {
  const id = raw.normalize('NFC').trim()
  if (id === '') throw invalidParam(param, `${param} must not be empty or only white space`)
  return id
}
