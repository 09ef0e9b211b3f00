/**
 * Two processes' indexes over one store (WORKERS, replicas on one DATA_DIR): one commits, the other sees it on its
 * next search, by applying the change log when it can and reloading when it cannot. The knowledge base twice over one
 * store (LMDB, and PostgreSQL) stands in for the two processes; the replica e2e tests run them for real.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { KnowledgeBase } from '../src/knowledge/knowledge-base.js'
import { LocalEmbedder } from '../src/retrieval/embedder.js'
import { SearchIndex, type DocRef, type IndexSource, type NamespaceMeta } from '../src/retrieval/search-index.js'
import { testableEngines } from './helpers/store-engines.js'
import type { FileStore } from '../src/storage/interface.js'

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
  added(_ns: string, docs: ReadonlyArray<readonly [number, DocRef]>) {
    return docs.flatMap(([label]) => {
      const d = this.docs.get(label)
      return d === undefined ? [] : [{ label, text: d.text, vector: d.vector }]
    })
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

t.test('a search that comes while another search catches up waits for it: a delete made elsewhere is final for both', async (t) => {
  const { source, b } = twoProcesses(t)
  const [, doomed] = await source.add(['the river guide is called Tamsin', 'the ferry timetable changes in winter'])
  t.same(await labelsOf(b, 'ferry timetable'), [doomed])
  source.remove([doomed!])
  // The log read is held, so the first search's catch-up is still in flight when the second search arrives.
  let release = (): void => undefined
  const held = new Promise<void>((resolve) => (release = resolve))
  const changes = source.changes.bind(source)
  source.changes = ((ns: string, from: number, to: number) => held.then(() => changes(ns, from, to))) as unknown as typeof source.changes
  const first = labelsOf(b, 'ferry timetable')
  await new Promise((resolve) => setImmediate(resolve))
  const second = labelsOf(b, 'ferry timetable')
  await new Promise((resolve) => setImmediate(resolve))
  release()
  t.same(await first, [], 'the search that started the catch-up')
  t.same(await second, [], 'the one that came during it')
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

/** The store read across a network (PostgreSQL): while held, meta() answers only when released, with the state then. */
class RemoteSource implements IndexSource {
  readonly store: LoggedSource
  changesRead = 0
  #held: Array<() => void> | undefined

  constructor(store: LoggedSource) {
    this.store = store
  }
  hold(): void {
    this.#held = []
  }
  release(): void {
    const waiting = this.#held ?? []
    this.#held = undefined
    for (const answer of waiting) answer()
  }
  async meta(): Promise<NamespaceMeta | undefined> {
    const held = this.#held
    if (held !== undefined) await new Promise<void>((resolve) => held.push(resolve))
    return this.store.meta_
  }
  documents() {
    return this.store.documents()
  }
  vectors() {
    return this.store.vectors()
  }
  changes(ns: string, from: number, to: number) {
    this.changesRead++
    return this.store.changes(ns, from, to)
  }
  added(ns: string, docs: ReadonlyArray<readonly [number, DocRef]>) {
    return this.store.added(ns, docs)
  }
}

