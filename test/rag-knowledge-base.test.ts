/**
 * The knowledge base end to end below HTTP, on a real LMDB in a temp dir: upload in every format, retrieval of a
 * unique fact, tenant isolation, delete-then-never-returned, restart with the index file removed / corrupt / stale,
 * embedder mismatch, and that a refused or failed ingestion leaves nothing behind.
 */
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { LocalEmbedder, type Embedder } from '../src/retrieval/embedder.js'
import { KnowledgeBase, type KnowledgeBaseOptions } from '../src/knowledge/knowledge-base.js'
import { FileRepo } from '../src/storage/file-repo.js'
import { openStore } from '../src/storage/store.js'
import { makePdf, upload } from './helpers/format-fixtures.js'

const NOW = 1_700_000_000_000

/** A temp dir removed after the test's other teardowns (they run last-registered first), so closes can still flush. */
function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'rag-kb-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function openKb(dir: string, extra: Partial<KnowledgeBaseOptions> = {}) {
  const store = openStore({ dir })
  let now = NOW
  const kb = new KnowledgeBase({
    files: new FileRepo(store),
    dataDir: dir,
    embedder: new LocalEmbedder(),
    chunkTokens: 64,
    chunkOverlap: 8,
    maxChunksPerFile: 1000,
    // Each upload one second after the previous one.
    clock: () => (now += 1000),
    // Inline: each KnowledgeBase starts its own prepare thread, which under tap loads the TypeScript sources again
    // (≈ 3.5 s a start at load 10; this file opens 20 of them). The thread's path is taken by the first test here
    // and by every upload through the gateway (files.e2e, extract-bombs*.e2e).
    prepareInWorker: false,
    ...extra,
  })
  return {
    store,
    kb,
    async close() {
      await kb.close()
      await store.close()
    },
  }
}

const filler = (topic: string, n: number): string =>
  Array.from({ length: n }, (_, i) => `Paragraph ${i} about ${topic} covers routine matters of ${topic} planning and review.`).join('\n\n')

const indexFiles = (dir: string): string[] =>
  existsSync(join(dir, 'index')) ? readdirSync(join(dir, 'index')).filter((f) => f.endsWith('.hnsw')).map((f) => join(dir, 'index', f)) : []

t.test('a unique fact is retrieved from among other files, in every mode (prepared in the worker thread)', async (t) => {
  const dir = tempDir(t)
  const { kb, close } = openKb(dir, { prepareInWorker: true })
  t.teardown(close)
  await kb.ingest('acme', upload('gardening.txt', filler('gardening', 20)))
  await kb.ingest('acme', upload('finance.md', `# Finance\n\n${filler('budgets', 20)}`))
  const rec = await kb.ingest(
    'acme',
    upload(
      'security.txt',
      `${filler('security', 10)}\n\nThe vault access code is QUARTZ-7781 and it rotates monthly.\n\n${filler('security', 10)}`,
      'text/plain',
      { team: 'ops' },
    ),
  )
  t.match(rec, { object: 'file', filename: 'security.txt', status: 'processed', created_at: NOW / 1000 + 3, metadata: { team: 'ops' }, content_type: 'text/plain' })
  t.match(rec.id, /^file-[0-9a-f]{24}$/)
  t.ok(rec.chunks > 1)
  for (const mode of ['hybrid', 'bm25', 'vector'] as const) {
    const hits = await kb.search('acme', 'What is the vault access code?', 3, mode)
    t.equal(hits[0]?.file_id, rec.id, `${mode}: the fact's file first`)
    t.match(hits[0]?.text, /QUARTZ-7781/, `${mode}: the fact's chunk first`)
    t.equal(hits[0]?.filename, 'security.txt')
  }
  t.same((await kb.list('acme')).map((f) => f.filename), ['gardening.txt', 'finance.md', 'security.txt'])
  t.same(await kb.get('acme', rec.id), rec)
  t.same(await kb.search('acme', 'the of and', 5), [], 'a query of stopwords finds nothing')
  t.same(await kb.search('nobody', 'vault', 5), [], 'a tenant without files gets nothing')
})

