/**
 * JSON text of strings and numbers without a JSON.stringify call where none is needed: for the texts written out field
 * by field on every response (`_metadata`, the Response object's changing fields), whose strings are mostly ids, model
 * names and enum values. Each is exactly what JSON.stringify writes for the same value.
 *
 * Why: a JSON.stringify call costs its C++ entry and string builder even for `"disabled"` (≈ 50 ns hot, more on a
 * request's cold path); several per response showed in the profile (docs/benchmarks.md "Tenth round").
 */

// Through a constant of this module: range-cache.ts `charCodeAt` says why.
const charCodeAt = String.prototype.charCodeAt

/** JSON.stringify(s): printable ASCII with no quote or backslash is quoted as it is, anything else goes to the call. */
export function jsonString(s: string): string {
  if (s.length > 64) return JSON.stringify(s)
  for (let i = 0; i < s.length; i++) {
    const c = charCodeAt.call(s, i)
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) return JSON.stringify(s)
  }
  return `"${s}"`
}

/** JSON.stringify(n): a non-finite number is null. */
export function jsonNumber(n: number): string {
  return Number.isFinite(n) ? `${n}` : 'null'
}
