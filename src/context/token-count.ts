/**
 * Exact o200k token counts for ingestion, 3–4× faster than gpt-tokenizer's own count on prose.
 *
 * o200k's pre-tokenizer never puts a non-space character and a following space in one pre-token: a space can only
 * open one (" word", " (", "  ") or sit in a run of white space. So text cut just before every space that follows a
 * non-space character splits into pieces (" word,", " (1990)") whose counts add up to the count of the whole, since
 * BPE never merges across pre-tokens. Prose repeats its pieces (Zipf), so a bounded cache from piece to count answers
 * most of them without running the regex and BPE at all. On 20 MB of the bench/rag-perf.ts corpus cut into sentences:
 * 31 MB per CPU-second against 9.1 for `countTokens` and 7.6 for `encode(...).length`; token counting went from a
 * third of ingestion CPU to a tenth. Equality with the library: every SQuAD dev sentence and a property test.
 */
import { boundedCount } from './bounded-count.js'
import type { Tokens } from '../types.js'
import { RangeCache } from './range-cache.js'
import { bpeCounter } from './o200k-bpe.js'

// Through a constant of this module: range-cache.ts `charCodeAt` says why.
const charCodeAt = String.prototype.charCodeAt

/**
 * The o200k count of any text, exact and uncached: our own merge over the compact rank table (o200k-bpe.ts,
 * bpe-ranks.ts), equal to gpt-tokenizer's `countTokens` with no special tokens (text holding `<|endoftext|>` is just
 * text: counted, never a throw), kept linear on hostile input by `boundedCount`. Not the library's encoder, whose
 * tables would stay on the heap of every thread that counts (bpe-ranks.ts says what they cost). The reference the
 * cached counter must always equal.
 */
export const countO200kUncached: (text: string) => Tokens = (() => {
  // Small caches: the pieces that repeat are remembered by `countO200k` in front of this.
  const bpe = bpeCounter({ shortEntries: 10_000, shortLength: 32, longEntries: 256, longLength: 1024 })
  return (text) => boundedCount(text, bpe)
})()

export interface PieceCounterOptions {
  /** The exact counter the pieces are counted with on a miss. */
  count: (text: string) => Tokens
  /** Pieces remembered; the cache is emptied when it is full (the frequent pieces come back within a few sentences). */
  maxEntries: number
  /** Longer pieces are counted each time, not remembered, which bounds the cache's memory to maxEntries × this. */
  maxPieceLength: number
}

/**
 * White space for the pre-tokenizer's \s (a superset is safe: it only loses cut points). A space after anything else
 * is a cut between pieces whose counts add up (the module comment); prose is mostly ASCII letters.
 */
export function isPreTokenSpace(c: number): boolean {
  return c <= 32 ? c === 32 || (c >= 9 && c <= 13) : c >= 0x85 && isOtherSpace(c)
}

/** A counter equal to `opts.count` on any text, summing remembered counts of its pieces. */
export function pieceCounter(opts: PieceCounterOptions): (text: string) => Tokens {
  const { count, maxEntries, maxPieceLength } = opts
  const known = new RangeCache({ maxEntries, compute: count })
  const piece = (text: string, start: number, end: number): Tokens =>
    end - start > maxPieceLength ? count(text.slice(start, end)) : known.get(text, start, end)
  return (text) => {
    let total = 0
    let start = 0
    let prevSpace = true
    const n = text.length
    for (let i = 0; i < n; i++) {
      const c = charCodeAt.call(text, i)
      if (c === 32 && !prevSpace) {
        total += piece(text, start, i)
        start = i
      }
      prevSpace = isPreTokenSpace(c)
    }
    return start < n ? total + piece(text, start, n) : total
  }
}

/** The o200k count of `text`, exact (equal to `countO200kUncached`). */
export const countO200k: (text: string) => Tokens = pieceCounter({
  count: countO200kUncached,
  // Bounds: 200k pieces of ≤ 32 characters (≤ 13 MB of keys; ~3 MB on the bench corpus, which has ~110k distinct).
  maxEntries: 200_000,
  maxPieceLength: 32,
})

/**
 * The same exact count for ingestion (the chunker's default): pieces that miss go to our own merge (o200k-bpe.ts), not
 * the library's, whose full merge cache made every new pre-token cost tens of µs. Text that rarely repeats a
 * pre-token is where that shows: 1 MB of base64 counted in 0.2–0.3 s against 6–9 s (1.3 s in a fresh process), prose
 * 1 MB in 50–80 ms against 0.25–0.6 s. A separate counter, built on first use (a rank table of ≈ 10 MB and ≈ 0.1 s
 * of CPU), so the main thread, which counts chat messages with `countO200k`, pays neither unless it ingests.
 */
export const countO200kIngest: (text: string) => Tokens = (() => {
  const bpe = bpeCounter({ shortEntries: 100_000, shortLength: 32, longEntries: 2048, longLength: 1024 })
  return pieceCounter({ count: (text) => boundedCount(text, bpe), maxEntries: 200_000, maxPieceLength: 32 })
})()

function isOtherSpace(c: number): boolean {
  return (
    c === 0x85 || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 ||
    c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
  )
}