t.test('every format is ingested and searchable', async (t) => {
  const dir = tempDir(t)
  const { kb, close } = openKb(dir)
  t.teardown(close)
  const files = [
    upload('a.txt', 'Plain text says the mascot is a TEXTWOMBAT.'),
    upload('b.md', '# Pets\n\n## Mascot\n\nThe markdown mascot is a MARKDOWNOTTER.', 'text/markdown'),
    upload('c.html', '<html><script>var x="SCRIPTFOX"</script><body><h1>Zoo</h1><p>The HTML mascot is a HTMLHERON.</p></body></html>'),
    upload('d.json', JSON.stringify({ mascot: { name: 'JSONJACKAL', legs: 4 } })),
    upload('e.csv', 'animal,role\nCSVCOYOTE,mascot\n'),
    upload('f.pdf', makePdf([['The PDF mascot is a PDFPELICAN.']]), 'application/pdf'),
  ]
  const expected = ['textwombat', 'markdownotter', 'htmlheron', 'jsonjackal', 'csvcoyote', 'pdfpelican']
  const types = ['text/plain', 'text/markdown', 'text/html', 'application/json', 'text/csv', 'application/pdf']
  for (const [i, f] of files.entries()) {
    const rec = await kb.ingest('t1', f)
    t.equal(rec.content_type, types[i], `${f.filename} read as ${types[i]}`)
    t.equal(rec.bytes, f.bytes.length)
    const hits = await kb.search('t1', expected[i] as string, 1)
    t.equal(hits[0]?.file_id, rec.id, `${f.filename}: found by its unique word`)
  }
  const md = (await kb.search('t1', 'markdownotter', 1))[0]
  t.same(md?.heading_path, ['Pets', 'Mascot'], 'heading path kept')
  t.same(await kb.search('t1', 'scriptfox', 5, 'bm25'), [], 'HTML script text is not indexed')
  const json = (await kb.search('t1', 'jsonjackal', 1))[0]
  t.match(json?.text, 'mascot.name: JSONJACKAL')
  const csv = (await kb.search('t1', 'csvcoyote', 1))[0]
  t.match(csv?.text, 'animal: CSVCOYOTE\nrole: mascot')
})

t.test('tenants never see each other’s files or chunks', async (t) => {
  const dir = tempDir(t)
  const { kb, close } = openKb(dir)
  t.teardown(close)
  const a = await kb.ingest('tenant-a', upload('secret.txt', 'The launch password is OPALSTORM.'))
  await kb.ingest('tenant-b', upload('other.txt', 'Tenant b writes about cooking pasta.'))
  for (const mode of ['hybrid', 'bm25', 'vector'] as const) {
    const hits = await kb.search('tenant-b', 'launch password OPALSTORM', 10, mode)
    t.notOk(hits.some((h) => h.file_id === a.id || /OPALSTORM/.test(h.text)), `${mode}: b cannot find a's chunk`)
  }
  t.same((await kb.list('tenant-b')).map((f) => f.filename), ['other.txt'])
  t.equal(await kb.get('tenant-b', a.id), undefined)
  t.equal(await kb.delete('tenant-b', a.id), false, 'b cannot delete a’s file')
  t.equal((await kb.search('tenant-a', 'launch password', 1))[0]?.file_id, a.id, 'still there for a')
  // A tenant id that is a prefix of another must not reach into it.
  await kb.ingest('tenant', upload('p.txt', 'Prefix tenant text.'))
  t.same((await kb.list('tenant')).map((f) => f.filename), ['p.txt'])
})

t.test('a deleted file is never returned again, and its records are gone', async (t) => {
  const dir = tempDir(t)
  const { kb, store, close } = openKb(dir)
  t.teardown(close)
  const keep = await kb.ingest('t', upload('keep.txt', filler('weather', 6)))
  const gone = await kb.ingest('t', upload('gone.txt', `${filler('tides', 6)}\n\nThe lighthouse keeper is named MORWENNA.`))
  t.equal(await kb.delete('t', gone.id), true)
  t.equal(await kb.delete('t', gone.id), false, 'second delete: not found')
  t.equal(await kb.get('t', gone.id), undefined)
  for (const mode of ['hybrid', 'bm25', 'vector'] as const) {
    const hits = await kb.search('t', 'lighthouse keeper MORWENNA tides', 20, mode)
    t.notOk(hits.some((h) => h.file_id === gone.id), `${mode}: nothing from the deleted file`)
  }
  t.equal([...store.chunks.getRange({ start: ['t', gone.id, 0], end: ['t', gone.id, Infinity] })].length, 0, 'chunks deleted')
  t.equal([...store.vectors.getRange({ start: ['files:t', 0], end: ['files:t', Infinity] })].length, keep.chunks, 'only the kept vectors remain')
  await close()
  // Still gone after a restart (the index file is rebuilt or reloaded without it).
  const again = openKb(dir)
  t.teardown(again.close)
  await again.kb.init()
  const hits = await again.kb.search('t', 'lighthouse keeper MORWENNA tides', 20)
  t.notOk(hits.some((h) => h.file_id === gone.id))
  t.equal((await again.kb.search('t', 'weather', 1))[0]?.file_id, keep.id)
})

