/**
 * The generic namespace-keyed hybrid index (the engine the knowledge base and session recall share), driven by an
 * in-memory source standing in for LMDB: applying committed changes in version order, reloading after a missed
 * change, LRU eviction saving its graph, dropping a namespace, and the three ranking modes.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { LocalEmbedder } from '../src/retrieval/embedder.js'
import { ANALYZER_ID, analyze } from '../src/retrieval/analyzer.js'
import { codeTerms } from '../src/retrieval/chunk-terms.js'
import { SearchIndex, type IndexSource, type NamespaceMeta } from '../src/retrieval/search-index.js'
import { VectorIndex } from '../src/retrieval/vector-index.js'

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
  const index = new SearchIndex({ dir, source, embedder, maxLoaded, graphMin: 0, saveDelay: 60_000, onSaveError: (err) => saveErrors.push(err) })
  t.teardown(() => index.close())
  return { dir, source, index, saveErrors }
}

const labels = (hits: Array<{ label: number }>) => hits.map((h) => h.label)

t.test('changes applied after commit are searchable at once, in every mode, per namespace', async (t) => {
  const { source, index } = setup(t)
  await index.load('s1')
  const a = await source.add('s1', ['My cat is called Pickles.', 'We talked about the weather in Lisbon.', 'The meeting moved to Thursday.'])
  await index.applyAdd('s1', a.from, a.meta, a.docs)
  const b = await source.add('s2', ['Another session mentions Pickles the cat too.'])
  await index.applyAdd('s2', b.from, b.meta, b.docs)
  for (const mode of ['hybrid', 'bm25', 'vector'] as const) {
    const hits = await index.search('s1', 'what is my cat called?', 1, mode)
    t.same(labels(hits), [0], `${mode}`)
    t.same(hits[0]?.ref, ['msg', 0], 'the owner’s reference comes back')
  }
  t.same(labels(await index.search('s2', 'Pickles', 5)), [0], 'namespaces are separate')
  const r = source.remove('s1', [0])
  await index.applyRemove('s1', r.from, r.meta, [0])
  t.notOk(labels(await index.search('s1', 'cat Pickles', 5)).includes(0), 'removed')
  t.same(await index.search('empty', 'anything', 5), [])
})

t.test('a loaded namespace that missed a change reloads from the source', async (t) => {
  const { source, index } = setup(t)
  const a = await source.add('s', ['alpha document'])
  await index.load('s')
  t.equal(source.reads, 1)
  // A commit whose apply never reached this index (say, another process or a lost race).
  await source.add('s', ['beta document'])
  const c = await source.add('s', ['gamma document'])
  await index.applyAdd('s', c.from, c.meta, c.docs) // from-version 2, but the entry is at 1: dropped
  t.same(labels(await index.search('s', 'beta', 5, 'bm25')), [1], 'reloaded: the missed document is found')
  t.equal(source.reads, 2)
  await index.applyAdd('s', a.from, a.meta, a.docs) // an old change arriving late is ignored
  t.equal(source.reads, 2)
  t.same(labels(await index.search('s', 'gamma', 5, 'bm25')), [2])
})

t.test('LRU: evicting a changed namespace saves its graph; reloading uses it; drop deletes it', async (t) => {
  const { dir, source, index } = setup(t, 2)
  for (const ns of ['n1', 'n2', 'n3']) {
    await index.load(ns)
    const c = await source.add(ns, [`text of ${ns} about rivers`])
    await index.applyAdd(ns, c.from, c.meta, c.docs)
  }
  const files = () => readdirSync(dir).filter((f) => f.endsWith('.hnsw'))
  await index.idle()
  t.equal(files().length, 1, 'n1 was evicted and saved')
  await index.flush()
  t.equal(files().length, 3)
  t.same(labels(await index.search('n1', 'rivers', 1, 'vector')), [0], 'n1 reloads')
  index.drop('n1')
  t.equal(files().length, 2, 'dropping deletes the graph file')
})

t.test('a namespace below graphMin keeps no graph: searched exactly, nothing saved; past it, a graph ranks the same', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rag-si-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const source = new MemorySource()
  const open = () => new SearchIndex({ dir, source, embedder, saveDelay: 60_000, graphMin: 8 })
  const graphs = () => readdirSync(dir).filter((f) => f.endsWith('.hnsw'))
  const topics = ['rivers and boats', 'mountain huts', 'desert wells', 'forest trails', 'island ferries', 'city trams', 'canal locks']
  let index = open()
  await index.load('n')
  const c = await source.add('n', topics)
  await index.applyAdd('n', c.from, c.meta, c.docs)
  const small = await index.search('n', 'desert wells', 7, 'vector')
  t.equal(small[0]?.label, 2, 'the nearest vector first')
  t.equal(small.length, 7, 'every vector compared with the query')
  await index.flush()
  t.same(graphs(), [], 'no graph file for 7 vectors')

  // Reloaded from the source, still below: exact again, the same ranking.
  await index.close()
  index = open()
  t.same(await index.search('n', 'desert wells', 7, 'vector'), small, 'the same hits after a reload')

  // An addition takes it to 8: a graph, the exact set drained into it, the same nearest neighbours.
  const more = await source.add('n', ['harbour cranes'])
  await index.applyAdd('n', more.from, more.meta, more.docs)
  await index.idle()
  const big = await index.search('n', 'desert wells', 8, 'vector')
  t.equal(big.length, 8)
  t.same(
    big.filter((h) => h.label !== 7).map((h) => h.label),
    small.map((h) => h.label),
    'the graph ranks the first seven as the exact scan did',
  )
  await index.flush()
  t.equal(graphs().length, 1, 'the graph saved')
  await index.close()
})

t.test('a failed save is reported, not thrown (the graph is only a cache of LMDB)', async (t) => {
  const { dir, source, index, saveErrors } = setup(t)
  await index.load('s')
  const c = await source.add('s', ['some text'])
  await index.applyAdd('s', c.from, c.meta, c.docs)
  rmSync(dir, { recursive: true })
  writeFileSync(dir, 'a file where the directory was')
  await index.flush()
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

t.test('a first use loads that namespace only; loading and applying run in slices between other work', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rag-si-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const source = new MemorySource()
  await source.add('big', Array.from({ length: 300 }, (_, i) => `document ${i} about rivers and bridges`))
  await source.add('small', ['a note about lighthouses'])
  // sliceMs 0: pause after every step, so "the event loop ran in between" does not depend on this machine's speed.
  const index = new SearchIndex({ dir, source, embedder, graphMin: 0, saveDelay: 60_000, sliceMs: 0 })
  t.teardown(() => index.close())

  const big = [index.search('big', 'rivers', 1), index.search('big', 'bridges', 1)]
  t.same(labels(await index.search('small', 'lighthouses', 1)), [0], 'the small namespace answers')
  t.notOk(index.isLoaded('big'), 'while the big one is still loading: it did not wait for it')
  for (const hits of await Promise.all(big)) t.equal(hits.length, 1)
  t.equal(source.reads, 2, 'two concurrent first uses of a namespace share one load')

  let turns = 0
  let spinning = true
  const spin = (): void => {
    if (!spinning) return
    turns++
    setImmediate(spin)
  }
  spin()
  const c = await source.add('big', Array.from({ length: 200 }, (_, i) => `appendix ${i} about canals`))
  await index.applyAdd('big', c.from, c.meta, c.docs)
  spinning = false
  t.ok(turns > 10, `other callbacks ran while 200 documents were applied (${turns} turns)`)
  t.equal((await index.search('big', 'canals', 500, 'bm25')).length, 200, 'all of them searchable once it resolves')
})

t.test('an entry behind the committed state only by the change being applied is used; one that missed a change reloads', async (t) => {
  const { source, index } = setup(t)
  await source.add('s', ['alpha document'])
  await index.load('s')
  t.equal(source.reads, 1)
  const c = await source.add('s', ['beta document'])
  index.expect('s', c.meta) // the owner's transaction announces it before its commit
  t.same(labels(await index.search('s', 'alpha', 5, 'bm25')), [0], 'committed, not applied yet: no reload')
  t.equal(source.reads, 1)
  await index.applyAdd('s', c.from, c.meta, c.docs)
  t.same(labels(await index.search('s', 'beta', 5, 'bm25')), [1])
  await source.add('s', ['gamma document']) // committed by another process sharing the store: never applied here
  t.same(labels(await index.search('s', 'gamma', 5, 'bm25')), [2], 'the missed change is found after a reload')
  t.equal(source.reads, 2)
})

t.test('documents given as a file\'s coded terms rank and score as the same documents given as text', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rag-si-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const source = new MemorySource()
  // Accents and final e's are folded for BM25 (two spellings, one term), one chunk has no terms, terms repeat across chunks.
  const texts = ['Möngke renounced the throne.', '...', 'Mongke and the café renounce nothing; the cafe was closed.', 'The throne of Möngke, the throne.']
  const opened = [false, true].map((coded) => new SearchIndex({ dir: join(dir, String(coded)), source, embedder, graphMin: 0, saveDelay: 60_000, foldTerms: true }))
  for (const index of opened) t.teardown(() => index.close())
  const [asText, asCoded] = opened as [SearchIndex, SearchIndex]
  await asText.load('s')
  await asCoded.load('s')
  const c = await source.add('s', texts)
  const coded = codeTerms(texts.map((text) => analyze(text)))
  await asText.applyAdd('s', c.from, c.meta, c.docs)
  await asCoded.applyAdd('s', c.from, c.meta, c.docs.map(({ label, ref, vector }, doc) => ({ label, ref, vector, coded, doc })))
  for (const query of ['Mongke renounce', 'café', 'throne', 'closed cafe', 'nothing here']) {
    const want = await asText.search('s', query, 4, 'bm25')
    t.same(await asCoded.search('s', query, 4, 'bm25'), want, query)
  }
  t.ok((await asCoded.search('s', 'Mongke renounce', 4, 'bm25')).length >= 2, 'folded terms match across spellings')
})

t.test('an addition answers before its graph insertions: each vector is searchable once, the same as from the graph', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rag-si-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const source = new MemorySource()
  const texts = Array.from({ length: 120 }, (_, i) => `note ${i} on ${['rivers', 'bridges', 'canals', 'harbours'][i % 4]} and ${i % 7} locks`)
  // sliceMs 0: the background drain pauses after every insertion, so searches land between its steps.
  const index = new SearchIndex({ dir, source, embedder, graphMin: 0, saveDelay: 60_000, sliceMs: 0 })
  // The graph alone (maxFresh 0: every insertion before applyAdd resolves), fed the same change.
  const graphOnly = new SearchIndex({ dir: join(dir, 'graph-only'), source, embedder, graphMin: 0, saveDelay: 60_000, maxFresh: 0 })
  t.teardown(() => graphOnly.close())
  t.teardown(() => index.close())
  await index.load('s')
  await graphOnly.load('s')
  const c = await source.add('s', texts)
  await index.applyAdd('s', c.from, c.meta, c.docs)
  await graphOnly.applyAdd('s', c.from, c.meta, c.docs)
  const expected = await graphOnly.search('s', 'canals and 3 locks', 120, 'vector')
  t.equal(expected.length, 120)
  let idle = false
  const drained = index.idle().then(() => (idle = true))
  let during = 0
  const wrong: string[] = []
  while (!idle) {
    const hits = await index.search('s', 'canals and 3 locks', 120, 'vector')
    if (new Set(labels(hits)).size !== 120) wrong.push(`search ${during}: ${hits.length} hits, ${new Set(labels(hits)).size} labels`)
    // At 120 vectors the graph's search is exact: the same order; cosine in float32 there, float64 here.
    hits.forEach((h, i) => {
      if (Math.abs(h.score - (expected[i]?.score ?? 0)) > 1e-5) wrong.push(`search ${during}, rank ${i}: ${h.label} ${h.score} against ${expected[i]?.label} ${expected[i]?.score}`)
    })
    during++
    // Let the drain's next step run (a search alone may never leave the microtask queue).
    await new Promise((resolve) => setImmediate(resolve))
  }
  await drained
  t.same(wrong.slice(0, 5), [], 'every vector exactly once mid-drain, scored as the graph scores it')
  t.ok(during > 1, `searched ${during} times while the vectors drained`)
  t.same(labels(await index.search('s', 'canals and 3 locks', 120, 'vector')), labels(expected), 'and once drained')
})

t.test('no room on the disk for a graph: the save is skipped, the stale file removed, and saved once there is room', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rag-si-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const source = new MemorySource()
  let room = true
  const asked: number[] = []
  const cacheRoom = async (bytes: number): Promise<boolean> => {
    asked.push(bytes)
    return room
  }
  const index = new SearchIndex({ dir, source, embedder, graphMin: 0, saveDelay: 60_000, cacheRoom })
  t.teardown(() => index.close())
  const graphs = () => readdirSync(dir).filter((f) => f.endsWith('.hnsw') || f.endsWith('.hnsw.json'))
  await index.load('s')
  const first = await source.add('s', Array.from({ length: 40 }, (_, i) => `line ${i} about harbours`))
  await index.applyAdd('s', first.from, first.meta, first.docs)
  await index.flush()
  t.equal(graphs().length, 2, 'with room: the graph and its sidecar')
  t.ok((asked[0] ?? 0) >= 40 * embedder.dimension * 4, `asked for room for the whole graph (${asked[0]} bytes)`)

  room = false
  const second = await source.add('s', ['one more line about harbours'])
  await index.applyAdd('s', second.from, second.meta, second.docs)
  await index.flush()
  t.same(graphs(), [], 'without room: nothing written, and the stale graph gone (it would be rebuilt anyway)')
  t.equal((await index.search('s', 'harbours', 41, 'vector')).length, 41, 'searches are unaffected')

  room = true
  await index.flush()
  t.equal(graphs().length, 2, 'still unsaved, so saved at the next flush once there is room')
})

t.test('a graph is saved only with every vector of the version it claims, and that file is used by the next load', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rag-si-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const source = new MemorySource()
  // saveDelay 0: a timed save comes due while the vectors are still draining (one insertion per slice).
  const index = new SearchIndex({ dir, source, embedder, graphMin: 0, saveDelay: 0, sliceMs: 0 })
  await index.load('s')
  const c = await source.add('s', Array.from({ length: 80 }, (_, i) => `line ${i} about lighthouses`))
  await index.applyAdd('s', c.from, c.meta, c.docs)
  await new Promise((resolve) => setTimeout(resolve, 5))
  await index.flush()
  await index.close()
  const side = readdirSync(dir).filter((f) => f.endsWith('.hnsw.json'))
  t.equal(side.length, 1, 'saved')
  t.match(JSON.parse(readFileSync(join(dir, side[0] as string), 'utf8')), { version: 1, count: 80, deleted: 0 }, 'with every vector of version 1')
  const again = new SearchIndex({ dir, source, embedder, graphMin: 0, saveDelay: 60_000 })
  t.teardown(() => again.close())
  const reads = source.reads
  let rebuilt = false
  const vectors = source.vectors.bind(source)
  source.vectors = function* (ns: string) {
    rebuilt = true
    yield* vectors(ns)
  }
  t.equal((await again.search('s', 'lighthouses', 5, 'vector')).length, 5)
  t.notOk(rebuilt, 'the saved graph was current: not rebuilt from the stored vectors')
  t.equal(source.reads, reads + 1)
})

t.test('a removal runs in slices between other work, and no search meanwhile ranks any removed document', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rag-si-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const source = new MemorySource()
  await source.add('s', Array.from({ length: 50 }, (_, i) => `keeper ${i} about rivers`))
  const gone = await source.add('s', Array.from({ length: 300 }, (_, i) => `removed ${i} about rivers`))
  // sliceMs 0: pause after every step, so "the event loop ran in between" does not depend on this machine's speed.
  const index = new SearchIndex({ dir, source, embedder, graphMin: 0, saveDelay: 60_000, sliceMs: 0 })
  t.teardown(() => index.close())
  await index.load('s')
  await index.idle()
  const removedLabels = gone.docs.map((d) => d.label)
  const r = source.remove('s', removedLabels)
  let done = false
  const applied = index.applyRemove('s', r.from, r.meta, removedLabels).then(() => (done = true))
  let turns = 0
  const searches: Array<Promise<number[]>> = []
  // Other work, turn by turn, while the removal runs: a search started every tenth turn.
  while (!done) {
    turns++
    if (turns % 10 === 1) searches.push(index.search('s', 'rivers', 400, 'hybrid').then(labels))
    await new Promise((resolve) => setImmediate(resolve))
  }
  await applied
  t.ok(turns > 10, `other callbacks ran while 300 documents were removed (${turns} turns)`)
  const seen = await Promise.all(searches)
  t.ok(seen.length > 1, `${seen.length} searches during the removal`)
  const removed = new Set(removedLabels)
  t.same(seen.flat().filter((l) => removed.has(l)), [], 'no search returned a removed document')
  t.same(seen.map((l) => l.length), seen.map(() => 50), 'each found the 50 kept ones')
  t.equal((await index.search('s', 'rivers', 400, 'bm25')).length, 50, 'the 50 kept documents remain')
})

t.test('a large graph rebuilt from the source is built in a worker thread after the load, searched exactly meanwhile: then the same ranking as one built here; close stops it', async (t) => {
  const source = new MemorySource()
  const texts = Array.from({ length: 3000 }, (_, i) => `note ${i} on ${['tides', 'lighthouses', 'storms', 'harbours', 'gulls'][i % 5]} and ${['keepers', 'lamps', 'charts'][i % 3]} number ${i % 97}`)
  for (let i = 0; i < texts.length; i += 1000) await source.add('big', texts.slice(i, i + 1000))
  const built = (graphWorkerMin: number) => {
    const dir = mkdtempSync(join(tmpdir(), 'rag-si-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const index = new SearchIndex({ dir, source, embedder, graphMin: 0, saveDelay: 60_000, graphWorkerMin })
    t.teardown(() => index.close())
    return { dir, index }
  }
  // Insertions on this thread go through VectorIndex#add; count them, and any fallback's warning.
  let insertedHere = 0
  const add = VectorIndex.prototype.add
  VectorIndex.prototype.add = function (this: VectorIndex, ...args: Parameters<typeof add>) {
    insertedHere++
    return add.apply(this, args)
  }
  t.teardown(() => void (VectorIndex.prototype.add = add))
  const warnings: string[] = []
  const onWarning = (w: Error) => warnings.push(w.message)
  process.on('warning', onWarning)
  t.teardown(() => void process.off('warning', onWarning))

  const here = built(Number.POSITIVE_INFINITY).index
  const { dir, index: offThread } = built(1000)
  const queries = ['lighthouses keepers', 'storms charts number 42', 'gulls lamps', 'harbours tides 7']
  t.ok((await here.search('big', queries[0] as string, 10, 'vector')).length > 0)
  t.equal(insertedHere, 3000, 'below the threshold: built on this thread')
  // Answered once BM25 and the exact set are loaded, whether or not the graph is done: the exact neighbours.
  const early = await offThread.search('big', queries[0] as string, 10, 'vector')
  const reference = await here.search('big', queries[0] as string, 10, 'vector')
  t.same(labels(early), labels(reference), 'answered before or after the graph: the same neighbours')
  await offThread.idle()
  t.equal(insertedHere, 3000, 'at the threshold: not one insertion on this thread')
  t.same(warnings, [], 'and no fallback to this thread')
  for (const q of queries) {
    const a = await here.search('big', q, 10, 'vector')
    const b = await offThread.search('big', q, 10, 'vector')
    t.same(labels(b), labels(a), `"${q}": the same neighbours, best first`)
    t.same(b.map((h) => h.score), a.map((h) => h.score), 'with the same scores')
  }
  await offThread.flush()
  t.equal(readdirSync(dir).filter((f) => f.endsWith('.build')).length, 0, "the worker's file is gone once loaded")

  // Closed while its graph builds: the worker stopped, its file gone, no graph saved as current.
  const closing = built(1000)
  t.ok((await closing.index.search('big', 'storms', 5, 'vector')).length > 0)
  await closing.index.close()
  t.same(readdirSync(closing.dir).filter((f) => f.endsWith('.build')), [], "close leaves no worker's file")
})

t.test('changes committed while a deferred graph builds: removed vectors never come back, added ones are found, before and after the swap', async (t) => {
  const source = new MemorySource()
  const texts = Array.from({ length: 3000 }, (_, i) => `entry ${i} about ${['tides', 'lighthouses', 'storms'][i % 3]} and ${['keepers', 'lamps'][i % 2]} ${i % 89}`)
  for (let i = 0; i < texts.length; i += 1000) await source.add('big', texts.slice(i, i + 1000))
  const dir = mkdtempSync(join(tmpdir(), 'rag-si-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const index = new SearchIndex({ dir, source, embedder, graphMin: 0, saveDelay: 60_000, graphWorkerMin: 1000 })
  t.teardown(() => index.close())
  const target = 'entry 42 about tides and keepers 42'
  t.equal((await index.search('big', target, 1, 'vector'))[0]?.label, 42, 'loaded: found exactly')
  // Committed while the graph builds (or just after: either way the same outcome).
  const gone = source.remove('big', [42, 43])
  await index.applyRemove('big', gone.from, gone.meta, [42, 43])
  const added = await source.add('big', ['a brand new note about glaciers and penguins'])
  await index.applyAdd('big', added.from, added.meta, added.docs)
  const check = async (when: string) => {
    const hits = await index.search('big', target, 50, 'vector')
    t.notOk(hits.some((h) => h.label === 42 || h.label === 43), `${when}: the removed vectors are gone`)
    // Hybrid: an outlier inserted into an HNSW graph can be unreachable by the graph's search alone (its neighbours
    // prune their links back to it), with or without a deferred build; BM25 finds it by its words.
    t.equal((await index.search('big', 'glaciers and penguins', 1))[0]?.label, 3000, `${when}: the added one is found`)
  }
  await check('during the build')
  await index.idle()
  await check('after the swap')
  await index.flush()
  t.equal(readdirSync(dir).filter((f) => f.endsWith('.hnsw')).length, 1, 'the graph saved once built')
  // Reloaded from that file: the same.
  await index.close()
  const again = new SearchIndex({ dir, source, embedder, graphMin: 0, saveDelay: 60_000, graphWorkerMin: 1000 })
  t.teardown(() => again.close())
  const hits = await again.search('big', target, 50, 'vector')
  t.notOk(hits.some((h) => h.label === 42 || h.label === 43), 'after a reload too')
})

t.test('a large namespace keeps its analyzed terms beside its graph: the next load reads no text and ranks the same', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rag-si-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const source = new MemorySource()
  const open = () => new SearchIndex({ dir, source, embedder, graphMin: 0, saveDelay: 60_000, termsFileMin: 50, foldTerms: true, phraseWeight: 0.5 })
  const first = open()
  await first.load('s')
  const texts = Array.from({ length: 120 }, (_, i) => `Ledger ${i}: the ${['ferry', 'lighthouse', 'café', 'harbour'][i % 4]} crew logged ${i * 3} crates on pier ${i % 7}.`)
  const c = await source.add('s', texts)
  await first.applyAdd('s', c.from, c.meta, c.docs)
  const r = source.remove('s', [3, 50, 51])
  await first.applyRemove('s', r.from, r.meta, [3, 50, 51])
  const queries = ['lighthouse crew crates pier 4', 'cafe crates', 'ledger 77 ferry', 'harbour pier 6 crates logged']
  const before = await Promise.all(queries.map((q) => first.search('s', q, 8)))
  await first.close()
  t.ok(readdirSync(dir).some((f) => f.endsWith('.hnsw.terms')), 'saved with the graph')

  const reads = source.reads
  const again = open()
  t.teardown(() => again.close())
  const after = await Promise.all(queries.map((q) => again.search('s', q, 8)))
  t.equal(source.reads, reads, "no document's text read from the source")
  t.same(after, before, 'the same hits, scores, relevance and refs as before the restart')

  // A file of another state is not used: the namespace changed since (another process, or while this one was down).
  await again.close()
  const d = await source.add('s', ['A late ledger line about the lighthouse keeper.'])
  void d
  const third = open()
  t.teardown(() => third.close())
  const hits = await third.search('s', 'lighthouse keeper late', 3)
  t.equal(source.reads, reads + 1, 'a stale file: the documents are read from the source')
  t.same(hits[0]?.ref, ['msg', 120], 'and the change is there')

  // A current graph whose terms file is missing (an older version's data directory): the load writes one.
  await third.close()
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.terms'))) rmSync(join(dir, f))
  const fourth = open()
  t.teardown(() => fourth.close())
  await fourth.load('s')
  await fourth.idle()
  t.ok(readdirSync(dir).some((f) => f.endsWith('.hnsw.terms')), 'written after the load')
  await fourth.close()
  const readsNow = source.reads
  const fifth = open()
  t.teardown(() => fifth.close())
  t.same((await fifth.search('s', 'lighthouse keeper late', 3))[0]?.ref, ['msg', 120])
  t.equal(source.reads, readsNow, 'and the next load reads it')

  // A file whose vocabulary repeats a term (its ids would shift): not used, and nothing of it is in the index.
  await fifth.close()
  const { encodeTerms } = await import('../src/retrieval/terms-file.js')
  const termsPath = join(dir, readdirSync(dir).find((f) => f.endsWith('.hnsw.terms')) as string)
  const meta = source.meta('s') as NamespaceMeta
  writeFileSync(termsPath, encodeTerms({ version: meta.version, epoch: meta.epoch, count: meta.count, analyzer: `${ANALYZER_ID}+fold` }, {
    vocab: ['lighthouse', 'lighthouse'], labels: new Float64Array(meta.count).map((_, i) => i), refs: Array.from({ length: meta.count }, () => ['bogus', 0]),
    ends: new Uint32Array(meta.count), codes: new Uint32Array(0),
  }))
  const sixth = open()
  t.teardown(() => sixth.close())
  t.same((await sixth.search('s', 'lighthouse keeper late', 3))[0]?.ref, ['msg', 120], 'ranked from the source')
  t.equal(source.reads, readsNow + 1, "the documents' text read again")

  // One whose codes point past its vocabulary: the same.
  await sixth.close()
  writeFileSync(termsPath, encodeTerms({ version: meta.version, epoch: meta.epoch, count: meta.count, analyzer: `${ANALYZER_ID}+fold` }, {
    vocab: ['lighthouse'], labels: new Float64Array(meta.count).map((_, i) => i), refs: Array.from({ length: meta.count }, () => ['bogus', 0]),
    ends: new Uint32Array(meta.count).fill(1), codes: new Uint32Array([7]),
  }))
  const seventh = open()
  t.teardown(() => seventh.close())
  t.same((await seventh.search('s', 'lighthouse keeper late', 3))[0]?.ref, ['msg', 120], 'ranked from the source')
  t.equal(source.reads, readsNow + 2)

  // A sound file (the seventh load wrote one) of terms another analysis made (folded): a load that does not fold
  // reads the text.
  await seventh.idle()
  await seventh.close()
  const unfolded = new SearchIndex({ dir, source, embedder, graphMin: 0, saveDelay: 60_000, termsFileMin: 50 })
  t.teardown(() => unfolded.close())
  await unfolded.load('s')
  t.equal(source.reads, readsNow + 3)
  const folded = open()
  t.teardown(() => folded.close())
  await unfolded.close()
  await folded.load('s')
  t.equal(source.reads, readsNow + 4, 'and each rewrites it for its own')
})

t.test('a terms file is used only whole and for the state it names', async (t) => {
  const { decodeTerms, encodeTerms } = await import('../src/retrieval/terms-file.js')
  const snap = { vocab: ['ferry', 'crew', 'pier'], labels: new Float64Array([0, 2]), refs: [['f', 0], ['f', 2, 'g', -1.5]], ends: new Uint32Array([2, 5]), codes: new Uint32Array([0, 1, 2, 2, 1]) }
  const state = { version: 4, epoch: 'e1', count: 2, analyzer: 'analyzer-x' }
  const bytes = encodeTerms(state, snap)
  const back = decodeTerms(bytes, state)
  t.same(back && { vocab: back.vocab, labels: back.labels, ends: back.ends, codes: back.codes, refs: [back.ref(0), back.ref(1)] }, snap, 'read back as written')
  // A buffer at an odd offset (not how readFile hands one out) is copied instead of viewed.
  const odd = Buffer.alloc(bytes.length + 1)
  bytes.copy(odd, 1)
  t.same(decodeTerms(odd.subarray(1), state)?.ref(1), ['f', 2, 'g', -1.5])
  t.equal(decodeTerms(bytes, { ...state, version: 5 }), undefined, 'another version')
  t.equal(decodeTerms(bytes, { ...state, epoch: 'e2' }), undefined, 'another epoch')
  t.equal(decodeTerms(bytes, { ...state, count: 3 }), undefined, 'another count')
  t.equal(decodeTerms(bytes, { ...state, analyzer: 'analyzer-y' }), undefined, 'terms another analysis made')
  t.equal(decodeTerms(bytes.subarray(0, bytes.length - 4), state), undefined, 'cut short')
  t.equal(decodeTerms(Buffer.from('nonsense'), state), undefined, 'not a terms file')
})
