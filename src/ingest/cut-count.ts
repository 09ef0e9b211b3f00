/**
 * The exact o200k count of consecutive pieces of unbroken text (cut mid-word by the chunker) from the pieces' own
 * counts, without tokenizing their whole text again.
 *
 * Where a lowercase letter is followed by an uppercase one, every o200k pre-token ends: a lowercase letter can only sit
 * in a letter run's lowercase part, which stops at an uppercase letter (its optional contraction starts with "'"). So
 * at such a "sync" point the text splits into parts whose counts add up, in whichever string the two letters are both
 * inside. Around each cut c, with a sync point a at or before it and b at or after it:
 *   count(whole) = Σ count(piece) + Σ over cuts [count(a..b) − count(a..c) − count(c..b)]
 * Three short counts a cut (the caches answer most of them) instead of the chunk's text again: a chunk of base64 on one
 * line (no white space, so every piece is cut) was counted once as pieces and once whole, a fifth of its chunking.
 * Text with no such pair near a cut (one letter repeated, CJK, digits) gets `undefined`: count it whole.
 */
import type { Tokens } from '../types.js'

export interface CutPiece {
  start: number
  end: number
  /** Exact count of text[start, end). */
  tokens: Tokens
}

/** How far from a cut a sync point is looked for; random base64 has one every ≈ 6 characters. */
const REACH = 64

/**
 * count(text[pieces[0].start, pieces[last].end)) when the pieces are adjacent (each starts where the last ended) and
 * a sync point is found around each cut, else undefined.
 */
export function countAcrossCuts(text: string, pieces: readonly CutPiece[], count: (s: string) => Tokens): Tokens | undefined {
  let total = (pieces[0] as CutPiece).tokens
  // Sync points must come in order (b of one cut ≤ a of the next) and inside the whole: past its first character.
  let floor = (pieces[0] as CutPiece).start + 1
  for (let i = 1; i < pieces.length; i++) {
    const piece = pieces[i] as CutPiece
    const c = piece.start
    if ((pieces[i - 1] as CutPiece).end !== c) return undefined
    const a = syncAtOrBefore(text, c, Math.max(floor, c - REACH))
    const b = a === -1 ? -1 : syncAtOrAfter(text, c, Math.min(piece.end, c + REACH))
    if (b === -1) return undefined
    total += piece.tokens + count(text.slice(a, b)) - count(text.slice(a, c)) - count(text.slice(c, b))
    floor = b
  }
  return total
}

function isSync(text: string, p: number): boolean {
  const before = text.charCodeAt(p - 1)
  const at = text.charCodeAt(p)
  return before >= 97 && before <= 122 && at >= 65 && at <= 90
}

/** The last sync point p in [min, from], or -1. */
function syncAtOrBefore(text: string, from: number, min: number): number {
  for (let p = from; p >= min; p--) if (isSync(text, p)) return p
  return -1
}

/** The first sync point p in [from, max], or -1. */
function syncAtOrAfter(text: string, from: number, max: number): number {
  for (let p = from; p <= max; p++) if (isSync(text, p)) return p
  return -1
}
