/**
 * Knowledge base end to end: uploads in every format through the API, search, retrieval into the chat prompt with
 * sources, tenant isolation, deletion, and the index rebuilt from the store after its files are lost; on every store
 * engine (LMDB, and PostgreSQL when the test cluster is there).
 */
import t, { type Test } from 'tap'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { KEY_A, KEY_B, startHarness, type Harness } from './helpers/harness.js'
import { uploadJson, uploadMultipart } from './helpers/uploads.js'
import { makePdf } from './helpers/format-fixtures.js'
import { testableEngines } from './helpers/store-engines.js'

interface FileObj { id: string; object: string; filename: string; bytes: number; chunks: number; status: string; created_at: number; metadata: unknown }

async function search(h: Harness, query: string, key = KEY_A, k = 5) {
  const r = await h.fetch('/api/v1/files/search', { method: 'POST', key, provider: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, k }) })
  return (await r.json()) as { data: Array<{ file_id: string; filename: string; chunk_index: number; score: number; text: string }> }
}

const FORMATS: Array<[string, string | Uint8Array, string, string]> = [
  ['notes.txt', 'The walrus colony at Cape Zorbelt numbers 4,217 animals.', 'text/plain', 'Zorbelt'],
  ['guide.md', '# Setup\n\nInstall the quibbleflux driver before anything else.\n\n## Later\n\nOther text.', 'text/markdown', 'quibbleflux'],
  ['page.html', '<html><head><style>.x{color:red}</style><script>var secretScript = 1</script></head><body><h1>Title</h1><p>The flurbonic valve opens at dawn.</p></body></html>', 'text/html', 'flurbonic'],
  ['data.json', JSON.stringify({ product: { name: 'Grommetizer', warranty_years: 7 } }), 'application/json', 'Grommetizer'],
  ['table.csv', 'city,mascot\nSpringfield,Plonkus the owl\nShelbyville,a lemon', 'text/csv', 'Plonkus'],
  ['paper.pdf', makePdf([['The zanthoric constant equals 42.5 exactly.']]), 'application/pdf', 'zanthoric'],
]

// Every case runs on both engines: on a loaded 2-core machine (CI's three jobs at once) the file passed tap's 120 s.
t.setTimeout(300_000)

