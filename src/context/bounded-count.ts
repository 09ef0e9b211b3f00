/**
 * Token counting that stays linear on hostile input. gpt-tokenizer's BPE is quadratic in the length of one
 * pre-token, and a pre-token is never longer than a run of white space or a run of non-white space (plus, for
 * punctuation, the line breaks right after it). A long run of letters with no space (12,000 CJK characters, say) is one
 * pre-token: measured here, 12k characters blocked the event loop for 1.24 s and 40k for ~15 s; 100 KB of spaces,
 * which the old regex-based guard let through, took 30 s. Runs of either kind longer than `MAX_RUN` characters are
 * therefore counted in `MAX_RUN`-character slices and the slice counts added. BPE cannot merge across a slice
 * boundary, so the sum is never lower than the true count: on such text we over-count by at most a token or two per
 * slice (the safe side for packing); text without such runs is counted exactly as before.
 *
 * The scan is one loop over the characters: a regex such as /\S{1000,}/ keeps a backtracking entry per character of
 * its match, and 15 MB without white space overflowed V8's regexp stack ("Maximum call stack size exceeded").
 */
import type { Tokens } from '../types.js'

/** Slices of 1,000 characters cost 0.1–0.2 s per MB to count, about what short pre-tokens cost (measured with BPE). */
export const MAX_RUN = 1000

export function boundedCount(text: string, count: (text: string) => Tokens): Tokens {
  // Fast path, and the common case: short text cannot hold a long run.
  if (text.length < MAX_RUN) return count(text)
  let total = 0
  // text[from, ...) is not counted yet; text[runStart, i) is a run of one kind (white space or not).
  let from = 0
  let runStart = 0
  let runWhite = isWhite(text.charCodeAt(0))
  for (let i = 1; i <= text.length; i++) {
    const white = i < text.length ? isWhite(text.charCodeAt(i)) : !runWhite
    if (white === runWhite) continue
    if (i - runStart >= MAX_RUN) {
      if (runStart > from) total += count(text.slice(from, runStart))
      total += countInSlices(text, runStart, i, count)
      from = i
    }
    runStart = i
    runWhite = white
  }
  if (from === 0) return count(text)
  if (from < text.length) total += count(text.slice(from))
  return total
}

function countInSlices(text: string, start: number, end: number, count: (text: string) => Tokens): Tokens {
  let total = 0
  for (let i = start; i < end; ) {
    let stop = Math.min(end, i + MAX_RUN)
    // Never cut a surrogate pair in two: the halves would be counted as two replacement characters.
    const code = text.charCodeAt(stop - 1)
    if (stop < end && code >= 0xd800 && code <= 0xdbff) stop++
    total += count(text.slice(i, stop))
    i = stop
  }
  return total
}

/** Exactly JavaScript's `\s` (the class the o200k and cl100k pre-tokenizer patterns use). */
export function isWhite(c: number): boolean {
  if (c <= 32) return c === 32 || (c >= 9 && c <= 13)
  if (c < 0xa0) return false
  return (
    c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f ||
    c === 0x205f || c === 0x3000 || c === 0xfeff
  )
}
