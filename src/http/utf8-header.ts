/** Request headers read as the UTF-8 their bytes are (chat's and responses' `x-session-id`). */
import { isUtf8 } from 'node:buffer'
import { invalidParam } from '../errors.js'

/**
 * A header's value as UTF-8. node hands header values over as Latin-1 (one character per byte), so `café` sent as
 * UTF-8 arrived as `cafÃ©`, another session than the same id in the body (issue 29). Bytes that are not UTF-8 are
 * refused, never mapped to U+FFFD (two different byte strings would name one session).
 */
export function utf8Header(value: string, name: string): string {
  const bytes = Buffer.from(value, 'latin1')
  if (!isUtf8(bytes)) throw invalidParam(name, `The ${name} header is not valid UTF-8`)
  return bytes.toString('utf8')
}