for (const engine of testableEngines(t, 'the files API')) {
  const start = async (t: Test, env: Record<string, string> = {}): Promise<Harness> => startHarness(t, { engine, env })

  t.test(`${engine.name}: upload in every format; each fact is searchable and lands in the prompt with its source`, async (t) => {
    const h = await start(t)
    const ids: Record<string, string> = {}
    for (const [name, content, type, word] of FORMATS) {
      const r = await uploadMultipart(h, { filename: name, content, type, metadata: JSON.stringify({ source: name }) }, { provider: null })
      const body = (await r.json()) as FileObj
      t.equal(r.status, 201, `${name} → 201`)
      t.match(body, { object: 'file', filename: name, status: 'processed', metadata: { source: name } })
      t.match(body.id, /^file-/)
      t.ok(body.chunks >= 1)
      ids[name] = body.id
      const hits = await search(h, word)
      t.equal(hits.data[0]?.filename, name, `search for ${word} finds ${name} first`)
    }
    const html = await search(h, 'secretScript')
    t.notOk(html.data.some((d) => d.text.includes('secretScript')), 'script contents are not indexed')

    const listed = (await (await h.fetch('/api/v1/files', { provider: null })).json()) as { object: string; data: FileObj[] }
    t.equal(listed.object, 'list')
    t.same(listed.data.map((f) => f.filename).sort(), FORMATS.map((f) => f[0]).sort())
    const one = (await (await h.fetch(`/api/v1/files/${ids['notes.txt']}`, { provider: null })).json()) as FileObj
    t.equal(one.filename, 'notes.txt')

    const res = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'How many animals live at Cape Zorbelt?' }] })
    const meta = (res as unknown as { _metadata: { rag: { enabled: boolean; resultsFound: number; query: string; sources: Array<{ filename: string }> }; context: { includedChunks: number } } })._metadata
    t.equal(meta.rag.enabled, true)
    t.ok(meta.rag.resultsFound > 0)
    t.equal(meta.rag.query, 'How many animals live at Cape Zorbelt?')
    t.equal(meta.rag.sources[0]?.filename, 'notes.txt')
    t.ok(meta.context.includedChunks > 0)
    const sent = h.mock.lastChatBody()?.messages as Array<{ role: string; content: string }>
    t.equal(sent[0]?.role, 'user', 'retrieved context comes as one user message (never hoisted), before the question')
    t.match(sent[0]?.content, /notes\.txt/, 'names the source file')
    t.match(sent[0]?.content, /4,217 animals/)
    t.same(sent.map((m) => m.role), ['user', 'user'])
    t.equal(sent[1]?.content, 'How many animals live at Cape Zorbelt?')
  })

  t.test(`${engine.name}: JSON upload, useRAG:false, ragQuery, and no files → nothing added`, async (t) => {
    const h = await start(t)
    const empty = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'anything' }] })
    t.match((empty as unknown as { _metadata: unknown })._metadata, { rag: { enabled: true, resultsFound: 0 }, context: { includedChunks: 0 } })
    t.equal((h.mock.lastChatBody()?.messages as unknown[]).length, 1)

    const r = await uploadJson(h, { filename: 'facts.md', content: '# Facts\n\nThe password hint is "purple kangaroo".', metadata: { team: 'x' } }, { provider: null })
    t.equal(r.status, 201)
    const off = await h.client().chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [{ role: 'user', content: 'What is the password hint?' }],
      ...({ useRAG: false } as object),
    })
    t.match((off as unknown as { _metadata: unknown })._metadata, { rag: { enabled: false, resultsFound: 0 } })
    t.notMatch(JSON.stringify(h.mock.lastChatBody()), /kangaroo/)

    await h.client().chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [{ role: 'user', content: 'Tell me a joke' }],
      ...({ ragQuery: 'password hint' } as object),
    })
    t.match(JSON.stringify(h.mock.lastChatBody()), /purple kangaroo/, 'ragQuery drives retrieval')
  })

  t.test(`${engine.name}: tenants never see each other’s files; deleted files never come back`, async (t) => {
    const h = await start(t)
    const up = (await (await uploadMultipart(h, { filename: 'a.txt', content: 'Tenant A keeps the moonstone in vault 9.' }, { provider: null })).json()) as FileObj
    t.same((await search(h, 'moonstone vault', KEY_B)).data, [], 'B cannot search A’s files')
    t.equal((await h.fetch(`/api/v1/files/${up.id}`, { key: KEY_B, provider: null })).status, 404)
    t.equal((await h.fetch(`/api/v1/files/${up.id}`, { key: KEY_B, provider: null, method: 'DELETE' })).status, 404)
    await h.client(KEY_B).chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'where is the moonstone?' }] })
    t.notMatch(JSON.stringify(h.mock.lastChatBody()), /vault 9/)

    const del = await h.fetch(`/api/v1/files/${up.id}`, { method: 'DELETE', provider: null })
    t.same(await del.json(), { id: up.id, object: 'file', deleted: true })
    t.same((await search(h, 'moonstone vault')).data, [], 'no chunk of a deleted file is returned')
    t.equal((await h.fetch(`/api/v1/files/${up.id}`, { provider: null })).status, 404)
    await h.restart()
    t.same((await search(h, 'moonstone vault')).data, [], 'still gone after a restart')
  })

  t.test(`${engine.name}: restart with the index files removed: rebuilt from the store`, async (t) => {
    const h = await start(t)
    await uploadMultipart(h, { filename: 'r.txt', content: 'The lighthouse keeper is named Orsolya Brandt.' }, { provider: null })
    await h.gw.close()
    rmSync(join(h.dataDir, 'index'), { recursive: true, force: true })
    await h.restart()
    // Every word of the query is in the file: /files/search leaves out hits below RAG_MIN_RELEVANCE
    const hits = await search(h, 'lighthouse keeper named')
    t.equal(hits.data[0]?.filename, 'r.txt')
  })

  t.test(`${engine.name}: files.list pages as OpenAI's: newest first, limit, after, has_more, order; the SDK follows the pages`, async (t) => {
    const h = await start(t)
    const ids: string[] = []
    for (const name of ['one.txt', 'two.txt', 'three.txt']) {
      ids.push(((await (await uploadMultipart(h, { filename: name, content: `The ${name} file.` }, { provider: null })).json()) as FileObj).id)
      // created_at is in seconds: a second apart, so newest first is one order (ties are ordered by id).
      if (name !== 'three.txt') await new Promise((r) => setTimeout(r, 1_050))
    }
    const client = h.client()
    const first = await client.files.list({ limit: 2 })
    t.same(first.data.map((f) => f.id), [ids[2], ids[1]], 'newest first, two of them')
    t.equal(first.has_more, true)
    t.same((await client.files.list({ limit: 2, after: ids[1] })).data.map((f) => f.id), [ids[0]])
    const all: string[] = []
    for await (const f of client.files.list({ limit: 1 })) all.push(f.id)
    t.same(all, [ids[2], ids[1], ids[0]], "the SDK's auto-pagination gets every file once")
    t.same((await client.files.list({ order: 'asc' })).data.map((f) => f.id), ids, 'oldest first when asked')
    t.same((await client.files.list({ purpose: 'assistants' })).data.length, 3, 'purpose accepted')
    t.match(await client.files.list({ limit: 0 }).catch((e: unknown) => e), { status: 400, param: 'limit' })
    t.match(await client.files.list({ after: 'file-nope' }).catch((e: unknown) => e), { status: 400, param: 'after' })
  })

  t.test(`${engine.name}: READY_AFTER_WARMUP=1: /readyz says warming until the start's preload of the indexes is done`, async (t) => {
    const h = await start(t)
    // Thousands of chunks, and no graph file to load: the start rebuilds the graph from the stored vectors (seconds).
    const text = Array.from({ length: 6_000 }, (_, i) => `Entry ${i}: crate ${i * 7} of batch ${i % 97} left dock ${i % 13} on shift ${i % 5}.`).join('\n')
    t.equal((await uploadMultipart(h, { filename: 'manifest.txt', content: text }, { provider: null })).status, 201)
    await h.gw.close()
    rmSync(join(h.dataDir, 'index'), { recursive: true, force: true })
    await h.restart({ READY_AFTER_WARMUP: '1' })
    const first = await h.fetch('/readyz', { key: null, provider: null })
    t.equal(first.status, 503, 'not ready while the preload runs')
    t.match(await first.json(), { status: 'not_ready', stores: { indexes: 'warming' } })
    t.equal((await h.fetch('/healthz', { key: null, provider: null })).status, 200, 'alive all the while')
    const deadline = Date.now() + 120_000
    let ready: Response | undefined
    while (Date.now() < deadline) {
      ready = await h.fetch('/readyz', { key: null, provider: null })
      if (ready.status === 200) break
      await new Promise((r) => setTimeout(r, 100))
    }
    t.equal(ready?.status, 200, 'ready once it is done')
    t.match(await ready?.json(), { status: 'ready', stores: { indexes: 'ok' } })
    t.match((await search(h, 'crate 4207 batch')).data[0], { filename: 'manifest.txt' }, 'searches answer from the loaded index')
  })

  t.test(`${engine.name}: refusals: 415 unsupported, 413 too large, 400 empty or malformed; nothing left behind`, async (t) => {
    const h = await start(t, { MAX_FILE_BYTES: '2048' })
    const bin = await uploadMultipart(h, { filename: 'image.png', content: new Uint8Array([0x89, 0x50, 0x4e, 0x47]), type: 'image/png' }, { provider: null })
    t.equal(bin.status, 415)
    t.match(await bin.json(), { error: { code: 'unsupported_media_type' } })
    const big = await uploadMultipart(h, { filename: 'big.txt', content: 'x '.repeat(5000) }, { provider: null })
    t.equal(big.status, 413)
    const empty = await uploadMultipart(h, { filename: 'empty.txt', content: '   \n  ' }, { provider: null })
    t.equal(empty.status, 400)
    t.match(await empty.json(), { error: { code: 'empty_file' } })
    const noFile = await uploadJson(h, { filename: 'x.txt' }, { provider: null })
    t.equal(noFile.status, 400)
    t.match(await noFile.json(), { error: { param: 'content' } })
    const badMeta = await uploadMultipart(h, { filename: 'm.txt', content: 'hello world', metadata: '[1,2' }, { provider: null })
    t.equal(badMeta.status, 400)
    t.match(await badMeta.json(), { error: { param: 'metadata' } })
    const wrongType = await h.fetch('/api/v1/files', { method: 'POST', provider: null, headers: { 'content-type': 'text/plain' }, body: 'hi' })
    t.equal(wrongType.status, 415)
    const badSearch = await h.fetch('/api/v1/files/search', { method: 'POST', provider: null, headers: { 'content-type': 'application/json' }, body: '{"query": 5}' })
    t.equal(badSearch.status, 400)
    t.match(await badSearch.json(), { error: { param: 'query' } })
    const list = (await (await h.fetch('/api/v1/files', { provider: null })).json()) as { data: unknown[] }
    t.same(list.data, [], 'no refused upload left a record')
  })

  // A JSON body from 256 KiB on is read in the prepare thread (KnowledgeBase.readJsonUpload): the same file and the
  // same refusals as one read inline.
  t.test(`${engine.name}: a large JSON upload is stored as sent, and refused as a small one is`, async (t) => {
    const h = await start(t, { MAX_FILE_BYTES: String(400 * 1024) })
    const filler = 'Ordinary sentences about nothing in particular fill this paragraph. '.repeat(4500)
    const content = `${filler}\n\nThe glimmerquartz vault opens at half past nine. Ünïcode “quotes” stay as sent.\n`
    t.ok(Buffer.byteLength(content) > 256 * 1024 && Buffer.byteLength(content) < 400 * 1024)
    const ok = await uploadJson(h, { filename: 'big\nnotes.txt', content, metadata: { source: 'wiki', tags: ['a', 'ö'] } }, { provider: null })
    t.equal(ok.status, 201)
    const file = (await ok.json()) as FileObj
    t.match(file, { filename: 'big notes.txt', bytes: Buffer.byteLength(content), metadata: { source: 'wiki', tags: ['a', 'ö'] } })
    const hits = await search(h, 'glimmerquartz vault')
    t.equal(hits.data[0]?.file_id, file.id)
    t.match(hits.data[0]?.text, /glimmerquartz vault opens at half past nine\. Ünïcode “quotes” stay as sent\./)

    const pad = 'x'.repeat(300 * 1024)
    const refused = async (body: string | Buffer, expect: { status: number; code: string; param?: string }): Promise<void> => {
      const r = await h.fetch('/api/v1/files', { method: 'POST', provider: null, headers: { 'content-type': 'application/json' }, body })
      t.equal(r.status, expect.status, expect.code)
      t.match(await r.json(), { error: { code: expect.code, ...(expect.param === undefined ? {} : { param: expect.param }) } })
    }
    await refused(JSON.stringify({ filename: 'a.txt', pad }), { status: 400, code: 'missing_parameter', param: 'content' })
    await refused(JSON.stringify({ filename: ' ', content: pad }), { status: 400, code: 'invalid_parameter', param: 'filename' })
    await refused(JSON.stringify({ filename: 'a.txt', content: 'x'.repeat(500 * 1024) }), { status: 413, code: 'payload_too_large', param: 'content' })
    await refused(`{"filename": "a.txt", "content": "${pad}", "metadata": {"__proto__": {"x": 1}}}`, { status: 400, code: 'invalid_parameter', param: 'metadata.__proto__' })
    await refused(`{"filename": "a.txt", "content": "${pad}`, { status: 400, code: 'invalid_json' })
    await refused(Buffer.concat([Buffer.from(`{"filename": "a.txt", "content": "${pad}`), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]), { status: 400, code: 'invalid_json' })
    await refused(`[${'1,'.repeat(200 * 1024)}1]`, { status: 400, code: 'invalid_json' })
    await refused(`{"filename": "a.txt", "content": "${pad}", "m": ${'['.repeat(200)}${']'.repeat(200)}}`, { status: 400, code: 'invalid_json' })
    const list = (await (await h.fetch('/api/v1/files', { provider: null })).json()) as { data: FileObj[] }
    t.same(list.data.map((f) => f.id), [file.id], 'no refused upload left a record')
  })
}
