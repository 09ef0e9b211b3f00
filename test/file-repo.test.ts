/**
 * The knowledge base's LMDB records: a file, its chunks, vectors and namespace meta are written and deleted all or
 * nothing (a large file in slices that appear at once); a refused, failed or killed write leaves nothing; concurrent
 * uploads never share a label; ranges never cross tenants or namespaces.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { hostname } from 'node:os'
import { fileURLToPath } from 'node:url'
import t, { type Test } from 'tap'
import { FileRepo, decodeVector, encodeVector, type FileRow } from '../src/storage/file-repo.js'
import { openStore, StoreUnavailableError } from '../src/storage/store.js'

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

// A large file (more than sliceRows chunks) is written in slices that appear at once (file-repo.ts's header).
const big = (id: string, n: number, text = (i: number) => `chunk ${i} of ${id}`) => ({
  file: { ...row(id), chunks: n },
  chunks: Array.from({ length: n }, (_, i) => chunk(text(i), i)),
  vectors: Array.from({ length: n }, (_, i) => vec(i / n)),
})

t.test('a file written in slices: readers see none of it until the last slice, then all of it', async (t) => {
  const store = openStore({ dir: t.testdir() })
  t.teardown(() => store.close())
  const seen: Array<{ written: number; files: number; chunks: number; at: unknown; vectors: number; meta: unknown }> = []
  const repo: FileRepo = new FileRepo(store, {
    sliceRows: 2,
    onSlice: (written) => {
      seen.push({
        written,
        files: repo.listFiles('t1').length,
        chunks: [...repo.tenantChunks('t1')].length,
        at: repo.chunksAt('t1', [['file-big', 0]])[0],
        vectors: [...repo.index.vectors('files:t1')].length,
        meta: repo.index.meta('files:t1'),
      })
    },
  })
  await repo.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-small', 2), embedderId: 'e1', check: () => {} })
  const change = await repo.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-big', 7), embedderId: 'e1', check: () => {} })
  t.same(seen.map((s) => s.written), [2, 4, 6, 7], 'four slices')
  for (const s of seen) {
    t.match(s, { files: 1, chunks: 2, at: undefined, vectors: 2, meta: { version: 1, count: 2 } }, `after ${s.written} rows: only the small file`)
  }
  t.match(change, { fromVersion: 1, meta: { version: 2, count: 9, nextLabel: 9 }, labels: [2, 3, 4, 5, 6, 7, 8] })
  t.same([...repo.tenantChunks('t1')].map((c) => c.chunk.label).sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8])
  t.same([...repo.index.vectors('files:t1')].map((v) => v.label), [0, 1, 2, 3, 4, 5, 6, 7, 8])
  t.same(repo.index.changes('files:t1', 2, 2), [{ add: change.labels.map((l, i) => [l, ['file-big', i]]) }], 'one change log entry')
  t.equal(await repo.recover(), 0, 'nothing pending')
})

t.test('concurrent uploads into one tenant, sliced and whole, never share a label; the cap counts uploads in progress', async (t) => {
  const { store, repo } = setup(t)
  const small = new FileRepo(store, { sliceRows: 3 })
  const cap = (max: number) => (meta: { count: number } | undefined, adding: number) => {
    if ((meta?.count ?? 0) + adding > max) throw new Error('over the cap')
  }
  const sliced = new FileRepo(store, { sliceRows: 3 })
  const uploads = await Promise.all([
    sliced.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-a', 10), embedderId: 'e1', check: cap(100) }),
    sliced.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-b', 11), embedderId: 'e1', check: cap(100) }),
    repo.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-c', 2), embedderId: 'e1', check: cap(100) }),
    small.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-d', 7), embedderId: 'e1', check: cap(100) }),
  ])
  const labels = uploads.flatMap((u) => u.labels).sort((a, b) => a - b)
  t.same(labels, Array.from({ length: 30 }, (_, i) => i), 'thirty distinct labels')
  t.same(uploads.map((u) => u.meta.version).sort(), [1, 2, 3, 4], 'one version each')
  const rows = [...repo.tenantChunks('t1')]
  t.equal(rows.length, 30)
  for (const r of rows) t.equal(r.chunk.label, uploads[['file-a', 'file-b', 'file-c', 'file-d'].indexOf(r.fileId)]?.labels[r.index], `${r.fileId}/${r.index}`)
  t.match(repo.index.meta('files:t1'), { count: 30, nextLabel: 30, version: 4 })
  // 30 stored; 10 and 11 more would fit a cap of 50 one at a time, but not together.
  const results = await Promise.allSettled([
    sliced.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-e', 10), embedderId: 'e1', check: cap(50) }),
    sliced.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-f', 11), embedderId: 'e1', check: cap(50) }),
  ])
  t.same(results.map((r) => r.status).sort(), ['fulfilled', 'rejected'], 'the second is refused while the first is written')
  t.equal(repo.index.meta('files:t1')?.count, 40)
})

t.test('a failure part-way through a sliced upload, or a full store, leaves nothing behind', async (t) => {
  const dir = t.testdir()
  let store = openStore({ dir, spaceTtl: 0 })
  const used = store.space().usedBytes
  await store.close()
  // Room for a few slices of 3 KB chunks, not for 40 of them.
  store = openStore({ dir, spaceTtl: 0, mapSize: used + 24 * 4096 })
  t.teardown(() => store.close())
  let failAt = 4
  let slices = 0
  const repo = new FileRepo(store, {
    sliceRows: 2,
    onSlice: (written) => {
      slices++
      if (written === failAt) throw new Error('the upload failed part-way')
    },
  })
  const empty = () => {
    t.equal(store.chunks.getKeysCount(), 0, 'no chunk rows')
    t.equal(store.vectors.getKeysCount(), 0, 'no vectors')
    t.equal(store.files.getKeysCount(), 0, 'no file')
    t.same([...store.meta.getKeys({ start: ['pending'], end: ['pending', '\uffff'] })], [], 'no pending record')
    t.match(repo.index.meta('files:t1'), { count: 0, version: 0 })
  }
  await t.rejects(repo.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-a', 7), embedderId: 'e1', check: () => {} }), /part-way/)
  empty()
  failAt = -1
  await t.rejects(
    repo.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-b', 40, (i) => `${i} `.repeat(1500)), embedderId: 'e1', check: () => {} }),
    new StoreUnavailableError('map_full', 'The store holds'),
  )
  t.ok(slices > 2, `refused after ${slices - 2} slices had been written`)
  empty()
})

t.test('kill -9 part-way through a sliced upload: nothing is visible, and the next start removes what it wrote', async (t) => {
  const dir = t.testdir()
  const child = spawn(process.execPath, ['--import', '@tapjs/typescript/import', fileURLToPath(new URL('./fixtures/sliced-insert-crash.ts', import.meta.url)), dir], {
    stdio: ['ignore', 'inherit', 'inherit'],
  })
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null]
  t.same({ code, signal }, { code: null, signal: 'SIGKILL' }, 'killed after its second slice')
  const store = openStore({ dir })
  t.teardown(() => store.close())
  const repo = new FileRepo(store)
  t.ok(store.chunks.getKeysCount() >= 4, 'its slices are in the store')
  t.same([...repo.tenantChunks('t1')], [], 'but no reader shows them')
  t.same(repo.chunksAt('t1', [['file-big', 0]]), [undefined])
  t.same(repo.listFiles('t1'), [])
  t.same([...repo.index.vectors('files:t1')], [], 'nor loads their vectors')
  t.equal(await repo.recover(), 1, 'the start removes the dead upload')
  t.equal(store.chunks.getKeysCount(), 0)
  t.equal(store.vectors.getKeysCount(), 0)
  const after = await repo.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-next', 2), embedderId: 'e1', check: () => {} })
  t.same(after.labels, [7, 8], 'labels it reserved are never reused')
  t.match(after.meta, { version: 1, count: 2 })
})

t.test('pending records: a live process keeps its own, one from elsewhere is removed once stale', async (t) => {
  const store = openStore({ dir: t.testdir() })
  t.teardown(() => store.close())
  let now = 1_000_000
  const repo = new FileRepo(store, { clock: () => now })
  const owner = { host: 'another-host', pid: 1, boot: 'x' }
  await store.transaction(() => {
    store.meta.put(['pending', 'files:t1', 'file-far'], { tenant: 't1', namespace: 'files:t1', fileId: 'file-far', first: 0, count: 1, owner, at: now })
    store.meta.put(['pending', 'files:t1', 'file-live'], { tenant: 't1', namespace: 'files:t1', fileId: 'file-live', first: 1, count: 1, owner: { host: hostname(), pid: process.ppid, boot: 'y' }, at: now })
    store.chunks.put(['t1', 'file-far', 0], { ...chunk('x', 0), label: 0 })
  })
  t.equal(await repo.recover(), 0, 'another host within the hour, and a live process here, are kept')
  now += 61 * 60 * 1000
  t.equal(await repo.recover(), 2, 'an hour on, both are taken as gone')
  t.equal(store.chunks.getKeysCount(), 0)
})

t.test('a large file is deleted at once for every reader, its rows and vectors removed after it in slices', async (t) => {
  const store = openStore({ dir: t.testdir() })
  t.teardown(() => store.close())
  const seen: Array<{ removed: number; files: string[]; chunks: number; vectors: number[]; meta: unknown }> = []
  const repo: FileRepo = new FileRepo(store, {
    sliceRows: 3,
    onDeleteSlice: (removed) => {
      seen.push({
        removed,
        files: repo.listFiles('t1').map((f) => f.id),
        chunks: [...repo.tenantChunks('t1')].length,
        vectors: [...repo.index.vectors('files:t1')].map((v) => v.label),
        meta: repo.index.meta('files:t1'),
      })
    },
  })
  await repo.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-keep', 2), embedderId: 'e1', check: () => {} })
  const added = await repo.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-big', 8), embedderId: 'e1', check: () => {} })
  const change = await repo.deleteFile('t1', 'files:t1', 'file-big')
  t.match(change, { fromVersion: 2, meta: { version: 3, count: 2 }, labels: added.labels })
  t.same(repo.index.changes('files:t1', 3, 3), [{ remove: added.labels }], 'one change log entry, as a whole delete')
  t.same(seen.map((s) => s.removed), [0, 3, 6], 'three slices')
  for (const s of seen) t.match(s, { files: ['file-keep'], chunks: 2, vectors: [0, 1], meta: { version: 3, count: 2 } }, `before slice ${s.removed}: gone`)
  t.same([...store.chunks.getKeys({ start: ['t1', 'file-big', 0], end: ['t1', 'file-big', 99] })], [], 'no row left')
  t.same([...store.vectors.getKeys({ start: ['files:t1', 0], end: ['files:t1', 99] })].map((k) => (k as [string, number])[1]), [0, 1], 'no vector left')
  t.equal(await repo.recover(), 0, 'nothing pending')
  t.equal(await repo.deleteFile('t1', 'files:t1', 'file-big'), undefined, 'a second delete finds nothing')
})

t.test('a large delete stopped part-way is finished by recover, and the file stays deleted', async (t) => {
  const store = openStore({ dir: t.testdir() })
  t.teardown(() => store.close())
  const repo = new FileRepo(store, {
    sliceRows: 3,
    onDeleteSlice: (removed) => {
      if (removed === 3) throw new Error('the process stops here')
    },
  })
  await repo.insertFile({ tenant: 't1', namespace: 'files:t1', ...big('file-big', 8), embedderId: 'e1', check: () => {} })
  t.match(await repo.deleteFile('t1', 'files:t1', 'file-big'), { meta: { version: 2, count: 0 } }, 'the delete itself succeeded')
  t.same(repo.listFiles('t1'), [])
  t.equal([...store.chunks.getKeys({ start: ['t1', 'file-big', 0], end: ['t1', 'file-big', 99] })].length, 5, 'five rows left after the first slice')
  t.same([...repo.index.vectors('files:t1')], [], 'and their vectors are not loaded')
  const after = new FileRepo(store)
  t.equal(await after.recover(), 1, 'the removal left behind is finished')
  t.equal([...store.chunks.getKeys({ start: ['t1', 'file-big', 0], end: ['t1', 'file-big', 99] })].length, 0)
  t.equal([...store.vectors.getKeys({ start: ['files:t1', 0], end: ['files:t1', 99] })].length, 0)
  t.match(after.index.meta('files:t1'), { version: 2, count: 0, nextLabel: 8 })
})
