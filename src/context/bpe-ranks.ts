/**
 * An encoding's byte-pair ranks, read from gpt-tokenizer's generated rank file and held compactly, and the byte-pair
 * merge that counts a pre-token's tokens with them (the library's `bytePairMerge`: lowest rank first, leftmost on
 * ties). o200k-bpe.ts counts o200k text with it, tokenizer.ts cl100k text.
 *
 * Why not the library's encoder: importing an encoding keeps its rank module's 200,000 strings, the module's source
 * (2–4 MB) and the encoder's Maps over them on the heap for the life of the process. On the main thread that was
 * ≈ 30 MB of a 47 MB heap at idle and most of its objects (246,000 strings), which every major GC marks again: the
 * longest /healthz answer during an upload held a 20.7 ms mark-compact (docs/benchmarks.md, "Tenth round"). Here the
 * rank file's bytes are scanned straight into the table (`readRankKeys`): what stays is one string holding every key
 * and four typed arrays, ≈ 1.4 MB of characters and 3 MB off the heap for o200k.
 *
 * A rank file whose arrays cannot be read this way (a gpt-tokenizer release that writes them otherwise) is an error at
 * the first count, with the file named; test/tokenizer.test.ts and test/o200k-bpe.test.ts hold the counts equal to the
 * library's.
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tryConvertToString } from 'gpt-tokenizer/utfUtil'
import type { Tokens } from '../types.js'
import { hashText } from './range-cache.js'

export type BpeEncoding = 'o200k_base' | 'cl100k_base'

/** Never a rank: marks a pair that cannot merge. */
export const NONE = 0x7fffffff

// Through a constant of this module: range-cache.ts `charCodeAt` says why.
const charCodeAt = String.prototype.charCodeAt

