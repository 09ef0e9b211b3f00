/**
 * Text → index terms, shared by BM25 and the local embedder so both rank on the same vocabulary.
 *
 * Lowercased Unicode words (letters and digits), English stopwords dropped, a light suffix stemmer. Scripts written
 * without spaces (Han, kana, Hangul) become overlapping character bigrams, the usual cheap stand-in for a segmenter.
 * Measured on SQuAD (BM25, 176/64 chunks, 2,910 questions; answer chunk within the top 5): no stemming 2,719, this
 * light stemmer 2,734, a heavier suffix stripper (-ation, -ment, -ness, ...) 2,732 — light kept. Over whole
 * paragraphs this analyzer gets 92.2% at top 3, against the issue's ~87% for plain BM25.
 */

import { RangeCache } from '../context/range-cache.js'

/**
 * Names what `analyze`, `stem` and `foldTerms` return: change it with any change to them. Terms kept between starts
 * (terms-file.ts) were made by the analysis this names, and one made by another is not used.
 */
export const ANALYZER_ID = 'analyzer-1'

/** Words too frequent to tell passages apart. Question words are included: they never occur in the answer text. */
const STOPWORDS = new Set(
  (
    'a about above after again against all am an and any are as at be because been before being below between both ' +
    'but by can could did do does doing down during each few for from further had has have having he her here hers ' +
    'herself him himself his how i if in into is it its itself just me more most my myself no nor not of off on once ' +
    'only or other our ours ourselves out over own same she should so some such than that the their theirs them ' +
    'themselves then there these they this those through to too under until up very was we were what when where ' +
    'which while who whom why will with would you your yours yourself yourselves s t also'
  ).split(' '),
)

// One pass over the text; \p{L}\p{N} keeps accented and non-Latin words whole.
const WORD = /[\p{L}\p{N}]+/gu
const UNSPACED = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]/u

/**
 * Light English stemmer: folds plurals and the commonest verb endings so "built"/"builds"/"building" meet
 * "build"-ish forms often enough to matter, without Porter's aggressive conflations. Words of ≤ 3 letters pass.
 */
export function stem(w: string): string {
  const n = w.length
  if (n <= 3) return w
  const last = w.charCodeAt(n - 1)
  if (last === 115 /* s */) {
    if (w.endsWith('ies') && n > 4) return w.slice(0, -3) + 'y'
    if (w.endsWith('sses')) return w.slice(0, -2)
    if (w.endsWith('ss') || w.endsWith('us') || w.endsWith('is')) return w
    return w.slice(0, -1)
  }
  if (n > 5 && w.endsWith('ing')) return undouble(w.slice(0, -3))
  if (n > 4 && w.endsWith('ed')) return undouble(w.slice(0, -2))
  return w
}

function undouble(w: string): string {
  const n = w.length
  if (n >= 3 && w.charCodeAt(n - 1) === w.charCodeAt(n - 2) && !/[lsz]$/.test(w)) return w.slice(0, -1)
  return w
}

/** The index terms of `text`, in order, repeats kept (term frequency matters to BM25). */
export function analyze(text: string): string[] {
  // Lowercasing is per character except for Σ (final ς or not depends on its neighbours, even across punctuation):
  // only then can lowercasing a piece differ from lowercasing the whole, so only that takes the simple route.
  if (text.includes('\u03a3')) return analyzeReference(text)
  const out: string[] = []
  const n = text.length
  let i = 0
  while (i < n) {
    let c = text.charCodeAt(i)
    if (c < 128 && !isAsciiWordChar(c)) {
      i++
      continue
    }
    // A run of ASCII letters and digits, or of those mixed with anything non-ASCII: ASCII punctuation and spaces are
    // never part of a word, so words never cross a run's ends.
    const start = i
    let ascii = true
    while (i < n) {
      c = text.charCodeAt(i)
      if (c >= 128) ascii = false
      else if (!isAsciiWordChar(c)) break
      i++
    }
    if (!ascii || i - start > MAX_REMEMBERED_LENGTH) analyzeLowered(text.slice(start, i).toLowerCase(), out)
    else {
      const term = TERMS.get(text, start, i)
      if (term !== null) out.push(term)
    }
  }
  return out
}

