/**
 * What a search hit's `relevance` measures (the relevance gate's input, src/knowledge/relevance.ts): the share of the
 * query's information the chunk holds, words no file has counting fully; with a learned embedder its cosine
 * similarity counts too, so a passage worded apart from the question is not gated out.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { LocalEmbedder, type Embedder } from '../src/retrieval/embedder.js'
import { KnowledgeBase } from '../src/knowledge/knowledge-base.js'
import { relevantHits } from '../src/knowledge/relevance.js'
import { FileRepo } from '../src/storage/file-repo.js'
import { openStore } from '../src/storage/store.js'

async function kbWith(t: Test, embedder: Embedder, files: Record<string, string>, opts: { phraseWeight?: number } = {}): Promise<KnowledgeBase> {
  const dir = mkdtempSync(join(tmpdir(), 'kb-relevance-'))
  const store = openStore({ dir })
  const kb = new KnowledgeBase({ files: new FileRepo(store), dataDir: dir, embedder, chunkTokens: 64, chunkOverlap: 8, maxChunksPerFile: 100, clock: () => 0, ...opts })
  t.teardown(async () => {
    await kb.close()
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  })
  for (const [filename, content] of Object.entries(files))
    await kb.ingest('t', { filename, contentType: 'text/plain', bytes: Buffer.from(content), metadata: null })
  return kb
}

const FILES = {
  'pets.txt': 'Dogs need a walk twice a day and fresh water.',
  'trains.txt': 'The night train to Vienna leaves from platform four.',
}

t.test('local embedder: the share of the query the chunk holds', async (t) => {
  const kb = await kbWith(t, new LocalEmbedder(), FILES)
  const [top] = await kb.search('t', 'night train Vienna', 5)
  t.equal(top?.filename, 'trains.txt')
  t.equal(top?.relevance, 1, 'every query word is in the chunk')
  const unknown = await kb.search('t', 'night train to Zagreb', 5)
  t.ok((unknown[0]?.relevance ?? 1) < 0.7, `a word no file has weighs fully: ${unknown[0]?.relevance}`)
  t.ok(unknown[0]!.relevance > 0.3)
  const gated = relevantHits(await kb.search('t', 'Zagreb Ljubljana Trieste train', 5), { minRelevance: 0.3, fullRelevance: 0.5 })
  t.same([gated.hits.length, gated.reason], [0, 'not_relevant'], 'mostly unknown words: nothing relevant')
})

t.test('word pairs: a chunk that repeats the question\'s phrasing is more relevant than one holding its words apart', async (t) => {
  const files = {
    'timetable.txt': 'The night train to Vienna leaves from platform four.',
    'diary.txt': 'Vienna was cold. We took the train home, and slept through the night.',
  }
  const kb = await kbWith(t, new LocalEmbedder(), files)
  const hits = await kb.search('t', 'night train Vienna', 5)
  const of = (name: string): number | undefined => hits.find((h) => h.filename === name)?.relevance
  t.equal(of('timetable.txt'), 1, 'night→train and train→vienna side by side (stopwords are not terms)')
  // Every query word is in the diary too, no pair side by side: (1 + 0.5 × 0) / 1.5 at the default weight 0.5.
  t.ok(Math.abs((of('diary.txt') ?? 0) - 1 / 1.5) < 1e-3, `diary: ${of('diary.txt')}`)
  const plain = await kbWith(t, new LocalEmbedder(), files, { phraseWeight: 0 })
  t.same((await plain.search('t', 'night train Vienna', 5)).map((h) => h.relevance), [1, 1], 'phraseWeight 0: the terms share alone')
})

t.test('learned embedder: cosine similarity counts, so paraphrases pass the gate', async (t) => {
  // Texts about dogs (either wording) share one direction; everything else another.
  const vec = (text: string): Float32Array => (/dog|pupp|canine/i.test(text) ? new Float32Array([1, 0, 0]) : new Float32Array([0, 0.6, 0.8]))
  const learned: Embedder = { id: 'fake-learned', dimension: 3, fusionWeight: 1, embed: (texts) => Promise.resolve(texts.map(vec)) }
  const kb = await kbWith(t, learned, FILES)
  const hits = await kb.search('t', 'how often should a puppy go out', 5)
  const pets = hits.find((h) => h.filename === 'pets.txt')
  t.ok(pets !== undefined && pets.relevance > 0.99, `no shared word, cosine 1: ${pets?.relevance}`)
  t.same(relevantHits(hits, { minRelevance: 0.3, fullRelevance: 0.5 }).reason, undefined)
})

t.test('score ratio: a question one passage answers gets that passage, a vague one several', async (t) => {
  // Each paragraph is a chunk of its own (64-token chunks, paragraphs of 40-odd tokens). Every one mentions refunds;
  // only the first is about gift cards.
  const kb = await kbWith(t, new LocalEmbedder(), {
    'refunds.txt': [
      'Gift card refunds: a gift card bought by mistake is refunded to the original payment method within five working days, provided the card was never used. A card that was partly spent cannot be refunded, but its balance never expires.',
      'Refunds for shoes are paid once the returned pair reaches our warehouse in its box, unworn, with the receipt, usually within two weeks of posting it back. Sale items can be exchanged for another size but are not refunded.',
      'Refunds for furniture are paid after a courier collects the item from your home; the collection is free within thirty days of the delivery date. Assembled items must be taken apart again before the courier arrives.',
      'Refunds for electronics are paid after our technicians check the returned device and confirm that it works and that every accessory is included. Opened software, headphones and memory sticks are not taken back.',
    ].join('\n\n'),
  })
  const gate = { minRelevance: 0.3, fullRelevance: 0.5, hitFloor: 0.2 }
  const specific = await kb.search('t', 'are gift card refunds paid within days?', 8)
  t.ok(specific.length >= 4, 'the ranking holds every paragraph (they all mention refunds)')
  t.ok(specific.every((h) => h.lexical !== undefined), 'each ranked chunk carries its BM25 score')
  t.ok(relevantHits(specific, gate).hits.length >= 2, 'without the ratio, chunks sharing "refunds paid within days" go in too')
  const kept = relevantHits(specific, { ...gate, scoreRatio: 0.5 }).hits
  t.same(kept.map((h) => h.text.slice(0, 10)), ['Gift card '], 'with it, the passage that stands out goes in alone')
  const vague = await kb.search('t', 'when are refunds paid?', 8)
  t.ok(relevantHits(vague, { ...gate, scoreRatio: 0.5 }).hits.length >= 3, 'a question every paragraph answers as well gets several')
})

t.test('score ratio: a chunk only the vectors found is held to the floor alone', (t) => {
  const hits = [
    { relevance: 0.9, lexical: 10 },
    { relevance: 0.6, lexical: 4 },
    { relevance: 0.7 }, // a learned embedder's paraphrase: no BM25 score
    { relevance: 0.1 },
  ]
  t.same(relevantHits(hits, { minRelevance: 0.3, fullRelevance: 0.5, hitFloor: 0.2, scoreRatio: 0.5 }).hits, [hits[0], hits[2]])
  t.end()
})

t.test('a marginally relevant question gets its best chunk and the few scoring near it; which are to be focused', (t) => {
  const hits = [
    { relevance: 0.4, lexical: 10 },
    { relevance: 0.35, lexical: 3 }, // far behind the best: left out
    { relevance: 0.4, lexical: 7 },
    { relevance: 0.3, lexical: 6 },
  ]
  const gate = { minRelevance: 0.3, fullRelevance: 0.5, hitFloor: 0.2, scoreRatio: 0.5 }
  t.same(relevantHits(hits, gate).hits, [hits[0]], 'by default the best chunk alone')
  t.same(relevantHits(hits, { ...gate, marginalHits: 3 }).hits, [hits[0], hits[2], hits[3]])
  t.same(relevantHits(hits, { ...gate, marginalHits: 3 }).focusFrom, 3, 'without focusNeighbours nothing is cut')
  t.same(relevantHits(hits, { ...gate, marginalHits: 2, focusNeighbours: 1 }).focusFrom, 0, 'below the full threshold every excerpt is cut')
  const clear = [{ relevance: 0.9, lexical: 10 }, { relevance: 0.8, lexical: 8 }]
  t.same(relevantHits(clear, { ...gate, focusNeighbours: 1 }), { hits: clear, best: 0.9, reason: undefined, focusFrom: 1 }, 'above it, the best stays whole')
  t.end()
})