/** An encoding's mergeable keys as the table is built from them: key k is `bytes[offsets[k], offsets[k + 1])`, rank `ranks[k]`. */
interface RankKeys {
  readonly bytes: Uint8Array
  readonly offsets: Int32Array
  readonly ranks: Int32Array
  readonly count: number
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN = 0x5b
const CLOSE = 0x5d
const COMMA = 0x2c
const DECLARATION = Buffer.from('\nconst c')
const SIMPLE_ESCAPES: Record<number, number> = { 0x22: 0x22, 0x5c: 0x5c, 0x2f: 0x2f, 0x62: 8, 0x66: 12, 0x6e: 10, 0x72: 13, 0x74: 9 }

/**
 * The encoding's mergeable keys, scanned from the bytes of the library's generated rank file (each `const cN = [...];`
 * holds ranks in order: JSON strings and arrays of byte values), without importing it and without making a string or
 * an array per rank. A string's key is its UTF-8 bytes, which are the file's own bytes but for escapes (a lone
 * surrogate escape is U+FFFD's bytes, as `Buffer.from(s, 'utf8')` makes it). The library looks a byte sequence up as
 * text when it is valid UTF-8 and among its byte-array entries otherwise, so a byte-array entry that is valid UTF-8 can
 * never be found there: left out here too.
 *
 * Reading the file as text and each array with `JSON.parse` (until this scanner) left ≈ 20 MB of garbage on the heap
 * at start (the 2.2 MB file as a two-byte string, 200,000 parsed strings and their Latin-1 copies, the arrays), which
 * an idle gateway kept committed: new large-object space 11.4 MB, large-object space 8.7 MB and the new space grown
 * to its maximum (docs/benchmarks.md, "Idle RSS").
 */
function readRankKeys(encoding: BpeEncoding): RankKeys {
  const file = createRequire(import.meta.url).resolve(`gpt-tokenizer/cjs/bpeRanks/${encoding}`)
  const src = readFileSync(file)
  const fail = (at: number): never => {
    throw new Error(`${file}: its rank arrays could not be read (at byte ${at})`)
  }
  // Every key's bytes are at most its literal's: an escape is longer than what it stands for, `[226, 130]` than 2 bytes.
  const bytes = new Uint8Array(src.length)
  let offsets: Int32Array = new Int32Array(1 << 18)
  let ranks: Int32Array = new Int32Array(1 << 18)
  let count = 0
  let out = 0
  let rank = 0
  let arrays = 0
  const skipSpace = (i: number): number => {
    while (src[i] === 0x20 || src[i] === 0x0a || src[i] === 0x0d || src[i] === 0x09) i++
    return i
  }
  const hex4 = (i: number): number => {
    let v = 0
    for (let j = i; j < i + 4; j++) {
      const c = (src[j] ?? fail(j)) | 0x20
      v = v * 16 + (c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : fail(j))
    }
    return v
  }
  const put = (cp: number): void => {
    if (cp < 0x80) bytes[out++] = cp
    else if (cp < 0x800) {
      bytes[out++] = 0xc0 | (cp >> 6)
      bytes[out++] = 0x80 | (cp & 0x3f)
    } else if (cp < 0x10000) {
      bytes[out++] = 0xe0 | (cp >> 12)
      bytes[out++] = 0x80 | ((cp >> 6) & 0x3f)
      bytes[out++] = 0x80 | (cp & 0x3f)
    } else {
      bytes[out++] = 0xf0 | (cp >> 18)
      bytes[out++] = 0x80 | ((cp >> 12) & 0x3f)
      bytes[out++] = 0x80 | ((cp >> 6) & 0x3f)
      bytes[out++] = 0x80 | (cp & 0x3f)
    }
  }
  for (let at = src.indexOf(DECLARATION); at !== -1; at = src.indexOf(DECLARATION, at)) {
    let i = at + DECLARATION.length
    while (src[i] !== undefined && (src[i] as number) >= 0x30 && (src[i] as number) <= 0x39) i++
    if (src.toString('latin1', i, i + 4) !== ' = [') fail(i)
    i = skipSpace(i + 4)
    if (src[i] !== CLOSE)
      for (;;) {
        const from = out
        if (src[i] === QUOTE) {
          for (i++; src[i] !== QUOTE; ) {
            const c = src[i] ?? fail(i)
            if (c !== BACKSLASH) {
              bytes[out++] = c
              i++
              continue
            }
            const e = src[i + 1] ?? fail(i)
            if (e !== 0x75) {
              bytes[out++] = SIMPLE_ESCAPES[e] ?? fail(i)
              i += 2
              continue
            }
            let cp = hex4(i + 2)
            i += 6
            if (cp >= 0xd800 && cp <= 0xdbff && src[i] === BACKSLASH && src[i + 1] === 0x75) {
              const low = hex4(i + 2)
              if (low >= 0xdc00 && low <= 0xdfff) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00)
                i += 6
              }
            }
            put(cp >= 0xd800 && cp <= 0xdfff ? 0xfffd : cp)
          }
          i++
        } else if (src[i] === OPEN) {
          for (i = skipSpace(i + 1); src[i] !== CLOSE; ) {
            let v = 0
            const digits = i
            while ((src[i] as number) >= 0x30 && (src[i] as number) <= 0x39) v = v * 10 + (src[i++] as number) - 0x30
            if (i === digits || v > 255) fail(digits)
            bytes[out++] = v
            i = skipSpace(i)
            if (src[i] === COMMA) i = skipSpace(i + 1)
            else if (src[i] !== CLOSE) fail(i)
          }
          i++
          if (tryConvertToString(bytes.subarray(from, out)) !== undefined) out = from
        } else fail(i)
        if (out > from) {
          if (count + 1 >= offsets.length) {
            offsets = growInt32(offsets)
            ranks = growInt32(ranks)
          }
          offsets[count] = from
          ranks[count++] = rank
        }
        rank++
        i = skipSpace(i)
        if (src[i] === COMMA) i = skipSpace(i + 1)
        else if (src[i] === CLOSE) break
        else fail(i)
      }
    if (src[i + 1] !== 0x3b) fail(i + 1)
    arrays++
    at = i
  }
  if (arrays === 0) fail(0)
  offsets[count] = out
  return { bytes: bytes.subarray(0, out), offsets: offsets.subarray(0, count + 1), ranks: ranks.subarray(0, count), count }
}

function growInt32(a: Int32Array): Int32Array {
  const b = new Int32Array(a.length * 2)
  b.set(a)
  return b
}

/**
 * Byte sequence (as Latin-1 text) → rank, for every mergeable token, looked up by a range of a string so a lookup
 * allocates nothing (with `Map.get(bytes.slice(…))` the lookups were 40 % of a merge). Open addressing, at most half
 * full. Every key lives in one string (`#keys`, cut by `#offsets`), not one string each: a single heap object for the
 * collector to mark.
 */
export class RankTable {
  readonly #keys: string
  readonly #offsets: Int32Array
  readonly #ranks: Int32Array
  readonly #hashes: Int32Array
  readonly #slots: Int32Array
  readonly #mask: number
  /** Ranks of the two-byte tokens by their bytes (byte 1 × 256 + byte 2), NONE for the rest: no hashing for pairs. */
  readonly #pairs = new Int32Array(65536).fill(NONE)