t.test('restart: a removed, corrupt or stale index file is rebuilt from LMDB', async (t) => {
  const dir = tempDir(t)
  let s = openKb(dir, { graphMin: 0 })
  const first = await s.kb.ingest('t', upload('one.txt', `${filler('rivers', 8)}\n\nThe river guide is called TAMSIN.`))
  await s.close()
  const [file] = indexFiles(dir)
  t.ok(file && existsSync(file), 'index file saved on close')
  const query = 'Who is the river guide?'

  // Removed.
  rmSync(file!)
  s = openKb(dir, { graphMin: 0 })
  await s.kb.init()
  t.ok(existsSync(file!), 'rebuilt and saved at init')
  t.equal((await s.kb.search('t', query, 1, 'vector'))[0]?.file_id, first.id, 'vector search works after rebuild')
  await s.close()

  // Corrupt: same size, bytes flipped in the middle.
  const bytes = readFileSync(file!)
  for (let i = Math.floor(bytes.length / 2); i < bytes.length / 2 + 64; i++) bytes[i] = (bytes[i] as number) ^ 0xff
  writeFileSync(file!, bytes)
  s = openKb(dir, { graphMin: 0 })
  await s.kb.init()
  t.not(readFileSync(file!).equals(bytes), true, 'the corrupt file was replaced')
  t.equal((await s.kb.search('t', query, 1, 'vector'))[0]?.file_id, first.id)
  await s.close()

  // Truncated.
  writeFileSync(file!, readFileSync(file!).subarray(0, 100))
  s = openKb(dir, { graphMin: 0 })
  t.equal((await s.kb.search('t', query, 1, 'vector'))[0]?.file_id, first.id, 'lazy load on first search rebuilds too')
  await s.close()

  // Stale: an older file (and sidecar) put back after another upload.
  copyFileSync(file!, `${file}.old`)
  copyFileSync(`${file}.json`, `${file}.json.old`)
  s = openKb(dir, { graphMin: 0 })
  const second = await s.kb.ingest('t', upload('two.txt', 'The mountain guide is called EIRLYS.'))
  await s.close()
  copyFileSync(`${file}.old`, file!)
  copyFileSync(`${file}.json.old`, `${file}.json`)
  s = openKb(dir, { graphMin: 0 })
  t.teardown(s.close)
  await s.kb.init()
  t.equal((await s.kb.search('t', 'Who is the mountain guide?', 1, 'vector'))[0]?.file_id, second.id, 'stale file rebuilt: newer upload found')
  t.equal((await s.kb.search('t', query, 1, 'vector'))[0]?.file_id, first.id)
})

t.test('refused uploads: unsupported → 415, empty → 400, too many chunks → 413; nothing is stored', async (t) => {
  const dir = tempDir(t)
  const { kb, store, close } = openKb(dir, { maxChunksPerFile: 2 })
  t.teardown(close)
  await t.rejects(kb.ingest('t', upload('img.png', Buffer.from([0x89, 0x50, 0, 0]), 'image/png')), { code: 'unsupported_media_type', status: 415 })
  await t.rejects(kb.ingest('t', upload('empty.txt', '   \n\n ')), { code: 'empty_file', status: 400 })
  await t.rejects(kb.ingest('t', upload('big.txt', filler('size', 40))), { code: 'payload_too_large', status: 413 })
  t.same(await kb.list('t'), [])
  t.equal(store.chunks.getKeysCount(), 0)
  t.equal(store.vectors.getKeysCount(), 0)
})

