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

async function kbWith(t: Test, embedder: Embedder, files: Record<string, string>): Promise<KnowledgeBase> {
  const dir = mkdtempSync(join(tmpdir(), 'kb-relevance-'))
  const store = openStore({ dir })
  const kb = new KnowledgeBase({ files: new FileRepo(store), dataDir: dir, embedder, chunkTokens: 64, chunkOverlap: 8, maxChunksPerFile: 100, clock: () => 0 })
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
