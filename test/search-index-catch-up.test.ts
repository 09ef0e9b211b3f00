/**
 * Two processes' indexes over one store (WORKERS, replicas on one DATA_DIR): one commits, the other sees it on its
 * next search, by applying the change log when it can and reloading when it cannot. The knowledge base over real
 * LMDB, twice on the same environment, stands in for the two processes; the shared-store e2e test runs them for real.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { KnowledgeBase } from '../src/knowledge/knowledge-base.js'
import { LocalEmbedder } from '../src/retrieval/embedder.js'
import { SearchIndex, type DocRef, type IndexSource, type NamespaceMeta } from '../src/retrieval/search-index.js'
import { openStore } from '../src/storage/store.js'

const embedder = new LocalEmbedder()

/** A committed store with a change log, counting whole-namespace reads. */
class LoggedSource implements IndexSource {
  meta_: NamespaceMeta | undefined
  readonly docs = new Map<number, { text: string; vector: Float32Array }>()
  readonly log = new Map<number, { add?: Array<[number, DocRef]>; remove?: number[] }>()
  fullReads = 0

  meta(): NamespaceMeta | undefined {
    return this.meta_
  }
  *documents() {
    this.fullReads++
    for (const [label, d] of this.docs) yield { label, ref: [label], text: d.text }
  }
  *vectors() {
    for (const [label, d] of this.docs) yield { label, vector: d.vector }
  }
  changes(_ns: string, from: number, to: number) {
    const out = []
    for (let v = from; v <= to; v++) {
      const e = this.log.get(v)
      if (e === undefined) return undefined
      out.push(e)
    }
    return out
  }
  document(_ns: string, ref: DocRef) {
    return this.docs.get(ref[0] as number)?.text
  }
  vector(_ns: string, label: number) {
    return this.docs.get(label)?.vector
  }
  async add(texts: string[], epoch = this.meta_?.epoch ?? 'e1') {
    const m = this.meta_ ?? { embedderId: embedder.id, dimension: embedder.dimension, version: 0, count: 0, nextLabel: 0, epoch }
    const vectors = await embedder.embed(texts)
    const labels = texts.map((_, i) => m.nextLabel + i)
    labels.forEach((l, i) => this.docs.set(l, { text: texts[i]!, vector: vectors[i]! }))
    this.meta_ = { ...m, version: m.version + 1, count: this.docs.size, nextLabel: m.nextLabel + texts.length }
    this.log.set(this.meta_.version, { add: labels.map((l) => [l, [l]]) })
    return labels
  }
  remove(labels: number[]) {
    for (const l of labels) this.docs.delete(l)
    this.meta_ = { ...this.meta_!, version: this.meta_!.version + 1, count: this.docs.size }
    this.log.set(this.meta_.version, { remove: labels })
  }
}

function twoProcesses(t: Test) {
  const dir = mkdtempSync(join(tmpdir(), 'catch-up-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const source = new LoggedSource()
  const mk = (name: string) => {
    const index = new SearchIndex({ dir: join(dir, name), source, embedder, saveDelay: 60_000 })
    t.teardown(() => index.close())
    return index
  }
  return { source, a: mk('a'), b: mk('b') }
}

// BM25 only: exact lexical expectations (a vector search returns the nearest documents whatever they say).
const labelsOf = async (index: SearchIndex, q: string) => (await index.search('ns', q, 5, 'bm25')).map((h) => h.label)

t.test('a loaded index behind the store applies the log: additions and removals, no reload', async (t) => {
  const { source, b } = twoProcesses(t)
  await source.add(['the harbour master keeps the tide tables'])
  t.same(await labelsOf(b, 'harbour master'), [0])
  const reads = source.fullReads
  const [lighthouse] = await source.add(['the lighthouse keeper is called Morwenna'])
  t.same(await labelsOf(b, 'lighthouse keeper Morwenna'), [lighthouse], 'found at once')
  const semantic = await b.search('ns', 'lighthouse keeper Morwenna', 1, 'vector')
  t.equal(semantic[0]?.label, lighthouse, 'and its vector is in the graph')
  source.remove([lighthouse!])
  t.notOk((await labelsOf(b, 'lighthouse keeper Morwenna')).includes(lighthouse!), 'removed: never returned again')
  t.equal(source.fullReads, reads, 'caught up from the log, the namespace was not reloaded')
})

t.test('a document added and removed before the catch-up is never indexed', async (t) => {
  const { source, b } = twoProcesses(t)
  await source.add(['first document about rivers'])
  await labelsOf(b, 'rivers')
  const [gone] = await source.add(['a short-lived note about glaciers'])
  source.remove([gone!])
  t.same(await labelsOf(b, 'glaciers'), [])
})

t.test('a log that no longer reaches back, or a new epoch, means a reload', async (t) => {
  const { source, b } = twoProcesses(t)
  await source.add(['one about deserts'])
  await labelsOf(b, 'deserts')
  await source.add(['two about oases'])
  source.log.delete(2)
  const reads = source.fullReads
  t.same(await labelsOf(b, 'oases'), [1])
  t.equal(source.fullReads, reads + 1, 'reloaded whole')

  // Deleted and recreated (a session deleted through another process and started again): versions restart.
  source.meta_ = undefined
  source.docs.clear()
  source.log.clear()
  await source.add(['a fresh start about volcanoes'], 'e2')
  await source.add(['and calderas'], 'e2')
  t.same(await labelsOf(b, 'deserts oases'), [], 'nothing of the old generation is searched')
  t.same(await labelsOf(b, 'volcanoes'), [0])
})

t.test('knowledge base: two instances on one LMDB see each other’s uploads and deletes at once', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'catch-up-kb-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const store = openStore({ dir })
  const kb = (name: string) =>
    new KnowledgeBase({ store, dataDir: join(dir, name), embedder, chunkTokens: 64, chunkOverlap: 8, maxChunksPerFile: 1000, clock: Date.now })
  const a = kb('a')
  const b = kb('b')
  t.teardown(async () => {
    await a.close()
    await b.close()
    await store.close()
  })
  const upload = (filename: string, text: string) => ({ filename, contentType: 'text/plain', bytes: Buffer.from(text), metadata: null })
  const first = await a.ingest('t', upload('rivers.txt', 'The river guide is called Tamsin. She knows every bend of the river.'))
  t.equal((await b.search('t', 'river guide', 1))[0]?.file_id, first.id)
  const second = await a.ingest('t', upload('mountains.txt', 'The mountain guide is called Eirlys. She climbs in every weather.'))
  t.equal((await b.search('t', 'mountain guide Eirlys', 1))[0]?.file_id, second.id, 'B sees A’s upload at once')
  t.ok(await b.delete('t', second.id))
  t.notOk((await a.search('t', 'mountain guide Eirlys', 5)).some((h) => h.file_id === second.id), 'A never returns B’s delete')
  const third = await b.ingest('t', upload('coast.txt', 'The coast guard is called Morwenna.'))
  t.equal((await a.search('t', 'coast guard Morwenna', 1))[0]?.file_id, third.id)
})
