/**
 * The index terms of every chunk of a file — `analyze(indexText)` for each — analyzing each stretch of the file's
 * text once although neighbouring chunks overlap (by up to `overlapTokens`: 192/80 chunks analyzed ~1.45× the text).
 *
 * The chunk boundaries cut the text into segments; a chunk's terms are the terms of the segments it covers, in order.
 * That equals analyzing the chunk whole when no boundary inside it touches a word: with white space on one side of
 * the cut, no word crosses it, and nothing carries lowercasing context across it (the final-sigma rule stops at white
 * space). Chunk boundaries fall between sentences, so this holds except where the chunker cut unbroken text; a chunk
 * with such a cut inside it is analyzed whole. The title and heading lines are joined with line breaks in the index
 * text, which end words and context the same way, so their terms are prepended (analyzed once per distinct line).
 */
import { analyze } from './analyzer.js'

export interface ChunkSpan {
  /** Character range in `text`. */
  start: number
  end: number
  headingPath: readonly string[]
}

/**
 * One chunk's terms joined into one string, as they travel from the prepare thread and wait for BM25 (terms are
 * letters and digits, never NUL). A 5 MB file's terms are ≈ 1.3M short strings: split on arrival they were held while
 * the file was written, and every young-generation GC of that second copied them (scavenges of 15–27 ms, the longest
 * pauses of an upload once its body was read off the event loop; issue 28). Split where they are used, they die young.
 */
export type JoinedTerms = string

export function joinTerms(terms: readonly string[]): JoinedTerms {
  return terms.join('\u0000')
}

/** A chunk's terms, from either form. */
export function splitTerms(terms: readonly string[] | JoinedTerms): readonly string[] {
  if (typeof terms !== 'string') return terms
  return terms === '' ? [] : terms.split('\u0000')
}

/** `analyze(indexText(title, chunk))` for every chunk, where indexText joins title, heading path and text with '\n'. */
export function chunkTerms(text: string, title: string, chunks: readonly ChunkSpan[]): string[][] {
  const cuts = new Set<number>()
  for (const c of chunks) {
    cuts.add(c.start)
    cuts.add(c.end)
  }
  const sorted = [...cuts].sort((a, b) => a - b)
  const safe = (at: number): boolean => at <= 0 || at >= text.length || isSpace(text.charCodeAt(at - 1)) || isSpace(text.charCodeAt(at))
  // Terms of each segment [sorted[i], sorted[i + 1]) that some chunk covers, computed on first use.
  const segments = new Map<number, string[]>()
  const lines = new Map<string, string[]>()
  const lineTerms = (line: string): string[] => {
    let terms = lines.get(line)
    if (terms === undefined) lines.set(line, (terms = analyze(line)))
    return terms
  }
  const titleTerms = analyze(title)
  return chunks.map((c) => {
    const out = [...titleTerms]
    for (const h of c.headingPath) out.push(...lineTerms(h))
    let i = lowerBound(sorted, c.start)
    let whole = false
    for (let j = i + 1; j < sorted.length && (sorted[j] as number) < c.end; j++) if (!safe(sorted[j] as number)) whole = true
    if (whole) {
      out.push(...analyze(text.slice(c.start, c.end)))
      return out
    }
    for (; i + 1 < sorted.length && (sorted[i] as number) < c.end; i++) {
      let terms = segments.get(i)
      if (terms === undefined) segments.set(i, (terms = analyze(text.slice(sorted[i] as number, sorted[i + 1] as number))))
      for (const t of terms) out.push(t)
    }
    return out
  })
}

function lowerBound(xs: readonly number[], x: number): number {
  let lo = 0
  let hi = xs.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if ((xs[mid] as number) < x) lo = mid + 1
    else hi = mid
  }
  return lo
}

/** White space of the kind that ends a word and stops case context (a subset of \s is enough: it is only a fast path). */
function isSpace(c: number): boolean {
  return c === 32 || c === 10 || c === 9 || c === 13 || c === 12 || c === 0xa0
}
