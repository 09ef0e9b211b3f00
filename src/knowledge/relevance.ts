/**
 * Which retrieved chunks are relevant enough to go into the prompt. Retrieval costs the caller tokens on every request,
 * so a question no file answers ("hi", "thanks", or a question about something the files never mention) should add
 * nothing, even though a ranking always has a best hit.
 *
 * "Relevant" is measured per chunk as the share of the query's information it holds (Bm25Index.relevance): the idf of
 * the distinct query terms found in the chunk (with its file name and headings) over the idf of all of them, a term no
 * file has counting at the highest idf, blended at `DEFAULT_PHRASE_WEIGHT` with the share of the query's consecutive
 * word pairs the chunk has side by side (on SQuAD's halves it separated answerable from unanswerable questions better
 * both ways; with it the gate's thresholds moved down, see bench/rag-eval.ts's third round). A query whose best chunk
 * holds less than `minRelevance` of it retrieves nothing; one whose best chunk holds less than `fullRelevance` gets
 * that chunk alone (a near miss costs one chunk, not the whole budget); above that, the ranked chunks go in as before,
 * within the budget. With a learned embedder a chunk's cosine similarity to the query counts when higher
 * (knowledge-base.ts), as recall's similarity floor does.
 *
 * How many: above `fullRelevance`, a question does not get a fixed number of chunks but those whose BM25 score is at
 * least `scoreRatio` of the best one's. A question one passage answers stands out of its ranking (its best chunk far
 * ahead) and gets that passage alone; a vague one, whose ranking is flat, gets several. On SQuAD (bench/rag-eval.ts)
 * a ratio of 0.5 cut the tokens retrieved per answerable question from 797 to 517 with the same hits (91.2%).
 *
 * Marginal questions and focus: below `fullRelevance` a question's best chunk is often not the one that answers (its
 * wording differs from the passage's), so up to `marginalHits` chunks near the best go in, each cut to its
 * best-matching sentences (focus.ts) so that a question no file answers, which mostly lands here, costs ~70 tokens an
 * excerpt rather than ~200. Above it the best chunk stays whole and the rest are cut the same way. On SQuAD this kept
 * the hits (91.8% all data) at 340 retrieved tokens instead of 516, and the no-answer requests at 55 / 97 tokens on the
 * two halves instead of 79 / 130; with word pairs in relevance and the thresholds tuned again, 93.1% at 428 tokens,
 * no-answer 59 / 99 (bench/rag-eval.ts header: how they were chosen, and the held-out figures).
 *
 * Chosen with bench/rag-eval.ts --precision (SQuAD, half the articles uploaded, the other half's questions and LoCoMo
 * chit-chat as the questions no file answers; tuned on one half, measured on the other): its header has the figures.
 */

export interface RelevanceGate {
  /** Below this best-chunk relevance nothing is retrieved. */
  minRelevance: number
  /** Below this (and at least `minRelevance`) only the best chunk is retrieved. */
  fullRelevance: number
  /**
   * Above `fullRelevance`, a chunk goes in only when its own relevance is at least this: the ranking's tail (chunks
   * the vector side brought that share little or nothing with the question) stays out. Default 0: every ranked chunk.
   */
  hitFloor?: number
  /**
   * Above `fullRelevance`, a chunk the lexical ranking scored goes in only when its BM25 score is at least this share of
   * the best such score among the hits: the ranking's flat tail stays out when one passage stands out. A chunk only the
   * vectors found (no BM25 score: a learned embedder's paraphrase) is held to `hitFloor` alone. Default 0: every
   * ranked chunk.
   */
  scoreRatio?: number
  /**
   * Below `fullRelevance` (a question the files answer only in part, or not at all), how many chunks go in: the best
   * one, then the next ones whose BM25 score is at least `scoreRatio` of the best. Default 1.
   */
  marginalHits?: number
  /**
   * Sentences kept either side of an excerpt's best-matching sentence when it is cut to what answers (focus.ts): every
   * excerpt below `fullRelevance`, every one after the first above it (the best chunk stays whole). Undefined or
   * negative: no excerpt is cut.
   */
  focusNeighbours?: number
}

/** A chunk's relevance blends in the query's word pairs found side by side at this weight (Bm25Index.relevance). */
export const DEFAULT_PHRASE_WEIGHT = 0.5

export const DEFAULT_RELEVANCE_GATE: RelevanceGate = { minRelevance: 0.25, fullRelevance: 0.3, hitFloor: 0.2, scoreRatio: 0.5, marginalHits: 2, focusNeighbours: 1 }

/** Why a request's prompt got no retrieved chunks (`_metadata.rag.reason`); null when it got some. */
export type NotRetrieved =
  | 'disabled' // useRAG false
  | 'empty_query' // ragQuery "" (or no user message to search with)
  | 'small_talk' // the turn asks nothing to look up: a greeting, thanks, "ok" (chat/small-talk.ts)
  | 'no_files' // the caller has no files
  | 'no_match' // no chunk shares a word with the query
  | 'not_relevant' // the best chunk holds less than minRelevance of the query
  | 'no_room' // relevant chunks were found but none fitted the window
  | 'in_prompt' // every relevant chunk is from a file the prompt quotes whole (a part that named it by id, in the request or a history turn sent)

/**
 * `hits` best first, each with its relevance; returns those that go on to packing and, when none, why. `focusFrom`:
 * the returned hits from this index on are to be cut to their best-matching sentences (`gate.focusNeighbours` either
 * side, KnowledgeBase.focus); `hits.length` when none is.
 */
export function relevantHits<H extends { relevance: number; lexical?: number | undefined }>(
  hits: readonly H[],
  gate: RelevanceGate,
): { hits: H[]; best: number; reason: 'no_match' | 'not_relevant' | undefined; focusFrom: number } {
  if (hits.length === 0) return { hits: [], best: 0, reason: 'no_match', focusFrom: 0 }
  let best = 0
  for (const h of hits) if (h.relevance > best) best = h.relevance
  if (best < gate.minRelevance) return { hits: [], best, reason: 'not_relevant', focusFrom: 0 }
  const focus = (gate.focusNeighbours ?? -1) >= 0
  const ratio = gate.scoreRatio ?? 0
  let bestLexical = 0
  if (ratio > 0) for (const h of hits) if (h.lexical !== undefined && h.lexical > bestLexical) bestLexical = h.lexical
  const cut = ratio * bestLexical
  const near = (h: H): boolean => h.lexical === undefined || h.lexical >= cut
  if (best < gate.fullRelevance) {
    const n = Math.max(1, gate.marginalHits ?? 1)
    const out = hits.slice(0, 1)
    for (let i = 1; i < hits.length && out.length < n; i++) if (near(hits[i] as H)) out.push(hits[i] as H)
    return { hits: out, best, reason: undefined, focusFrom: focus ? 0 : out.length }
  }
  const floor = gate.hitFloor ?? 0
  const out = floor <= 0 && cut <= 0 ? hits.slice() : hits.filter((h) => h.relevance >= floor && near(h))
  return { hits: out, best, reason: undefined, focusFrom: focus ? Math.min(1, out.length) : out.length }
}
