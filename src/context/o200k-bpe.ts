/**
 * o200k token counts by our own byte-pair merge over gpt-tokenizer's pre-tokenizer and rank table: the same count as
 * the library's `countTokens`, without its merge cache.
 *
 * Why: gpt-tokenizer remembers every pre-token it merged in a 100,000-entry `Map` used as an LRU (delete the first
 * key, append the new one). Once that map is full, each miss pays `keys().next()` over the deleted entries at the
 * map's front, tens of µs. Text whose pre-tokens rarely repeat (base64, hex, ids) misses on nearly every one: 1 MB of
 * base64 in 200-character lines took 1.3 s to count in a fresh process and 7–9 s once the cache had filled, against
 * 0.8 s with the cache off (2026-11-27, dist/tmp micro-benchmark). In the long-lived prepare thread it is always full.
 *
 * Here each pre-token's count is remembered in a bounded `RangeCache` (emptied whole when full: no per-entry
 * eviction), and a miss is merged on the UTF-8 bytes held as a Latin-1 string, with ranks from a table keyed the same
 * way (bpe-ranks.ts; ASCII text, most of it, needs no conversion at all).
 */
import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants'
import type { Tokens } from '../types.js'
import { asciiPieceEnd, isAscii } from './o200k-ascii-split.js'
import { mergeCount as merge, rankTable } from './bpe-ranks.js'
import { RangeCache } from './range-cache.js'

/** Tokens of one o200k pre-token (bpe-ranks.ts). */
const mergeCount = (preToken: string): Tokens => merge(rankTable('o200k_base'), preToken)

export interface BpeCounterOptions {
  /** Pre-tokens of up to `shortLength` characters remembered; this cache is emptied when full. */
  shortEntries: number
  shortLength: number
  /**
   * Longer pre-tokens (a run of CJK, of quotes) up to `longLength` remembered apart, fewer of them: their merge is
   * quadratic in their length, and the chunker counts the same stretch more than once. Longer ones are merged each time.
   */
  longEntries: number
  longLength: number
}

/**
 * Counts of ASCII pre-tokens of two and three characters (two fifths of base64's), indexed by their character codes
 * instead of hashed: 0 not known yet, else the count (1–3). 2 MB, filled as they come, never emptied (bounded by size).
 */
const ascii2 = new Uint8Array(128 * 128)
const ascii3 = new Uint8Array(128 * 128 * 128)

function shortAscii(text: string, at: number, length: number): Tokens {
  const c0 = text.charCodeAt(at)
  const c1 = text.charCodeAt(at + 1)
  if (length === 2) {
    if ((c0 | c1) > 0x7f) return 0
    const k = (c0 << 7) | c1
    return ascii2[k] || (ascii2[k] = mergeCount(text.slice(at, at + 2)))
  }
  const c2 = text.charCodeAt(at + 2)
  if ((c0 | c1 | c2) > 0x7f) return 0
  const k = (c0 << 14) | (c1 << 7) | c2
  return ascii3[k] || (ascii3[k] = mergeCount(text.slice(at, at + 3)))
}

/** A counter equal to gpt-tokenizer's o200k `countTokens` with no special tokens (their text is counted as text). */
export function bpeCounter(opts: BpeCounterOptions): (text: string) => Tokens {
  const short = new RangeCache({ maxEntries: opts.shortEntries, compute: mergeCount })
  // Keyed by the cut-out string in a Map: for pre-tokens this long V8's native hashing and comparison beat the range
  // cache's JavaScript loops (a run of spaces, counted in 1,000-character slices, cost twice the library's before).
  const long = new Map<string, Tokens>()
  const longCount = (key: string): Tokens => {
    let n = long.get(key)
    if (n === undefined) {
      if (long.size >= opts.longEntries) long.clear()
      long.set(key, (n = mergeCount(key)))
    }
    return n
  }
  const { shortLength, longLength } = opts
  // Its own copy: `lastIndex` is state, and the library's instance is the library's.
  const split = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, O200K_TOKEN_SPLIT_REGEX.flags)
  /** Tokens of the pre-token text[s, e). */
  const piece = (text: string, s: number, e: number): Tokens => {
    const length = e - s
    // One ASCII character is one token (every byte is one); that is half of base64's pre-tokens.
    if (length === 1 && text.charCodeAt(s) < 0x80) return 1
    if (length === 2 || length === 3) {
      const n = shortAscii(text, s, length)
      if (n !== 0) return n
    }
    if (length <= shortLength) return short.get(text, s, e)
    if (length <= longLength) return longCount(text.slice(s, e))
    return mergeCount(text.slice(s, e))
  }
  return (text) => {
    let total = 0
    if (isAscii(text)) {
      for (let i = 0; i < text.length; ) {
        const e = asciiPieceEnd(text, i)
        total += piece(text, i, e)
        i = e
      }
      return total
    }
    split.lastIndex = 0
    for (let m = split.exec(text); m !== null; m = split.exec(text)) total += piece(text, m.index, m.index + m[0].length)
    return total
  }
}