t.test('ranked while the committed state is read: kept when nothing changed, ranked again when another process changed it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'catch-up-ahead-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const store = new LoggedSource()
  const remote = new RemoteSource(store)
  const b = new SearchIndex({ dir, source: remote, embedder, saveDelay: 60_000 })
  t.teardown(() => b.close())
  const [, glacier] = await store.add(['the river guide is called Tamsin', 'the glacier guide is called Eirlys'])
  t.same(await labelsOf(b, 'glacier Eirlys'), [glacier], 'loaded on first use')
  t.equal((await b.search('ns', 'glacier guide Eirlys', 1, 'hybrid'))[0]?.label, glacier)
  t.equal(remote.changesRead, 0, 'nothing changed: the ranking made meanwhile is the answer')

  // A delete through another process commits while B's read of the state is in flight (B has ranked by then).
  for (const mode of ['bm25', 'hybrid'] as const) {
    const [doomed] = await store.add([`the ${mode} ferry timetable changes in winter`])
    t.same((await b.search('ns', `${mode} ferry timetable`, 1, mode)).map((h) => h.label), [doomed])
    remote.hold()
    const searching = b.search('ns', `${mode} ferry timetable`, 5, mode)
    await new Promise((resolve) => setImmediate(resolve))
    store.remove([doomed!])
    remote.release()
    t.notOk((await searching).some((h) => h.label === doomed), `${mode}: the delete is final for that very search`)
  }
  // An upload likewise: found by the search whose read saw it.
  remote.hold()
  const searching = labelsOf(b, 'lighthouse keeper Morwenna')
  await new Promise((resolve) => setImmediate(resolve))
  const [lighthouse] = await store.add(['the lighthouse keeper is called Morwenna'])
  remote.release()
  t.same(await searching, [lighthouse], 'an upload committed meanwhile is found')
  t.same(await labelsOf(b, 'lighthouse keeper Morwenna'), [lighthouse])
})

// Per store engine: two processes on one DATA_DIR (LMDB), or two replicas with their own DATA_DIRs on one database.
for (const engine of testableEngines(t, 'knowledge base instances sharing a store')) {
  t.test(`${engine.name}: two knowledge base instances on one store see each other’s uploads and deletes at once`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'catch-up-kb-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const first = await engine.open(t)
    const second = await first.another()
    const kb = (name: string, files: FileStore) =>
      new KnowledgeBase({ files, dataDir: join(dir, name), embedder, chunkTokens: 64, chunkOverlap: 8, maxChunksPerFile: 1000, clock: Date.now })
    const a = kb('a', first.files)
    const b = kb('b', second.files)
    t.teardown(async () => {
      await a.close()
      await b.close()
    })
    const upload = (filename: string, text: string) => ({ filename, contentType: 'text/plain', bytes: Buffer.from(text), metadata: null })
    const rivers = await a.ingest('t', upload('rivers.txt', 'The river guide is called Tamsin. She knows every bend of the river.'))
    t.equal((await b.search('t', 'river guide', 1))[0]?.file_id, rivers.id)
    const mountains = await a.ingest('t', upload('mountains.txt', 'The mountain guide is called Eirlys. She climbs in every weather.'))
    t.equal((await b.search('t', 'mountain guide Eirlys', 1))[0]?.file_id, mountains.id, 'B sees A’s upload at once')
    t.equal((await b.search('t', 'mountain guide Eirlys', 1, 'vector'))[0]?.file_id, mountains.id, 'its vector too')
    // Both uploaded within one second: listed in created_at order, ties by id.
    t.same((await b.list('t')).map((f) => f.id).sort(), [rivers.id, mountains.id].sort())
    t.ok(await b.delete('t', mountains.id))
    t.notOk((await a.search('t', 'mountain guide Eirlys', 5)).some((h) => h.file_id === mountains.id), 'A never returns B’s delete')
    t.equal(await a.get('t', mountains.id), undefined)
    t.equal(await a.delete('t', mountains.id), false, 'nor deletes it twice')
    const coast = await b.ingest('t', upload('coast.txt', 'The coast guard is called Morwenna.'))
    t.equal((await a.search('t', 'coast guard Morwenna', 1))[0]?.file_id, coast.id)
    t.equal(await a.hasChunks('other'), false, 'another tenant has nothing')

    // A third instance starting cold loads the tenant whole from the store (documents and vectors, page by page).
    const c = kb('c', (await first.another()).files)
    t.teardown(() => c.close())
    t.same((await c.search('t', 'river guide Tamsin', 1)).map((h) => h.file_id), [rivers.id])
    t.same((await c.search('t', 'coast guard', 1, 'vector')).map((h) => h.file_id), [coast.id])
  })
}
