/**
 * The generic namespace-keyed hybrid index (the engine the knowledge base and session recall share), driven by an
 * in-memory source standing in for LMDB: applying committed changes in version order, reloading after a missed
 * change, LRU eviction saving its graph, dropping a namespace, and the three ranking modes.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { LocalEmbedder } from '../src/retrieval/embedder.js'
import { SearchIndex, type IndexSource, type NamespaceMeta } from '../src/retrieval/search-index.js'

const embedder = new LocalEmbedder()

/** What LMDB would hold: per namespace, its meta and documents with vectors. */
class MemorySource implements IndexSource {
  readonly ns = new Map<string, { meta: NamespaceMeta; docs: Map<number, { text: string; vector: Float32Array }> }>()
  reads = 0

  meta(namespace: string): NamespaceMeta | undefined {
    return this.ns.get(namespace)?.meta
  }
  *documents(namespace: string) {
    this.reads++
    for (const [label, d] of this.ns.get(namespace)?.docs ?? []) yield { label, ref: ['msg', label], text: d.text }
  }
  *vectors(namespace: string) {
    for (const [label, d] of this.ns.get(namespace)?.docs ?? []) yield { label, vector: d.vector }
  }
  /** A committed write: returns what the owner passes to applyAdd. */
  async add(namespace: string, texts: string[]) {
    const entry = this.ns.get(namespace) ?? { meta: { embedderId: embedder.id, dimension: embedder.dimension, version: 0, count: 0, nextLabel: 0 }, docs: new Map() }
    this.ns.set(namespace, entry)
    const from = entry.meta.version
    const vectors = await embedder.embed(texts)
    const docs = texts.map((text, i) => ({ label: entry.meta.nextLabel + i, ref: ['msg', entry.meta.nextLabel + i], text, vector: vectors[i]! }))
    for (const d of docs) entry.docs.set(d.label, { text: d.text, vector: d.vector })
    entry.meta = { ...entry.meta, version: from + 1, count: entry.docs.size, nextLabel: entry.meta.nextLabel + texts.length }
    return { from, meta: entry.meta, docs }
  }
  remove(namespace: string, labels: number[]) {
    const entry = this.ns.get(namespace)!
    const from = entry.meta.version
    for (const l of labels) entry.docs.delete(l)
    entry.meta = { ...entry.meta, version: from + 1, count: entry.docs.size }
    return { from, meta: entry.meta }
  }
}

function setup(t: Test, maxLoaded = 8) {
  const dir = mkdtempSync(join(tmpdir(), 'rag-si-'))
  // Teardowns run last-registered first: close (which saves) before the directory goes.
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const source = new MemorySource()
  const saveErrors: unknown[] = []
  const index = new SearchIndex({ dir, source, embedder, maxLoaded, saveDelay: 60_000, onSaveError: (err) => saveErrors.push(err) })
  t.teardown(() => index.close())
  return { dir, source, index, saveErrors }
}

const labels = (hits: Array<{ label: number }>) => hits.map((h) => h.label)

t.test('changes applied after commit are searchable at once, in every mode, per namespace', async (t) => {
  const { source, index } = setup(t)
  index.load('s1')
  const a = await source.add('s1', ['My cat is called Pickles.', 'We talked about the weather in Lisbon.', 'The meeting moved to Thursday.'])
  index.applyAdd('s1', a.from, a.meta, a.docs)
  const b = await source.add('s2', ['Another session mentions Pickles the cat too.'])
  index.applyAdd('s2', b.from, b.meta, b.docs)
  for (const mode of ['hybrid', 'bm25', 'vector'] as const) {
    const hits = await index.search('s1', 'what is my cat called?', 1, mode)
    t.same(labels(hits), [0], `${mode}`)
    t.same(hits[0]?.ref, ['msg', 0], 'the owner’s reference comes back')
  }
  t.same(labels(await index.search('s2', 'Pickles', 5)), [0], 'namespaces are separate')
  const r = source.remove('s1', [0])
  index.applyRemove('s1', r.from, r.meta, [0])
  t.notOk(labels(await index.search('s1', 'cat Pickles', 5)).includes(0), 'removed')
  t.same(await index.search('empty', 'anything', 5), [])
})

t.test('a loaded namespace that missed a change reloads from the source', async (t) => {
  const { source, index } = setup(t)
  const a = await source.add('s', ['alpha document'])
  index.load('s')
  t.equal(source.reads, 1)
  // A commit whose apply never reached this index (say, another process or a lost race).
  await source.add('s', ['beta document'])
  const c = await source.add('s', ['gamma document'])
  index.applyAdd('s', c.from, c.meta, c.docs) // from-version 2, but the entry is at 1: dropped
  t.same(labels(await index.search('s', 'beta', 5, 'bm25')), [1], 'reloaded: the missed document is found')
  t.equal(source.reads, 2)
  index.applyAdd('s', a.from, a.meta, a.docs) // an old change arriving late is ignored
  t.equal(source.reads, 2)
  t.same(labels(await index.search('s', 'gamma', 5, 'bm25')), [2])
})

t.test('LRU: evicting a changed namespace saves its graph; reloading uses it; drop deletes it', async (t) => {
  const { dir, source, index } = setup(t, 2)
  for (const ns of ['n1', 'n2', 'n3']) {
    index.load(ns)
    const c = await source.add(ns, [`text of ${ns} about rivers`])
    index.applyAdd(ns, c.from, c.meta, c.docs)
  }
  const files = () => readdirSync(dir).filter((f) => f.endsWith('.hnsw'))
  t.equal(files().length, 1, 'n1 was evicted and saved')
  index.flush()
  t.equal(files().length, 3)
  t.same(labels(await index.search('n1', 'rivers', 1, 'vector')), [0], 'n1 reloads')
  index.drop('n1')
  t.equal(files().length, 2, 'dropping deletes the graph file')
})

t.test('a failed save is reported, not thrown (the graph is only a cache of LMDB)', async (t) => {
  const { dir, source, index, saveErrors } = setup(t)
  index.load('s')
  const c = await source.add('s', ['some text'])
  index.applyAdd('s', c.from, c.meta, c.docs)
  rmSync(dir, { recursive: true })
  writeFileSync(dir, 'a file where the directory was')
  index.flush()
  t.equal(saveErrors.length, 1)
  t.same(labels(await index.search('s', 'text', 1)), [0], 'search still works')
  rmSync(dir)
})

t.test('embedder check: refuses another embedder’s namespace, accepts an empty one', async (t) => {
  const { index } = setup(t)
  t.throws(() => index.checkEmbedder({ embedderId: 'openai-compatible:x', dimension: 1536, count: 3 }), { code: 'embedder_mismatch', status: 400 })
  t.throws(() => index.checkEmbedder({ embedderId: embedder.id, dimension: 999, count: 3 }), { code: 'embedder_mismatch' })
  index.checkEmbedder({ embedderId: 'openai-compatible:x', dimension: 1536, count: 0 })
  index.checkEmbedder(undefined)
  index.checkEmbedder({ embedderId: embedder.id, dimension: embedder.dimension, count: 3 })
})
