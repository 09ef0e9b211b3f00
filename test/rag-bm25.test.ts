/**
 * The analyzer (terms shared by BM25 and the local embedder) and the incremental BM25 index: ranking, removal,
 * compaction after many removals, the document bound; and reciprocal rank fusion.
 */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { analyze, analyzeReference, stem } from '../src/retrieval/analyzer.js'
import { Bm25Index } from '../src/retrieval/bm25.js'
import { reciprocalRankFusion } from '../src/retrieval/fusion.js'

t.test('analyze: lowercase words, stopwords out, light stemming, CJK bigrams', async (t) => {
  t.same(analyze('The Normans were conquering England in 1066!'), ['norman', 'conquer', 'england', '1066'])
  t.same(analyze('Café crème, naïve'), ['café', 'crème', 'naïve'], 'accented words stay whole')
  t.same(analyze('東京都'), ['東京', '京都'], 'unspaced scripts become bigrams')
  t.equal(stem('studies'), 'study')
  t.equal(stem('classes'), 'class')
  t.equal(stem('glass'), 'glass')
  t.equal(stem('running'), 'run')
  t.equal(stem('bus'), 'bus')
})

t.test('property: analyze equals its definition (lowercase the whole text, take its words) on any text', async (t) => {
  const fragment = fc.constantFrom(
    'The', 'normans', 'RUNNING', 'studies', 'a', 'the', 'of', 'Café', 'CRÈME', 'naïve', 'ΟΔΟΣ', 'Σ', 'ς', 'İstanbul', 'ǅ',
    '東京都', 'ひらがな', '한국', 'don’t', "it's", '1066', 'x1y2', '𐐀𐐨', 'é', '\u0301', '—', '’', '.', ',', "'", ' ', ' ', '\n', '\u00a0',
    'w'.repeat(40),
  )
  await fc.assert(
    fc.property(fc.array(fragment, { maxLength: 60 }), (parts) => {
      const text = parts.join('')
      return JSON.stringify(analyze(text)) === JSON.stringify(analyzeReference(text))
    }),
    { numRuns: 2000 },
  )
  await fc.assert(
    fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (text) => JSON.stringify(analyze(text)) === JSON.stringify(analyzeReference(text))),
    { numRuns: 500 },
  )
  t.same(analyze('The the THE'), [], 'stopwords whatever their case, also when remembered')
  t.same(analyze('Runs runs'), ['run', 'run'])
})

const docs: Record<number, string> = {
  1: 'The Norman conquest of England began in 1066 under William.',
  2: 'Normandy is a region in northern France.',
  3: 'Photosynthesis converts light into chemical energy in plants.',
  4: 'William the Conqueror was crowned king of England.',
}

function build(): Bm25Index {
  const idx = new Bm25Index({ maxDocs: 100 })
  for (const [label, text] of Object.entries(docs)) idx.add(Number(label), analyze(text))
  return idx
}

t.test('ranks the documents that share rare query terms first', async (t) => {
  const idx = build()
  const hits = idx.search(analyze('When did the Normans conquer England?'), 10)
  t.equal(hits[0]?.label, 1)
  t.notOk(hits.some((h) => h.label === 3), 'a document sharing no term is not returned')
  t.ok(hits.every((h, i) => i === 0 || (hits[i - 1]?.score ?? 0) >= h.score), 'best first')
  t.same(idx.search(analyze('photosynthesis'), 1).map((h) => h.label), [3])
  t.same(idx.search(analyze('the of and'), 5), [], 'stopword-only query finds nothing')
  t.same(idx.search(analyze('zzz'), 5), [])
})

t.test('removed documents are never returned; re-adding replaces', async (t) => {
  const idx = build()
  t.equal(idx.remove(1), true)
  t.equal(idx.remove(1), false)
  t.equal(idx.size, 3)
  t.notOk(idx.search(analyze('Norman conquest 1066'), 10).some((h) => h.label === 1))
  idx.add(4, analyze('Completely different text about gardening.'))
  t.equal(idx.size, 3)
  t.same(idx.search(analyze('gardening'), 5).map((h) => h.label), [4])
  t.notOk(idx.search(analyze('crowned king'), 5).some((h) => h.label === 4), 'old text of label 4 is gone')
})

t.test('compaction after many removals keeps results identical', async (t) => {
  const idx = new Bm25Index({ maxDocs: 10_000 })
  for (let i = 0; i < 3000; i++) idx.add(i, analyze(`item ${i} colour ${i % 10 === 0 ? 'crimson' : 'blue'} shape ${i % 3}`))
  const before = idx.search(analyze('crimson'), 1000).filter((h) => h.label >= 2500)
  for (let i = 0; i < 2500; i++) idx.remove(i) // crosses the compaction threshold
  t.equal(idx.size, 500)
  const after = idx.search(analyze('crimson'), 1000)
  t.same(after.map((h) => h.label).sort((a, b) => a - b), before.map((h) => h.label).sort((a, b) => a - b))
  t.ok(after.every((h) => h.label >= 2500))
  idx.add(99_999, analyze('crimson crimson'))
  t.equal(idx.search(analyze('crimson'), 1)[0]?.label, 99_999, 'adds still work after compaction')
})

