/**
 * A retrieved chunk cut to what answers (src/knowledge/focus.ts, KnowledgeBase.focus): the sentence holding most of the
 * question's information and its neighbours, with the range and token count of what is left; a chunk with nothing to
 * cut (short, or sharing no word with the question) stays whole.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { countO200k } from '../src/context/token-count.js'
import { LocalEmbedder } from '../src/retrieval/embedder.js'
import { KnowledgeBase } from '../src/knowledge/knowledge-base.js'
import { FileRepo } from '../src/storage/file-repo.js'
import { openStore } from '../src/storage/store.js'

const SENTENCES = [
  'The harbour was dredged in the spring.',
  'Fishing boats moored along the eastern quay.',
  'The lighthouse keeper, Ada Brennan, logged every passing ship.',
  'Her logbooks are kept in the town museum.',
  'A new ferry route opened to the islands.',
  'Tourists arrived in growing numbers.',
  'The old customs house became a café.',
]

t.test('a chunk is cut to its best-matching sentence and one neighbour each side', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kb-focus-'))
  const store = openStore({ dir })
  const kb = new KnowledgeBase({ files: new FileRepo(store), dataDir: dir, embedder: new LocalEmbedder(), chunkTokens: 400, chunkOverlap: 0, maxChunksPerFile: 100, clock: () => 0, prepareInWorker: false })
  t.teardown(async () => {
    await kb.close()
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const text = SENTENCES.join(' ')
  await kb.ingest('t', { filename: 'harbour.txt', contentType: 'text/plain', bytes: Buffer.from(text), metadata: null })
  await kb.ingest('t', { filename: 'other.txt', contentType: 'text/plain', bytes: Buffer.from('Recipes for bread and cake.'), metadata: null })
  const query = 'Who was the keeper of the lighthouse?'
  const hits = (await kb.search('t', query, 2)).slice(0, 1)
  t.equal(hits[0]?.filename, 'harbour.txt')
  const [focused] = kb.focus('t', query, hits, 1)
  t.ok(focused?.focused)
  t.equal(focused?.text, SENTENCES.slice(1, 4).join(' '), 'the keeper sentence with the one before and the one after')
  t.equal(text.slice(focused?.char_start, focused?.char_end), focused?.text, 'its range in the file is what it says')
  t.equal(focused?.tokens, countO200k(focused?.text ?? ''))
  t.ok((focused?.tokens ?? 0) < (hits[0]?.tokens ?? 0) / 2)
  t.equal(kb.focus('t', query, hits, 0)[0]?.text, SENTENCES[2], 'no neighbours: the sentence alone')
  t.same(kb.focus('t', query, hits, 3), hits, 'nothing to cut: the chunk as it was')
  t.same(kb.focus('t', 'zebra migration', hits, 1), hits, 'no sentence holds a word of the question: unchanged')
})
