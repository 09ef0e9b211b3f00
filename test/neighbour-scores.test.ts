/**
 * Neighbour-smoothed ranking of a session's turns (src/recall/neighbour-scores.ts): what a search ranks, given BM25 hits
 * by seq.
 */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { neighbourSmoothed } from '../src/recall/neighbour-scores.js'

const hit = (label: number, score: number) => ({ label, score })

t.test('weight 0 keeps the ranking as it is, cut to k', async (t) => {
  const hits = [hit(9, 5), hit(2, 3), hit(40, 1)]
  t.same(neighbourSmoothed(hits, 0, 2), [hit(9, 5), hit(2, 3)])
})

t.test('a turn on the topic of its neighbours outranks a lone match of the same score', async (t) => {
  // Seq 11 matches alone; seq 21 matches as well as its two neighbours (the question and the reply around it).
  const hits = [hit(11, 2), hit(20, 2), hit(21, 2), hit(22, 2)]
  const ranked = neighbourSmoothed(hits, 0.5, 10)
  t.equal(ranked[0]?.label, 21, 'the middle of a matching stretch first')
  t.equal(ranked[0]?.score, 4, 'its own score plus half of each neighbour’s')
  t.ok(ranked.findIndex((h) => h.label === 11) > ranked.findIndex((h) => h.label === 20), 'the lone match after the stretch')
})

t.test('a turn that matches nothing becomes a candidate next to one that does, never at a negative seq', async (t) => {
  const ranked = neighbourSmoothed([hit(0, 4), hit(7, 1)], 0.25, 10)
  t.same(
    ranked.map((h) => h.label),
    [0, 1, 7, 6, 8],
    'the hit; its neighbour (a quarter of 4) ties with the weaker hit, older first; then that hit’s neighbours',
  )
  t.equal(ranked.find((h) => h.label === 1)?.score, 1)
})

t.test('with weight w, every returned score is own + w × neighbours, best first, at most k', async (t) => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.record({ label: fc.nat(60), score: fc.double({ min: 0.01, max: 20, noNaN: true }) }), { selector: (h) => h.label, maxLength: 30 }),
      fc.double({ min: 0, max: 1, noNaN: true }),
      fc.integer({ min: 1, max: 50 }),
      (unsorted, w, k) => {
        const hits = [...unsorted].sort((a, b) => b.score - a.score)
        const own = new Map(hits.map((h) => [h.label, h.score]))
        const out = neighbourSmoothed(hits, w, k)
        if (out.length > k) return false
        for (let i = 1; i < out.length; i++) if ((out[i] as { score: number }).score > (out[i - 1] as { score: number }).score) return false
        if (w === 0) return true
        return out.every((h) => Math.abs(h.score - ((own.get(h.label) ?? 0) + w * ((own.get(h.label - 1) ?? 0) + (own.get(h.label + 1) ?? 0)))) < 1e-9)
      },
    ),
  )
})
