/**
 * The knowledge base's store contract (`FileStore` in src/storage/interface.ts), one file run against every engine
 * (test/helpers/store-engines.ts): files with their chunks, vectors, namespace meta and change log, written and
 * deleted together, tenant-scoped, and seen by another instance (a process on one DATA_DIR, or a replica on one
 * database) as soon as the write resolves.
 */
import t from 'tap'
import { INDEX_LOG_KEEP, type FileRow, type FileStore, type IndexMeta } from '../src/storage/interface.js'
import { testableEngines } from './helpers/store-engines.js'

const file = (id: string, createdAt: number, chunks: number): FileRow => ({
  id,
  object: 'file',
  filename: `${id}.txt`,
  bytes: 100,
  chunks,
  status: 'processed',
  created_at: createdAt,
  metadata: { source: id },
  content_type: 'text/plain',
})

const chunk = (text: string, i: number) => ({ text, tokens: 3, start: i * 10, end: i * 10 + 9, headingPath: i === 0 ? ['Intro'] : [] })
const vector = (seed: number): Float32Array => Float32Array.from({ length: 4 }, (_, i) => seed + i / 10)
const nsOf = (tenant: string): string => `files:${tenant}`

async function insert(files: FileStore, tenant: string, id: string, texts: string[], opts: { createdAt?: number; check?: (m: IndexMeta | undefined) => void } = {}) {
  return files.insertFile({
    tenant,
    namespace: nsOf(tenant),
    file: file(id, opts.createdAt ?? 1000, texts.length),
    chunks: texts.map(chunk),
    vectors: texts.map((_, i) => vector(i)),
    embedderId: 'test:4',
    check: opts.check ?? (() => undefined),
  })
}

async function all<T>(rows: Iterable<T> | AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const r of rows) out.push(r)
  return out
}