  constructor(k: RankKeys) {
    const n = k.count
    this.#keys = Buffer.from(k.bytes.buffer, k.bytes.byteOffset, k.bytes.byteLength).toString('latin1')
    this.#offsets = Int32Array.from(k.offsets)
    this.#ranks = Int32Array.from(k.ranks)
    this.#hashes = new Int32Array(n)
    let size = 2
    while (size < n * 2) size *= 2
    this.#slots = new Int32Array(size)
    this.#mask = size - 1
    const bytes = k.bytes
    for (let i = 0; i < n; i++) {
      const from = this.#offsets[i] as number
      const to = this.#offsets[i + 1] as number
      const h = hashText(this.#keys, from, to) | 0
      this.#hashes[i] = h
      let slot = h & this.#mask
      while (this.#slots[slot] !== 0) slot = (slot + 1) & this.#mask
      this.#slots[slot] = i + 1
      if (to - from === 2) this.#pairs[((bytes[from] as number) << 8) | (bytes[from + 1] as number)] = this.#ranks[i] as number
    }
  }

  /** The rank of the two bytes at text[i, i + 2), or NONE. */
  pair(text: string, i: number): number {
    return this.#pairs[(charCodeAt.call(text, i) << 8) | charCodeAt.call(text, i + 1)] as number
  }

  /** The rank of text[start, end), or NONE. */
  rank(text: string, start: number, end: number): number {
    const h = hashText(text, start, end) | 0
    let slot = h & this.#mask
    for (;;) {
      const e = this.#slots[slot] as number
      if (e === 0) return NONE
      const k = e - 1
      if (this.#hashes[k] === h && this.#keyIs(k, text, start, end)) return this.#ranks[k] as number
      slot = (slot + 1) & this.#mask
    }
  }

  /** Whether key `k` is text[start, end), compared in place. */
  #keyIs(k: number, text: string, start: number, end: number): boolean {
    const from = this.#offsets[k] as number
    if ((this.#offsets[k + 1] as number) - from !== end - start) return false
    const keys = this.#keys
    for (let i = 0; i < end - start; i++) if (charCodeAt.call(keys, from + i) !== charCodeAt.call(text, start + i)) return false
    return true
  }
}

const tables = new Map<BpeEncoding, RankTable>()

/** The encoding's table, built on first use (≈ 0.1–0.2 s for o200k) and kept. */
export function rankTable(encoding: BpeEncoding): RankTable {
  let t = tables.get(encoding)
  if (t === undefined) tables.set(encoding, (t = new RankTable(readRankKeys(encoding))))
  return t
}

/** The UTF-8 bytes of `s`, one character per byte (ASCII text is returned as it is). */
export function latin1OfUtf8(s: string): string {
  for (let i = 0; i < s.length; i++) if (charCodeAt.call(s, i) > 0x7f) return Buffer.from(s, 'utf8').toString('latin1')
  return s
}

// Scratch arrays for the merge, grown as needed: part boundaries and the rank of each part with the next one.
let starts = new Int32Array(64)
let pairRanks = new Int32Array(64)

/** Tokens of one pre-token: the library's `bytePairMerge` (lowest rank first, leftmost on ties), counting the parts. */
export function mergeCount(t: RankTable, preToken: string): Tokens {
  const bytes = latin1OfUtf8(preToken)
  const n = bytes.length
  if (n <= 1 || t.rank(bytes, 0, n) !== NONE) return n === 0 ? 0 : 1
  if (starts.length < n + 1) {
    starts = new Int32Array(n + 1)
    pairRanks = new Int32Array(n + 1)
  }
  const b = starts
  const r = pairRanks
  for (let i = 0; i <= n; i++) b[i] = i
  for (let i = 0; i < n - 1; i++) r[i] = t.pair(bytes, i)
  r[n - 1] = NONE
  // `parts` parts: b[0..parts] are their boundaries, r[i] the rank of parts i and i + 1 merged.
  let parts = n
  while (parts > 1) {
    let best = NONE
    let at = -1
    for (let i = 0; i < parts - 1; i++) {
      const x = r[i] as number
      if (x < best) {
        best = x
        at = i
      }
    }
    if (at === -1) break
    // Merge parts `at` and `at + 1`: drop boundary at + 1. Loops, not `copyWithin`: most pre-tokens are a few bytes.
    for (let i = at + 1; i < parts; i++) b[i] = b[i + 1] as number
    for (let i = at + 1; i < parts - 1; i++) r[i] = r[i + 1] as number
    parts--
    r[at] = at + 1 < parts ? t.rank(bytes, b[at] as number, b[at + 2] as number) : NONE
    if (at > 0) r[at - 1] = t.rank(bytes, b[at - 1] as number, b[at + 1] as number)
  }
  return parts
}

/**
 * A counter of `encoding` for any text: split by the encoding's pre-tokenizer `split` (a global regex, copied: its
 * `lastIndex` is state), each pre-token merged. The library's count with no special tokens (their text is text).
 * Callers bound the pre-tokens' length (bounded-count.ts) and remember pieces (token-count.ts `pieceCounter`).
 */
export function splitCounter(encoding: BpeEncoding, split: RegExp): (text: string) => Tokens {
  const re = new RegExp(split.source, split.flags)
  return (text) => {
    const t = rankTable(encoding)
    let total = 0
    re.lastIndex = 0
    for (let m = re.exec(text); m !== null; m = re.exec(text)) total += mergeCount(t, m[0])
    return total
  }
}
