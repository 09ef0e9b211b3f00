/**
 * An encoding's byte-pair ranks, read from gpt-tokenizer's generated rank file and held compactly, and the byte-pair
 * merge that counts a pre-token's tokens with them (the library's `bytePairMerge`: lowest rank first, leftmost on
 * ties). o200k-bpe.ts counts o200k text with it, tokenizer.ts cl100k text.
 *
 * Why not the library's encoder: importing an encoding keeps its rank module's 200,000 strings, the module's source
 * (2–4 MB) and the encoder's Maps over them on the heap for the life of the process. On the main thread that was
 * ≈ 30 MB of a 47 MB heap at idle and most of its objects (246,000 strings), which every major GC marks again: the
 * longest /healthz answer during an upload held a 20.7 ms mark-compact (docs/benchmarks.md, "Tenth round"). Here the
 * rank file's arrays are parsed as JSON (they are JSON: the file is generated), the table is built, and the parsed
 * arrays are garbage: what stays is one string holding every key and four typed arrays, ≈ 1.4 MB of characters and
 * 3 MB off the heap for o200k.
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

/** Each `const cN = [...];` of the generated file: the ranks in order, strings and byte arrays. */
const ARRAY_DECLARATION = /^const c\d+ = (\[[^]*?\]);\n(?=const c\d+ = |\/\*\*|const bpe)/gm

/** The encoding's ranks (index = rank) as the library's rank module exports them, without importing it. */
export function readRanks(encoding: BpeEncoding): Array<string | number[]> {
  const file = createRequire(import.meta.url).resolve(`gpt-tokenizer/cjs/bpeRanks/${encoding}`)
  const text = readFileSync(file, 'utf8')
  const declared = text.match(/^const c\d+ = /gm)?.length ?? 0
  const out: Array<string | number[]> = []
  let read = 0
  for (const m of text.matchAll(ARRAY_DECLARATION)) {
    for (const v of JSON.parse(m[1] as string) as Array<string | number[]>) out.push(v)
    read++
  }
  if (read === 0 || read !== declared) throw new Error(`${file}: its rank arrays could not be read (${read} of ${declared})`)
  return out
}

/**
 * Byte sequence (as Latin-1 text) → rank, for every mergeable token, looked up by a range of a string so a lookup
 * allocates nothing (with `Map.get(bytes.slice(…))` the lookups were 40 % of a merge). Open addressing, at most half
 * full. The library looks a byte sequence up as text when it is valid UTF-8 and among its byte-array entries
 * otherwise, so a byte-array entry that is valid UTF-8 can never be found there: left out here too. Every key lives in
 * one string (`#keys`, cut by `#offsets`), not one string each: a single heap object for the collector to mark.
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

  constructor(entries: ReadonlyArray<string | readonly number[]>) {
    const keys: string[] = []
    const ranks: number[] = []
    entries.forEach((value, rank) => {
      let key: string | undefined
      if (typeof value === 'string') key = latin1OfUtf8(value)
      else if (tryConvertToString(new Uint8Array(value)) === undefined) key = String.fromCharCode(...value)
      if (key === undefined) return
      keys.push(key)
      ranks.push(rank)
    })
    const n = keys.length
    this.#offsets = new Int32Array(n + 1)
    this.#ranks = Int32Array.from(ranks)
    this.#hashes = new Int32Array(n)
    let size = 2
    while (size < n * 2) size *= 2
    this.#slots = new Int32Array(size)
    this.#mask = size - 1
    let at = 0
    for (let k = 0; k < n; k++) {
      const key = keys[k] as string
      this.#offsets[k] = at
      at += key.length
      const h = hashText(key) | 0
      this.#hashes[k] = h
      let slot = h & this.#mask
      while (this.#slots[slot] !== 0) slot = (slot + 1) & this.#mask
      this.#slots[slot] = k + 1
      if (key.length === 2) this.#pairs[(charCodeAt.call(key, 0) << 8) | charCodeAt.call(key, 1)] = ranks[k] as number
    }
    this.#offsets[n] = at
    this.#keys = keys.join('')
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
  if (t === undefined) tables.set(encoding, (t = new RankTable(readRanks(encoding))))
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
