/**
 * Scores a turn with its neighbours': a turn's relevance is its own lexical score plus `weight` times the scores of
 * the turns just before and after it. In conversation the words a question uses are often in the turn next to the
 * answer (the question that prompted it, the remark it answers), and a turn between two matching ones is usually on
 * the topic even when it shares no word with the query. Turns that match nothing themselves but sit next to a match
 * become candidates too.
 *
 * Measured on LoCoMo (bench/memory-eval.ts header, 4,096-token window): evidence turns in the prompt 80.3% at weight 0,
 * 81.3% at 0.2, 81.1% at 0.4, 81.9% at 0.5, 81.1% at 0.6; 0.2–0.5 better than 0 on at least two of the three
 * conversations and worse on none.
 */
import type { ScoredLabel } from '../retrieval/bm25.js'

/**
 * `hits` are (seq, score) best first, seqs consecutive within the session; returns the `k` best seqs by smoothed score,
 * best first (ties: older first). Weight 0 returns the hits as they are.
 */
export function neighbourSmoothed(hits: readonly ScoredLabel[], weight: number, k: number): ScoredLabel[] {
  if (weight <= 0 || hits.length === 0) return hits.slice(0, k)
  const own = new Map<number, number>()
  for (const h of hits) own.set(h.label, h.score)
  const smoothed = new Map<number, number>()
  for (const h of hits)
    for (const seq of [h.label - 1, h.label, h.label + 1]) {
      if (seq < 0 || smoothed.has(seq)) continue
      smoothed.set(seq, (own.get(seq) ?? 0) + weight * ((own.get(seq - 1) ?? 0) + (own.get(seq + 1) ?? 0)))
    }
  const out: ScoredLabel[] = []
  for (const [label, score] of smoothed) out.push({ label, score })
  return out.sort((a, b) => b.score - a.score || a.label - b.label).slice(0, k)
}