t.test('proximity: query terms close together outrank the same terms far apart', async (t) => {
  const filler = Array.from({ length: 20 }, (_, i) => `filler${i}`).join(' ')
  const near = `harbour crane collapsed ${filler}`
  const far = `harbour ${filler} crane ${filler.split(' ').reverse().join(' ')} collapsed`
  for (const proximity of [1, 0]) {
    const idx = new Bm25Index({ maxDocs: 10, proximity })
    idx.add(1, analyze(far))
    idx.add(2, analyze(`${near} ${filler}`)) // same length as `far`
    idx.add(3, analyze('unrelated text entirely'))
    const hits = idx.search(analyze('harbour crane collapsed'), 2)
    if (proximity) t.same(hits.map((h) => h.label), [2, 1], 'adjacent terms first')
    else t.equal(hits[0]?.score, hits[1]?.score, 'without proximity plain BM25 ties them')
  }
})

t.test('relevance: the query terms a document holds, and with phraseWeight its word pairs side by side', async (t) => {
  const idx = new Bm25Index({ maxDocs: 10 })
  idx.add(1, analyze('the harbour crane collapsed on monday'))
  idx.add(2, analyze('a crane flew over the harbour, and the roof collapsed'))
  idx.add(3, analyze('unrelated text entirely'))
  const q = analyze('harbour crane collapsed')
  t.same(idx.relevance(q, [1, 2, 3]), [1, 1, 0], 'terms alone: both documents hold every query term')
  const [phrase, scattered, none] = idx.relevance(q, [1, 2, 3], 0.5)
  t.equal(phrase, 1, 'both pairs found side by side')
  // Pairs harbour→crane and crane→collapsed, neither adjacent in document 2: (1 + 0.5 × 0) / 1.5.
  t.ok(Math.abs((scattered as number) - 1 / 1.5) < 1e-6, `scattered words: ${scattered}`)
  t.equal(none, 0)
  const [reversed] = idx.relevance(analyze('crane harbour'), [1], 0.5)
  t.ok(Math.abs((reversed as number) - 1 / 1.5) < 1e-6, `a pair counts in the query's order only: ${reversed}`)
  t.same(idx.relevance(analyze('crane'), [1, 2], 0.5), [1, 1], 'one term: no pairs, its terms share')
  // A pair with a word no document has weighs in the total and is never found.
  const [unknown] = idx.relevance(analyze('harbour crane zeppelin'), [1], 0.5)
  const [unknownTerms] = idx.relevance(analyze('harbour crane zeppelin'), [1])
  t.ok((unknown as number) < (unknownTerms as number) && (unknown as number) > 0, `${unknown} < ${unknownTerms}`)
})

t.test('the document bound is enforced', async (t) => {
  const idx = new Bm25Index({ maxDocs: 2 })
  idx.add(1, ['a'])
  idx.add(2, ['b'])
  t.throws(() => idx.add(3, ['c']), RangeError)
  idx.remove(1)
  idx.add(3, ['c'])
  t.equal(idx.size, 2)
})

t.test('reciprocal rank fusion rewards agreement and honours k and weights', async (t) => {
  const a = [{ label: 1, score: 9 }, { label: 2, score: 5 }, { label: 3, score: 1 }]
  const b = [{ label: 2, score: 0.9 }, { label: 3, score: 0.8 }]
  const fused = reciprocalRankFusion([a, b], { k: 60 })
  t.same(fused.map((h) => h.label), [2, 3, 1], 'in both lists beats first in one')
  t.equal(fused[0]?.score, 1 / 62 + 1 / 61)
  const weighted = reciprocalRankFusion([a, b], { k: 0, weights: [1, 0.1] })
  t.equal(weighted[0]?.label, 1, 'a down-weighted ranking counts less')
  t.throws(() => reciprocalRankFusion([a], { k: -1 }), RangeError)
})

t.test('property: MaxScore pruning returns exactly what scoring every posting returns', async (t) => {
  // A Zipf-skewed vocabulary, so common terms have posting lists long enough to be pruned.
  let seed = 7
  const rand = (): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff
    return seed / 0x80000000
  }
  const vocabulary = Array.from({ length: 400 }, (_, i) => `w${i}`)
  const word = (): string => vocabulary[Math.min(vocabulary.length - 1, Math.floor(Math.pow(rand(), 2.5) * vocabulary.length))] as string
  const pruned = new Bm25Index({ maxDocs: 10_000 })
  const exhaustive = new Bm25Index({ maxDocs: 10_000, prune: false })
  for (let d = 0; d < 4000; d++) {
    // Some short documents repeat a common word: they can outrank documents holding a rare term, which is what a wrong
    // bound would get wrong.
    const terms = rand() < 0.2 ? Array.from({ length: 3 + Math.floor(rand() * 20) }, () => vocabulary[Math.floor(rand() * 20)] as string) : Array.from({ length: 10 + Math.floor(rand() * 60) }, word)
    pruned.add(d, terms)
    exhaustive.add(d, terms)
  }
  for (let d = 0; d < 4000; d += 7) {
    pruned.remove(d)
    exhaustive.remove(d)
  }
  const query = fc.array(fc.oneof(fc.constantFrom(...vocabulary.slice(0, 20)), fc.constantFrom(...vocabulary)), { minLength: 1, maxLength: 12 })
  fc.assert(
    fc.property(query, fc.constantFrom(1, 5, 8, 60), (q, k) => JSON.stringify(pruned.search(q, k)) === JSON.stringify(exhaustive.search(q, k))),
    { numRuns: 300, seed: 20261121 },
  )
  t.ok(pruned.prunedSearches > 50, `the shortcut was taken (${pruned.prunedSearches} of 300+ searches)`)
  t.equal(exhaustive.prunedSearches, 0)
})
