/**
 * What a new user tripped over (issue 14), through the API on real sockets: two files in one form, missing fields,
 * confusing 404s and limits, and error log lines that said only the code. On every store engine (LMDB, and
 * PostgreSQL when the test cluster is there).
 */
import t from 'tap'
import { KEY_A, startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'
import { uploadMultipart } from './helpers/uploads.js'

const json = (h: Harness, path: string, body: unknown) =>
  h.fetch(path, { method: 'POST', provider: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })

for (const engine of testableEngines(t, 'rough edges')) {
  t.test(`${engine.name}: two files in one multipart request: a 400 that says one file per request, and nothing stored`, async (t) => {
    const h = await startHarness(t, { engine })
    const form = new FormData()
    form.append('file', new Blob(['# A\n\nAlpha text.'], { type: 'text/markdown' }), 'a.md')
    form.append('file', new Blob(['k,v\nb,2'], { type: 'text/csv' }), 'b.csv')
    const r = await h.fetch('/api/v1/files', { method: 'POST', body: form, key: KEY_A, provider: null })
    t.equal(r.status, 400)
    t.match(await r.json(), { error: { code: 'invalid_parameter', param: 'file', message: /One file per request/ } })
    const other = new FormData()
    other.append('document', new Blob(['text'], { type: 'text/plain' }), 'a.txt')
    const o = await h.fetch('/api/v1/files', { method: 'POST', body: other, key: KEY_A, provider: null })
    t.equal(o.status, 400)
    t.match(await o.json(), { error: { param: 'document', message: /`file`/ } })
    const list = (await (await h.fetch('/api/v1/files', { provider: null })).json()) as { data: unknown[] }
    t.same(list.data, [])
  })

  t.test(`${engine.name}: missing fields are missing_parameter, as documented`, async (t) => {
    const h = await startHarness(t, { engine })
    const search = await json(h, '/api/v1/files/search', { k: 3 })
    t.equal(search.status, 400)
    t.match(await search.json(), { error: { code: 'missing_parameter', param: 'query' } })
    const upload = await json(h, '/api/v1/files', { filename: 'x.txt' })
    t.match(await upload.json(), { error: { code: 'missing_parameter', param: 'content' } })
    const noName = await json(h, '/api/v1/files', { content: 'hello' })
    t.match(await noName.json(), { error: { code: 'missing_parameter', param: 'filename' } })
    const wrong = await json(h, '/api/v1/files/search', { query: 5 })
    t.match(await wrong.json(), { error: { code: 'invalid_parameter', param: 'query' } }, 'present but wrong stays invalid_parameter')
  })

  t.test(`${engine.name}: GET on the search route is a 405; a bad escape in an id is a 400 about the encoding`, async (t) => {
    const h = await startHarness(t, { engine })
    const get = await h.fetch('/api/v1/files/search?query=x', { provider: null })
    t.equal(get.status, 405)
    t.equal(get.headers.get('allow'), 'POST')
    t.match(await get.json(), { error: { code: 'method_not_allowed' } })
    const bad = await h.fetch('/api/v1/sessions/%zz', { provider: null })
    t.equal(bad.status, 400)
    t.match(await bad.json(), { error: { code: 'invalid_parameter', param: 'id', message: /percent-encoding/ } })
  })

  t.test(`${engine.name}: an oversized upload names the documented limit`, async (t) => {
    const h = await startHarness(t, { engine, env: { MAX_FILE_BYTES: '4096' } })
    const r = await uploadMultipart(h, { filename: 'big.txt', content: 'x '.repeat(100_000) }, { provider: null })
    t.equal(r.status, 413)
    t.match(await r.json(), { error: { code: 'payload_too_large', message: 'The upload exceeds MAX_FILE_BYTES (4096 bytes)' } })
  })

  t.test(`${engine.name}: error log lines carry the param and our message, never the upstream’s text or the content`, async (t) => {
    const h = await startHarness(t, { engine })
    await json(h, '/api/v1/files/search', { query: '' })
    const secret = 'my-very-private-words'
    await h.client().chat.completions.create({ model: 'not-a-model', messages: [{ role: 'user', content: secret }] }).catch(() => undefined)
    await new Promise((r) => setTimeout(r, 300)) // request lines are written in batches
    const lines = h.logs().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>)
    const search = lines.find((l) => l.route === '/api/v1/files/search')
    t.match(search, { errorCode: 'invalid_parameter', errorParam: 'query', errorMessage: 'query must be a non-empty string' })
    const chat = lines.find((l) => l.route === '/api/v1/chat/completions')
    t.match(chat, { status: 400, errorParam: 'model' })
    t.notOk(h.logs().includes(secret), 'message content never logged')
  })
}