t.test('a failed ingestion leaves nothing behind', async (t) => {
  const dir = tempDir(t)
  const failing: Embedder = {
    id: 'local:hash-v1:256',
    dimension: 256,
    embed: () => Promise.reject(new Error('embedder down')),
  }
  let s = openKb(dir, { embedder: failing })
  await t.rejects(s.kb.ingest('t', upload('a.txt', filler('x', 5))), /embedder down/)
  const wrongSize: Embedder = { id: 'local:hash-v1:256', dimension: 256, embed: (texts) => Promise.resolve(texts.map(() => new Float32Array(3))) }
  await s.close()
  s = openKb(dir, { embedder: wrongSize })
  t.teardown(s.close)
  await t.rejects(s.kb.ingest('t', upload('a.txt', filler('x', 5))), { code: 'upstream_invalid_response' })
  t.same(await s.kb.list('t'), [])
  t.equal(s.store.files.getKeysCount(), 0)
  t.equal(s.store.chunks.getKeysCount(), 0)
  t.equal(s.store.vectors.getKeysCount(), 0)
  t.equal(s.store.meta.get(['index', 'files:t']), undefined, 'no namespace meta')
})

t.test('a tenant indexed with another embedder is refused with a clear message until its files are gone', async (t) => {
  const dir = tempDir(t)
  let s = openKb(dir)
  const rec = await s.kb.ingest('t', upload('a.txt', 'Apples are red.'))
  await s.close()
  s = openKb(dir, { embedder: new LocalEmbedder({ dimension: 512 }) })
  t.teardown(s.close)
  const refusal = { code: 'embedder_mismatch', status: 400, message: /local:hash-v1:256.*local:hash-v1:512/ }
  await t.rejects(s.kb.ingest('t', upload('b.txt', 'Pears are green.')), refusal)
  await t.rejects(s.kb.search('t', 'apples', 3), refusal)
  t.equal((await s.kb.search('t', 'apples', 3, 'bm25'))[0]?.file_id, rec.id, 'lexical search still works')
  t.equal((await s.kb.list('t')).length, 1, 'the refused upload stored nothing')
  await s.kb.ingest('other', upload('c.txt', 'Another tenant is unaffected.'))
  t.equal(await s.kb.delete('t', rec.id), true)
  const fresh = await s.kb.ingest('t', upload('b.txt', 'Pears are green.'))
  t.equal((await s.kb.search('t', 'pears', 1))[0]?.file_id, fresh.id, 'an emptied tenant starts over with the new embedder')
})

t.test('many files in one tenant: concurrent uploads get distinct labels', async (t) => {
  const dir = tempDir(t)
  const { kb, close } = openKb(dir)
  t.teardown(close)
  const recs = await Promise.all(
    Array.from({ length: 8 }, (_, i) => kb.ingest('t', upload(`f${i}.txt`, `${filler(`topic${i}`, 3)}\n\nUnique marker ZX${i}Q${i}.`))),
  )
  for (const [i, rec] of recs.entries()) {
    const hits = await kb.search('t', `ZX${i}Q${i}`, 1, 'bm25')
    t.equal(hits[0]?.file_id, rec.id, `file ${i} found by its marker`)
  }
})

t.test('file ids come from the injected clock and random source', async (t) => {
  const dir = tempDir(t)
  const { kb, close } = openKb(dir, { random: () => 0.999, clock: () => NOW })
  t.teardown(close)
  const rec = await kb.ingest('t', upload('a.txt', 'Some text.'))
  t.equal(rec.id, `file-${NOW.toString(16).padStart(12, '0')}${'f'.repeat(12)}`)
  await t.rejects(kb.ingest('t', upload('b.txt', 'Other text.')), /already exists/, 'a repeated id never overwrites a file')
  t.same((await kb.list('t')).map((f) => f.filename), ['a.txt'])
})

