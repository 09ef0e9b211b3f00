/**
 * The knowledge base's LMDB records: a file, its chunks, vectors and namespace meta are written and deleted in one
 * transaction; a refused write leaves nothing; ranges never cross tenants or namespaces.
 */
import t, { type Test } from 'tap'
import { FileRepo, decodeVector, encodeVector, type FileRow } from '../src/storage/file-repo.js'
import { openStore } from '../src/storage/store.js'

const row = (id: string, created_at = 1): FileRow => ({
  id,
  object: 'file',
  filename: `${id}.txt`,
  bytes: 10,
  chunks: 2,
  status: 'processed',
  created_at,
  metadata: null,
  content_type: 'text/plain',
})
const chunk = (text: string, i: number) => ({ text, tokens: 3, start: i * 10, end: i * 10 + 9, headingPath: [] })
const vec = (x: number) => Float32Array.from([x, 1 - x, 0.5])

function setup(t: Test) {
  const store = openStore({ dir: t.testdir() })
  t.teardown(() => store.close())
  return { store, repo: new FileRepo(store) }
}

t.test('insert: file, chunks, vectors and meta together; labels continue across files', async (t) => {
  const { store, repo } = setup(t)
  const a = await repo.insertFile({
    tenant: 't1',
    namespace: 'files:t1',
    file: row('file-a', 2),
    chunks: [chunk('one', 0), chunk('two', 1)],
    vectors: [vec(0.1), vec(0.2)],
    embedderId: 'e1',
    check: () => {},
  })
  t.match(a, { fromVersion: 0, meta: { embedderId: 'e1', dimension: 3, version: 1, count: 2, nextLabel: 2, epoch: /^[0-9a-f]{12}$/ }, labels: [0, 1] })
  const b = await repo.insertFile({
    tenant: 't1',
    namespace: 'files:t1',
    file: row('file-b', 1),
    chunks: [chunk('three', 0)],
    vectors: [vec(0.3)],
    embedderId: 'e1',
    check: () => {},
  })
  t.same(b.labels, [2])
  t.equal(b.fromVersion, 1)
  t.same(repo.listFiles('t1').map((f) => f.id), ['file-b', 'file-a'], 'oldest first')
  t.match(repo.getChunk('t1', 'file-a', 1), { text: 'two', label: 1 })
  t.same([...repo.tenantChunks('t1')].map((c) => [c.fileId, c.index, c.chunk.text]), [
    ['file-a', 0, 'one'],
    ['file-a', 1, 'two'],
    ['file-b', 0, 'three'],
  ])
  const vs = [...repo.index.vectors('files:t1')]
  t.same(vs.map((v) => v.label), [0, 1, 2])
  t.ok(Math.abs((vs[2]?.vector[0] ?? 0) - 0.3) < 1e-6, 'vector bytes round-trip')
  t.same(repo.index.namespaces('files:'), ['files:t1'])
  t.equal(store.files.getKeysCount(), 2)
})

t.test('a refused insert writes nothing', async (t) => {
  const { store, repo } = setup(t)
  await t.rejects(
    repo.insertFile({
      tenant: 't1',
      namespace: 'files:t1',
      file: row('file-a'),
      chunks: [chunk('one', 0)],
      vectors: [vec(0.1)],
      embedderId: 'e1',
      check: () => {
        throw new Error('refused')
      },
    }),
    /refused/,
  )
  t.equal(store.files.getKeysCount(), 0)
  t.equal(store.chunks.getKeysCount(), 0)
  t.equal(store.vectors.getKeysCount(), 0)
  t.equal(repo.index.meta('files:t1'), undefined)
  await t.rejects(
    repo.insertFile({ tenant: 't', namespace: 'n', file: row('f'), chunks: [chunk('x', 0)], vectors: [], embedderId: 'e', check: () => {} }),
    RangeError,
  )
})

t.test('delete removes the file, its chunks and vectors only; tenants and namespaces stay apart', async (t) => {
  const { store, repo } = setup(t)
  const put = (tenant: string, id: string) =>
    repo.insertFile({
      tenant,
      namespace: `files:${tenant}`,
      file: row(id),
      chunks: [chunk('x', 0), chunk('y', 1)],
      vectors: [vec(0.1), vec(0.2)],
      embedderId: 'e1',
      check: () => {},
    })
  await put('t1', 'file-a')
  await put('t1', 'file-b')
  await put('t10', 'file-a') // same file id, another tenant whose id extends t1's
  const del = await repo.deleteFile('t1', 'files:t1', 'file-a')
  t.match(del, { fromVersion: 2, meta: { embedderId: 'e1', dimension: 3, version: 3, count: 2, nextLabel: 4, epoch: /^[0-9a-f]{12}$/ }, labels: [0, 1] })
  t.equal(await repo.deleteFile('t1', 'files:t1', 'file-a'), undefined, 'already gone')
  t.same(repo.listFiles('t1').map((f) => f.id), ['file-b'])
  t.same([...repo.index.vectors('files:t1')].map((v) => v.label), [2, 3])
  t.same(repo.listFiles('t10').map((f) => f.id), ['file-a'], 'the other tenant keeps its file of the same id')
  t.equal([...repo.tenantChunks('t10')].length, 2)
  t.equal([...repo.index.vectors('files:t10')].length, 2)
  t.equal(store.chunks.getKeysCount(), 4)
})

t.test('dropping a namespace removes its vectors and meta only', async (t) => {
  const { store, repo } = setup(t)
  for (const ns of ['recall:t:s1', 'recall:t:s10']) {
    await store.transaction(() => repo.index.addInTxn(ns, [vec(0.1), vec(0.2)], 'e1', () => {}))
  }
  const dropped = await store.transaction(() => repo.index.dropInTxn('recall:t:s1'))
  t.same(dropped, [0, 1])
  t.equal(repo.index.meta('recall:t:s1'), undefined)
  t.same([...repo.index.vectors('recall:t:s1')], [])
  t.equal([...repo.index.vectors('recall:t:s10')].length, 2, 'a namespace extending the name is untouched')
  t.same(repo.index.namespaces('recall:'), ['recall:t:s10'])
})

t.test('vector encoding copies out of unaligned buffers', async (t) => {
  const v = Float32Array.from([1.5, -2, 3.25])
  const bytes = encodeVector(v)
  const unaligned = new Uint8Array(bytes.length + 1).subarray(1)
  unaligned.set(bytes)
  t.same(Array.from(decodeVector(unaligned)), [1.5, -2, 3.25])
})
