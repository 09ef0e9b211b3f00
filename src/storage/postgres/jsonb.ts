/**
 * A value as the text of a `jsonb` parameter. PostgreSQL's jsonb refuses two things a client's JSON may carry, and
 * refuses the whole statement for them: the `\u0000` escape (its text type cannot hold a NUL) and an unpaired
 * surrogate's escape (not a character: UTF-8 cannot hold it either). Both become U+FFFD here, in keys and values
 * alike, so a message, a name or a metadata value holding one is stored (as LMDB stores an unpaired surrogate:
 * U+FFFD once read back) instead of failing the request with a 500. docs/scaling.md lists the difference.
 *
 * JSON.stringify writes a NUL and an unpaired surrogate only as those escapes (a paired surrogate is written as its
 * characters), in lower-case hex, so they are found in its text by walking its escapes from the left; text without
 * any `\u` escape, nearly all of it, is returned as it is after one scan.
 */
export function jsonb(value: unknown): string {
  const text = JSON.stringify(value)
  if (!text.includes('\\u')) return text
  return text.replace(/\\(u0000|ud[89a-f][0-9a-f]{2}|[^u]|u[0-9a-f]{4})/g, (escape, body: string) =>
    body === 'u0000' || /^ud[89a-f]/.test(body) ? '\\ufffd' : escape,
  )
}

/** `jsonb` for a column that may be NULL: null and undefined are SQL NULL. */
export function nullableJsonb(value: unknown): string | null {
  return value === null || value === undefined ? null : jsonb(value)
}
