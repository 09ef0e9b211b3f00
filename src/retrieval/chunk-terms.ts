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
 * A file's chunk terms as they travel from the prepare thread and wait for BM25: dictionary-coded, each distinct term
 * once (`vocab`), each chunk's terms as indices into it. BM25 then looks each distinct term up once per file instead
 * of once per occurrence, and nothing of it is a young-generation object. Before, each chunk's terms travelled as one
 * NUL-joined string, split and folded on the event loop per occurrence: for 5 MB of prose (≈ 1.9M terms, ≈ 14,700
 * chunks) `split`, `foldTerms` and BM25's per-term `Map` lookups were ≈ 0.55 s of the main thread's ≈ 1 s (issue 28);
 * earlier still they travelled as ≈ 1.3M short strings, whose structured clone and GC cost more than that.
 */
export interface CodedTerms {
  /** The distinct terms, NUL-joined (terms are letters and digits, never NUL): one string to clone, not thousands. */
  vocab: string
  /** Every chunk's terms as indices into the vocabulary, one chunk after another. */
  codes: Uint32Array
  /** Where each chunk's codes end in `codes` (chunk i's are `ends[i - 1] ?? 0` .. `ends[i]`). */
  ends: Uint32Array
}

/** Chunks' term lists, coded (see CodedTerms). */
export function codeTerms(chunks: ReadonlyArray<readonly string[]>): CodedTerms {
  const index = new Map<string, number>()
  const vocab: string[] = []
  let total = 0
  for (const terms of chunks) total += terms.length
  const codes = new Uint32Array(total)
  const ends = new Uint32Array(chunks.length)
  let at = 0
  for (let i = 0; i < chunks.length; i++) {
    for (const t of chunks[i] as readonly string[]) {
      let code = index.get(t)
      if (code === undefined) {
        code = vocab.length
        index.set(t, code)
        vocab.push(t)
      }
      codes[at++] = code
    }
    ends[i] = at
  }
  return { vocab: vocab.join('\u0000'), codes, ends }
}

/** The vocabulary as a list (index = code). */
export function vocabularyOf(coded: CodedTerms): string[] {
  return coded.vocab === '' ? [] : coded.vocab.split('\u0000')
}

/** Every chunk's terms as lists again (an embedder that reads terms; tests). */
export function decodeTerms(coded: CodedTerms): string[][] {
  return [...termLists(coded, vocabularyOf(coded))]
}

/** Each chunk's terms as a list, one chunk at a time, over the vocabulary already split (`vocabularyOf`). */
export function* termLists(coded: CodedTerms, vocab: readonly string[]): Generator<string[]> {
  for (let i = 0; i < coded.ends.length; i++) {
    const codes = chunkCodes(coded, i)
    const terms = new Array<string>(codes.length)
    for (let k = 0; k < codes.length; k++) terms[k] = vocab[codes[k] as number] as string
    yield terms
  }
}

/** Chunk `i`'s codes (a view into `coded.codes`, not a copy). */
export function chunkCodes(coded: CodedTerms, i: number): Uint32Array {
  return coded.codes.subarray(i === 0 ? 0 : (coded.ends[i - 1] as number), coded.ends[i] as number)
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
