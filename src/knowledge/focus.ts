/**
 * The part of a retrieved chunk that answers: the sentence holding most of the query's information (the idf of the
 * distinct query terms it holds) and its neighbours. A chunk is ~190 tokens; its best sentence with one neighbour each
 * side is ~60–90. The relevance gate sends this part instead of the whole chunk where a question is only marginally
 * relevant (relevance.ts `focus`), which is where most of the tokens spent on questions no file answers go.
 *
 * Measured on SQuAD (bench/rag-eval.ts, every answerable question against its own paragraph): the sentence holding the
 * answer is the best-matching one for 81.9% of questions, within one sentence of it for 92.4%.
 *
 * Cost: each cut excerpt's sentences are analyzed once more and the part kept is counted (o200k): 50–60 µs CPU per
 * SQuAD paragraph, warm, at load 6–10 (timed over the 646 paragraphs); on SQuAD's questions 1.8
 * excerpts a request are cut, 0.1–0.2 ms a request, whatever the number of chunks in the knowledge base (only the hits
 * that go into the prompt are read).
 */
import { sentences } from '../ingest/chunker.js'

export interface FocusQuery {
  /** The query's terms (as BM25 analyzes them) with their idf. */
  weights: ReadonlyMap<string, number>
  /** BM25's analysis of a text (search-index.ts `queryWeights`). */
  terms: (text: string) => readonly string[]
}

/**
 * The range of `text` (character offsets) made of its best-matching sentence and up to `neighbours` sentences either
 * side; undefined when that is the whole text or no sentence holds a query term (nothing to cut).
 */
export function focusSpan(text: string, query: FocusQuery, neighbours: number): [number, number] | undefined {
  if (query.weights.size === 0) return undefined
  // Sentences as the chunker cut them.
  const spans = sentences(text, 0, text.length)
  if (spans.length <= 1 + 2 * neighbours) return undefined
  let best = -1
  let bestScore = 0
  // Each query term counts once per sentence: the sentence it was last counted in, instead of a Set per sentence.
  const seen = new Map<string, number>()
  spans.forEach(([s, e], i) => {
    let score = 0
    for (const t of query.terms(text.slice(s, e))) {
      const w = query.weights.get(t)
      if (w === undefined || seen.get(t) === i) continue
      seen.set(t, i)
      score += w
    }
    // Ties: the earlier sentence (a passage usually names its subject first).
    if (score > bestScore) {
      best = i
      bestScore = score
    }
  })
  if (best < 0) return undefined
  const from = Math.max(0, best - neighbours)
  const to = Math.min(spans.length - 1, best + neighbours)
  return [(spans[from] as [number, number])[0], (spans[to] as [number, number])[1]]
}
