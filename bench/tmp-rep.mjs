import { encode } from 'gpt-tokenizer'
import { analyze } from '../dist/src/retrieval/analyzer.js'
import { Bm25Index } from '../dist/src/retrieval/bm25.js'
import { neighbourSmoothed } from '../dist/src/recall/neighbour-scores.js'
import { loadLocomo } from '../dist/bench/lib/locomo.js'
const B = 2300, K = 40
const convs = loadLocomo().map((c) => {
  const turns = c.sessions.flatMap((s, si) => s.turns.map((t) => ({ ...t, day: si })))
  const seqOf = new Map(turns.map((t, i) => [t.dia_id, i]))
  const bm = new Bm25Index({ maxDocs: 10000 }); turns.forEach((t, i) => bm.add(i, analyze(t.text)))
  const cost = turns.map((t) => encode(`x: ${t.text}\n`).length)
  const recent = new Set(); let r = 0; for (let i = turns.length - 1; i >= 0 && r < 450; i--) { recent.add(i); r += cost[i] }
  return { c, turns, seqOf, bm, cost, recent }
})
function run(cv, cfg) {
  const { c, turns, seqOf, bm, cost, recent } = cv
  let hit = 0, tot = 0
  for (const q of c.questions) {
    let ranked = neighbourSmoothed(bm.search(analyze(q.question), K * 4), cfg.nw, cfg.k ?? K)
    if (cfg.alpha) {
      ranked = ranked.map((h) => { const u = [h.label - 1, h.label, h.label + 1].filter((x) => x >= 0 && x < turns.length); const t = u.reduce((a, x) => a + cost[x], 0); return { label: h.label, score: h.score / Math.pow(t, cfg.alpha) } }).sort((a, b) => b.score - a.score)
    }
    const inBlock = new Set(); let used = 40; const perDay = new Map()
    let order = ranked.map((h) => h.label)
    if (cfg.dayPen) {
      // greedy: re-score by score * pen^(units already from that day)
      const pool = ranked.slice(); order = []
      while (pool.length) { let bi = 0, bs = -1; pool.forEach((h, i) => { const s = h.score * Math.pow(cfg.dayPen, perDay.get(turns[h.label].day) ?? 0); if (s > bs) { bs = s; bi = i } }); const h = pool.splice(bi, 1)[0]; order.push(h.label); perDay.set(turns[h.label].day, (perDay.get(turns[h.label].day) ?? 0) + 1) }
    }
    for (const s of order) { const unit = [s - 1, s, s + 1].filter((x) => x >= 0 && x < turns.length && !inBlock.has(x) && !recent.has(x)); const add = unit.reduce((a, x) => a + cost[x], 0) + 3; if (used + add > B) continue; used += add; unit.forEach((x) => inBlock.add(x)) }
    for (const e of q.evidence) { tot++; const s = seqOf.get(e); if (inBlock.has(s) || recent.has(s)) hit++ }
  }
  return [hit, tot]
}
const grid = JSON.parse(process.argv[2])
const res = grid.map((cfg) => ({ cfg, per: convs.map((cv) => run(cv, cfg)) }))
for (const r of res) { const h = r.per.reduce((a, p) => a + p[0], 0), t = r.per.reduce((a, p) => a + p[1], 0); console.log(JSON.stringify(r.cfg).padEnd(36), (100 * h / t).toFixed(1), r.per.map((p) => (100 * p[0] / p[1]).toFixed(1)).join(' ')) }
let H = 0, T = 0
for (let i = 0; i < 3; i++) { const best = res.reduce((a, b) => { const s = (x) => x.per.reduce((acc, p, j) => acc + (j === i ? 0 : p[0]), 0); return s(b) > s(a) ? b : a }); H += best.per[i][0]; T += best.per[i][1]; console.log('held', i, JSON.stringify(best.cfg), (100 * best.per[i][0] / best.per[i][1]).toFixed(1)) }
console.log('LOO', (100 * H / T).toFixed(1))