t.test('files uploaded within one second list in the order they were uploaded, whatever their random part', async (t) => {
  const dir = tempDir(t)
  let ms = NOW
  let r = 1
  // The random part falls as the time rises: ordered by it alone, the files would list backwards.
  const { kb, close } = openKb(dir, { clock: () => (ms += 7), random: () => (r = Math.max(0, r - 0.01)) })
  t.teardown(close)
  const names = ['one.txt', 'two.txt', 'three.txt', 'four.txt', 'five.txt']
  for (const name of names) await kb.ingest('t', upload(name, `Text of ${name}.`))
  const listed = await kb.list('t')
  t.equal(new Set(listed.map((f) => f.created_at)).size, 1, 'all in one second')
  t.same(listed.map((f) => f.filename), names)
})

t.test('a large upload is written in slices: a search meanwhile sees none of it, and all of it once the upload answers', async (t) => {
  const dir = tempDir(t)
  const store = openStore({ dir })
  let kb: KnowledgeBase | undefined
  const during: string[][] = []
  // Slices of 4 chunks; between two, search as a client would (the file's unique fact and its common words).
  const files = new FileRepo(store, {
    sliceRows: 4,
    onSlice: async () => {
      for (const mode of ['hybrid', 'bm25', 'vector'] as const) {
        for (const q of ['vault code QUARTZ-7781', 'security review'])
          during.push((await (kb as KnowledgeBase).search('acme', q, 10, mode)).map((h) => h.filename))
      }
    },
  })
  kb = new KnowledgeBase({ files, dataDir: dir, embedder: new LocalEmbedder(), chunkTokens: 64, chunkOverlap: 8, maxChunksPerFile: 1000, clock: () => NOW, prepareInWorker: false })
  t.teardown(async () => {
    await kb?.close()
    await store.close()
  })
  await kb.ingest('acme', upload('gardening.txt', filler('gardening', 5)))
  const text = `${filler('security', 30)}\n\nThe vault access code is QUARTZ-7781 and it rotates monthly.\n\n${filler('security', 30)}`
  const rec = await kb.ingest('acme', upload('security.txt', text))
  t.ok(rec.chunks > 8, `${rec.chunks} chunks: several slices`)
  t.ok(during.length > 0)
  t.same([...new Set(during.flat())].filter((f) => f === 'security.txt'), [], 'no search between slices returned any of the file')
  // At once, not after the index's background work: hybrid, lexical and vector search all find the fact.
  for (const mode of ['hybrid', 'bm25', 'vector'] as const) {
    const hits = await kb.search('acme', 'what is the vault access code QUARTZ-7781', 3, mode)
    t.ok(hits.some((h) => h.file_id === rec.id && h.text.includes('QUARTZ-7781')), `${mode}: found as soon as the upload answered`)
  }
  t.equal((await kb.search('acme', 'security planning review', 100, 'bm25')).filter((h) => h.file_id === rec.id).length, Math.min(100, rec.chunks), 'all its chunks')
})

t.test('a question spelled without the accents, or with another ending, finds its passage and its relevance', async (t) => {
  const dir = tempDir(t)
  // Relevance of the words alone (no word pairs: "Mongke renounce" is "Möngke Khan renounced" in the file).
  const { kb, close } = openKb(dir, { phraseWeight: 0 })
  t.teardown(close)
  await kb.ingest('acme', upload('misc.txt', filler('gardening', 12)))
  const rec = await kb.ingest('acme', upload('history.txt', `${filler('archives', 6)}\n\nMöngke Khan renounced the treaty after the envoys produced the letters.\n\n${filler('archives', 6)}`))
  const hits = await kb.search('acme', 'Why did Mongke renounce the treaty the envoys produce?', 3, 'bm25')
  t.equal(hits[0]?.file_id, rec.id)
  t.match(hits[0]?.text, /Möngke Khan renounced/)
  t.equal(hits[0]?.relevance, 1, 'every word of the question is found, spelled as the file spells it or not')
  // Files indexed before the folding (same embedder, same stored vectors) are searched the same way after a restart.
  await close()
  const again = openKb(dir)
  t.teardown(again.close)
  t.match((await again.kb.search('acme', 'mongke renounce', 1))[0]?.text, /Möngke Khan renounced/)
  const unfolded = openKb(tempDir(t), { foldTerms: false })
  t.teardown(unfolded.close)
  await unfolded.kb.ingest('acme', upload('history.txt', 'Möngke Khan renounced the treaty.'))
  t.same(await unfolded.kb.search('acme', 'mongke renounce', 1, 'bm25'), [], 'without folding neither word matches')
})