/** What `analyze` computes, said simply: lowercase the text, take its words. Slower; the tests hold analyze to it. */
export function analyzeReference(text: string): string[] {
  return analyzeLowered(text.toLowerCase(), [])
}

/**
 * Terms of ASCII words as written ("The", "Normans") → term, or null for a stopword. Words repeat (Zipf), so most are
 * looked up instead of cut out, lowercased and stemmed, and the term is the same string each time, whose hash V8
 * keeps: BM25's term lookup then skips hashing. Analysis ran 1.9× faster on SQuAD paragraphs, 3× on the
 * bench/rag-perf.ts corpus (CPU).
 */
const TERMS = new RangeCache<string | null>({
  maxEntries: 100_000,
  compute: (word) => {
    const w = word.toLowerCase()
    return STOPWORDS.has(w) ? null : stem(w)
  },
})
/** Longer words are analyzed each time: the cache holds at most 100k keys of 32 characters. */
const MAX_REMEMBERED_LENGTH = 32

function isAsciiWordChar(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || (c >= 65 && c <= 90)
}

/** The terms of already lowercased text, appended to `out`. */
function analyzeLowered(lower: string, out: string[]): string[] {
  for (const m of lower.matchAll(WORD)) {
    const w = m[0]
    // Most words are Latin: skip the script test unless a character is at least in the kana range.
    if ((w.charCodeAt(0) >= 0x3040 || w.charCodeAt(w.length - 1) >= 0x3040) && UNSPACED.test(w)) {
      pushBigrams(w, out)
      continue
    }
    if (STOPWORDS.has(w)) continue
    out.push(stem(w))
  }
  return out
}

function pushBigrams(w: string, out: string[]): void {
  const chars = Array.from(w)
  if (chars.length === 1) {
    out.push(w)
    return
  }
  for (let i = 0; i + 1 < chars.length; i++) out.push(`${chars[i] ?? ''}${chars[i + 1] ?? ''}`)
}


/**
 * A term as the knowledge base's BM25 matches it: accents folded ("möngke" meets "mongke") and a final e dropped
 * ("renounce" meets "renounc", what the stemmer leaves of "renounced"; "produce" meets "producing"). Applied on top of
 * `analyze`, to BM25 only (search-index.ts `foldTerms`): the local embedder keeps hashing the unfolded terms, so its
 * id, and every vector already stored, stay valid, and BM25 is rebuilt from the stored text whenever an index loads, so
 * an upgrade needs no rebuild or re-upload. On SQuAD (bench/rag-eval.ts) it gained 0.8 points with the relevance gate.
 */
export function foldTerm(term: string): string {
  let t = term
  // Most terms are ASCII: the NFD round trip only for those that are not.
  for (let i = 0; i < t.length; i++)
    if (t.charCodeAt(i) >= 128) {
      t = t.normalize('NFD').replace(COMBINING, '')
      break
    }
  return t.length > 3 && t.charCodeAt(t.length - 1) === 101 /* e */ ? t.slice(0, -1) : t
}

const COMBINING = /\p{M}+/gu

/**
 * `foldTerm` of each term. Memoised per distinct term (at most 100k, then emptied and refilled), so a folded term is the
 * same string object each time and BM25's term lookup reuses its hash, as for `analyze`'s terms.
 */
export function foldTerms(terms: readonly string[]): string[] {
  const out = new Array<string>(terms.length)
  for (let i = 0; i < terms.length; i++) {
    const t = terms[i] as string
    let f = FOLDED.get(t)
    if (f === undefined) {
      if (FOLDED.size >= MAX_FOLDED) FOLDED.clear()
      f = foldTerm(t)
      FOLDED.set(t, f)
    }
    out[i] = f
  }
  return out
}

const FOLDED = new Map<string, string>()
const MAX_FOLDED = 100_000