for (const engine of testableEngines(t, 'the knowledge base store contract')) {
  t.test(`${engine.name}: a file is stored whole: record, chunks with labels, vectors, meta and its log entry`, async (t) => {
    const s = await engine.open(t)
    const first = await insert(s.files, 'tenant-a', 'file-1', ['alpha one', 'alpha two'], { createdAt: 2000 })
    t.same(first.labels, [0, 1])
    t.match(first.meta, { embedderId: 'test:4', dimension: 4, version: 1, count: 2, nextLabel: 2 })
    t.equal(first.fromVersion, 0)
    t.type(first.meta.epoch, 'string', 'a new namespace draws an epoch')
    const second = await insert(s.files, 'tenant-a', 'file-2', ['beta'], { createdAt: 1000 })
    t.same(second.labels, [2], 'labels continue across files')
    t.same({ from: second.fromVersion, version: second.meta.version, epoch: second.meta.epoch }, { from: 1, version: 2, epoch: first.meta.epoch })

    const again = await s.reopen()
    t.same((await again.files.getFile('tenant-a', 'file-1'))?.metadata, { source: 'file-1' })
    t.same((await again.files.listFiles('tenant-a')).map((f) => f.id), ['file-2', 'file-1'], 'oldest first')
    const at = await again.files.chunksAt('tenant-a', [['file-2', 0], ['file-1', 1], ['file-1', 7], ['file-9', 0]])
    t.same(at.map((c) => c && [c.fileId, c.index, c.chunk.text, c.chunk.label, c.file.filename]), [
      ['file-2', 0, 'beta', 2, 'file-2.txt'],
      ['file-1', 1, 'alpha two', 1, 'file-1.txt'],
      undefined,
      undefined,
    ], 'in the order asked, undefined for what is not there')
    t.same((await again.files.chunksAt('tenant-a', [['file-1', 0]]))[0]?.chunk.headingPath, ['Intro'])
    t.same((await all(again.files.tenantChunks('tenant-a'))).map((c) => `${c.fileId}/${c.index}:${c.chunk.label}`), ['file-1/0:0', 'file-1/1:1', 'file-2/0:2'])
    const idx = again.files.index
    t.same((await idx.meta(nsOf('tenant-a')))?.version, 2)
    t.same(await idx.namespaces('files:'), ['files:tenant-a'])
    t.same((await all(idx.vectors(nsOf('tenant-a')))).map((v) => [v.label, [...v.vector].map((x) => Math.round(x * 10))]), [
      [0, [0, 1, 2, 3]],
      [1, [10, 11, 12, 13]],
      [2, [0, 1, 2, 3]],
    ])
    t.same([...(await idx.vectorsAt(nsOf('tenant-a'), [2, 5])).keys()], [2], 'only the labels stored')
    t.same(await idx.changes(nsOf('tenant-a'), 1, 2), [{ add: [[0, ['file-1', 0]], [1, ['file-1', 1]]] }, { add: [[2, ['file-2', 0]]] }])
    t.same(await idx.changes(nsOf('tenant-a'), 3, 2), [], 'nothing newer')
  })

  t.test(`${engine.name}: tenants are apart: files, chunks, searches' rows and deletes`, async (t) => {
    const s = await engine.open(t)
    await insert(s.files, 'tenant-a', 'file-1', ['secret of a'])
    await insert(s.files, 'tenant-b', 'file-2', ['secret of b'])
    t.equal(await s.files.getFile('tenant-b', 'file-1'), undefined)
    t.same((await s.files.listFiles('tenant-b')).map((f) => f.id), ['file-2'])
    t.same(await s.files.chunksAt('tenant-b', [['file-1', 0]]), [undefined])
    t.same((await all(s.files.tenantChunks('tenant-b'))).map((c) => c.fileId), ['file-2'])
    t.equal(await s.files.deleteFile('tenant-b', nsOf('tenant-b'), 'file-1'), undefined, "another tenant's file is not found")
    t.ok(await s.files.getFile('tenant-a', 'file-1'), 'and stays')
    for (const odd of ['', 'x'.repeat(5000), 'a\u0000b']) {
      t.equal(await s.files.getFile('tenant-a', odd), undefined, `id of length ${odd.length}`)
      t.equal(await s.files.deleteFile('tenant-a', nsOf('tenant-a'), odd), undefined)
    }
  })

  t.test(`${engine.name}: a refused insert writes nothing; a repeated id is refused`, async (t) => {
    const s = await engine.open(t)
    await insert(s.files, 'tenant-a', 'file-1', ['kept'])
    const refuse = (m: IndexMeta | undefined): void => {
      if ((m?.count ?? 0) >= 1) throw new RangeError('full')
    }
    await t.rejects(insert(s.files, 'tenant-a', 'file-2', ['refused'], { check: refuse }), RangeError)
    await t.rejects(insert(s.files, 'tenant-a', 'file-1', ['again']), /already exists/)
    t.same((await s.files.listFiles('tenant-a')).map((f) => f.id), ['file-1'])
    t.match(await s.files.index.meta(nsOf('tenant-a')), { version: 1, count: 1, nextLabel: 1 })
    t.same((await all(s.files.index.vectors(nsOf('tenant-a')))).length, 1)
  })

  t.test(`${engine.name}: a delete takes the file, its chunks and vectors, and logs the labels removed`, async (t) => {
    const s = await engine.open(t)
    await insert(s.files, 'tenant-a', 'file-1', ['one', 'two'])
    await insert(s.files, 'tenant-a', 'file-2', ['three'])
    let told: number | undefined
    const change = await s.files.deleteFile('tenant-a', nsOf('tenant-a'), 'file-1', (c) => (told = c.meta.version))
    t.same(change?.labels.sort(), [0, 1])
    t.match(change?.meta, { version: 3, count: 1, nextLabel: 3 })
    t.equal(told, 3, 'told the change before it resolved')
    const other = await s.another()
    t.equal(await other.files.getFile('tenant-a', 'file-1'), undefined, 'gone for another instance at once')
    t.same(await other.files.chunksAt('tenant-a', [['file-1', 0]]), [undefined])
    t.same((await all(other.files.index.vectors(nsOf('tenant-a')))).map((v) => v.label), [2])
    t.same((await other.files.index.changes(nsOf('tenant-a'), 3, 3))?.[0]?.remove?.sort(), [0, 1])
    t.equal(await s.files.deleteFile('tenant-a', nsOf('tenant-a'), 'file-1'), undefined, 'a second delete finds nothing')
    const next = await insert(other.files, 'tenant-a', 'file-3', ['four'])
    t.same(next.labels, [3], 'labels are never reused')
  })

  t.test(`${engine.name}: concurrent inserts from two instances get distinct labels and one version each`, async (t) => {
    const s = await engine.open(t)
    const other = await s.another()
    const changes = await Promise.all(
      Array.from({ length: 12 }, (_, i) => insert((i % 2 === 0 ? s : other).files, 'tenant-a', `file-${i}`, [`text ${i}`, `more ${i}`])),
    )
    const labels = changes.flatMap((c) => c.labels).sort((a, b) => a - b)
    t.same(labels, Array.from({ length: 24 }, (_, i) => i), 'labels 0..23, none twice')
    t.same(changes.map((c) => c.meta.version).sort((a, b) => a - b), Array.from({ length: 12 }, (_, i) => i + 1), 'versions 1..12')
    const log = await s.files.index.changes(nsOf('tenant-a'), 1, 12)
    t.equal(log?.length, 12, 'the log has every version')
    t.match(await other.files.index.meta(nsOf('tenant-a')), { version: 12, count: 24, nextLabel: 24 })
  })

  t.test(`${engine.name}: the change log keeps the newest INDEX_LOG_KEEP versions`, async (t) => {
    const s = await engine.open(t)
    const n = INDEX_LOG_KEEP + 3
    for (let i = 0; i < n; i++) await insert(s.files, 'tenant-a', `file-${i}`, [`t${i}`])
    t.equal(await s.files.index.changes(nsOf('tenant-a'), 1, n), undefined, 'a process this far behind reloads')
    t.equal((await s.files.index.changes(nsOf('tenant-a'), n - INDEX_LOG_KEEP + 1, n))?.length, INDEX_LOG_KEEP)
  })
}

for (const engine of testableEngines(t, 'reading a knowledge base larger than a page')) {
  t.test(`${engine.name}: a tenant's chunks and vectors are read whole, past any page size, in key order`, async (t) => {
    const s = await engine.open(t)
    const n = 4_100 // more than two of PostgreSQL's 2,000-row pages
    await insert(s.files, 'tenant-a', 'file-a', Array.from({ length: n }, (_, i) => `chunk ${i}`))
    await insert(s.files, 'tenant-a', 'file-b', ['last'])
    const chunks = await all(s.files.tenantChunks('tenant-a'))
    t.equal(chunks.length, n + 1)
    t.same(chunks.slice(1998, 2002).map((c) => c.index), [1998, 1999, 2000, 2001], 'no chunk lost or repeated at a page boundary')
    t.same(chunks.at(-1) && [chunks.at(-1)?.fileId, chunks.at(-1)?.file.filename], ['file-b', 'file-b.txt'])
    const labels = (await all(s.files.index.vectors(nsOf('tenant-a')))).map((v) => v.label)
    t.same(labels, Array.from({ length: n + 1 }, (_, i) => i))
  })
}
