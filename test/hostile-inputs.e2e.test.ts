/**
 * The smaller gaps of issue 29, end to end: ids and names that one byte string could alias into another, and
 * control characters in file names. On every store engine (LMDB, and PostgreSQL when the test cluster is there).
 */
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib'
import t from 'tap'
import { KEY_B, startHarness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'
import { uploadJson, uploadMultipart } from './helpers/uploads.js'

/** What a client sending `s` as UTF-8 in a header puts on the wire (fetch takes header values as Latin-1 bytes). */
const asHeaderBytes = (s: string): string => Buffer.from(s, 'utf8').toString('latin1')

for (const engine of testableEngines(t, 'hostile inputs')) {
  t.test(`${engine.name}: x-session-id is read as UTF-8: the same session as the id in the body; invalid UTF-8 is refused`, async (t) => {
    const h = await startHarness(t, { engine })
    const chat = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
      h.fetch('/api/v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ model: 'openai/gpt-4o', useRAG: false, ...body }),
      })
    const viaHeader = await chat({ messages: [{ role: 'user', content: 'first, by header' }] }, { 'x-session-id': asHeaderBytes('café ☕') })
    t.equal(viaHeader.status, 200)
    t.match(await viaHeader.json(), { _metadata: { memory: { sessionId: 'café ☕' } } }, 'the header names the session café ☕')
    const viaBody = await chat({ sessionId: 'café ☕', messages: [{ role: 'user', content: 'second, by body' }] })
    t.match(await viaBody.json(), { _metadata: { memory: { sessionId: 'café ☕', historyMessages: 2 } } }, 'the body finds the same session')
    const list = (await (await h.fetch('/api/v1/sessions')).json()) as { data: Array<{ id: string }> }
    t.same(list.data.map((s) => s.id), ['café ☕'], 'one session, not two')

    const bad = await chat({ messages: [{ role: 'user', content: 'x' }] }, { 'x-session-id': 'caf\xe9' })
    t.equal(bad.status, 400, 'a header that is not UTF-8 (a Latin-1 é) is refused')
    t.match(await bad.json(), { error: { code: 'invalid_parameter', param: 'x-session-id' } })

    // A body whose sessionId holds a byte that is not UTF-8: refused, not read as U+FFFD.
    const raw = Buffer.concat([
      Buffer.from('{"model":"openai/gpt-4o","sessionId":"caf', 'utf8'),
      Buffer.from([0xe9]),
      Buffer.from('","messages":[{"role":"user","content":"x"}]}', 'utf8'),
    ])
    const badBody = await h.fetch('/api/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: raw })
    t.equal(badBody.status, 400, 'a body that is not UTF-8 is refused')
    t.match(await badBody.json(), { error: { code: 'invalid_json', message: /UTF-8/ } })
  })

  t.test(`${engine.name}: file names with NUL, CR or LF are stored with spaces instead, and the 201 says so`, async (t) => {
    const h = await startHarness(t, { engine })
    for (const name of ['a\nb.txt', 'a\rb.txt', 'a\u0000b.txt', 'a\r\nb.txt']) {
      const res = await uploadJson(h, { filename: name, content: 'some text' })
      t.equal(res.status, 201, `${JSON.stringify(name)} stored`)
      t.match(await res.json(), { filename: name.replace(/[\r\n\u0000]/g, ' ') }, 'under the cleaned name, shown in the 201')
    }
    const multipart = await uploadMultipart(h, { filename: 'line\nbreak.txt', content: 'some text' })
    t.equal(multipart.status, 201, 'multipart too')
    await multipart.json()
    const names = ((await (await h.fetch('/api/v1/files')).json()) as { data: Array<{ filename: string }> }).data.map((f) => f.filename)
    t.same(names.filter((n) => /[\r\n\u0000]/.test(n)), [], 'no stored name holds NUL, CR or LF')
  })

  t.test(`${engine.name}: a NUL or an unpaired surrogate in stored text is stored (PostgreSQL: as U+FFFD), never a 500`, async (t) => {
    const h = await startHarness(t, { engine })
    const post = (path: string, body: unknown) => h.fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
    // What a client sent, or (PostgreSQL, whose text holds neither; LMDB for the surrogate) U+FFFD in its place.
    const kept = (sent: string) => new RegExp(`^${sent.replace(/[\u0000\ud800-\udfff]/g, '(?:$&|\ufffd+)')}$`)
    for (const [name, text] of [['a NUL', 'a\u0000b'], ['an unpaired surrogate', 'a\udca2b']] as const) {
      const chat = await post('/api/v1/chat/completions', { model: 'openai/gpt-4o', messages: [{ role: 'user', content: text }], sessionId: `odd ${name}`, useRAG: false })
      t.equal(chat.status, 200, `${name} in a message: 200`)
      const session = (await (await h.fetch(`/api/v1/sessions/${encodeURIComponent(`odd ${name}`)}`)).json()) as { messages: Array<{ content: string }> }
      t.match(session.messages[0]?.content, kept(text), `${name} in a message: saved`)

      const conv = await post('/api/v1/conversations', { metadata: { [`k${text}`]: text } })
      t.equal(conv.status, 200, `${name} in conversation metadata: 200`)
      const { id } = (await conv.json()) as { id: string }
      const read = (await (await h.fetch(`/api/v1/conversations/${id}`)).json()) as { metadata: Record<string, string> }
      t.match(Object.entries(read.metadata), [[kept(`k${text}`), kept(text)]], `${name} in conversation metadata: stored, key and value`)

      const resp = await post('/api/v1/responses', { model: 'openai/gpt-4o', input: text })
      t.equal(resp.status, 200, `${name} in a response's input: 200`)
      const items = (await (await h.fetch(`/api/v1/responses/${((await resp.json()) as { id: string }).id}/input_items`)).json()) as { data: Array<{ content: Array<{ text: string }> }> }
      t.match(items.data[0]?.content[0]?.text, kept(text), `${name} in a response's input: stored`)

      const file = await uploadJson(h, { filename: `${name}.txt`, content: 'The lighthouse keeper logs the tide.', metadata: { note: text } }, { provider: null })
      t.equal(file.status, 201, `${name} in file metadata: 201`)
      const listed = (await (await h.fetch('/api/v1/files', { provider: null })).json()) as { data: Array<{ filename: string; metadata: { note: string } }> }
      t.match(listed.data.find((f) => f.filename === `${name}.txt`)?.metadata.note, kept(text), `${name} in file metadata: stored`)
    }
    t.same(h.logs().split('\n').filter((l) => l.includes('"level":"error"')), [], 'no internal error')
  })

  t.test(`${engine.name}: a __proto__ key in file metadata or a message is refused with a 400 naming where, never stored renamed`, async (t) => {
    const h = await startHarness(t, { engine })
    const json = (path: string, body: string) => h.fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
    const upload = await json('/api/v1/files', '{"filename":"a.txt","content":"alpha","metadata":{"team":"x","__proto__":{"admin":true}}}')
    t.equal(upload.status, 400)
    t.match(await upload.json(), { error: { code: 'invalid_parameter', param: 'metadata.__proto__', message: /`__proto__` key, which cannot be stored as sent/ } })

    // Spelled with an escape: the same key once parsed.
    const escaped = await json('/api/v1/files', '{"filename":"a.txt","content":"alpha","metadata":{"\\u005f_proto__":1}}')
    t.match(await escaped.json(), { error: { param: 'metadata.__proto__' } })

    const form = new FormData()
    form.set('file', new Blob(['alpha'], { type: 'text/plain' }), 'a.txt')
    form.set('metadata', '{"nested":[{"__proto__":1}]}')
    const multipart = await h.fetch('/api/v1/files', { method: 'POST', body: form })
    t.equal(multipart.status, 400)
    t.match(await multipart.json(), { error: { param: 'metadata.nested[0].__proto__' } })

    const chat = await json(
      '/api/v1/chat/completions',
      '{"model":"openai/gpt-4o","sessionId":"p","messages":[{"role":"user","content":[{"type":"text","text":"hi","__proto__":{}}]}]}',
    )
    t.equal(chat.status, 400)
    t.match(await chat.json(), { error: { param: 'messages[0].content[0].__proto__' } })
    t.equal((await h.fetch('/api/v1/sessions/p')).status, 404, 'nothing saved')
    t.equal(h.mock.requests.length, 0, 'nothing sent upstream')

    // Keys that merely look alike are kept as sent, through a restart (read back from LMDB).
    const ok = await json('/api/v1/files', '{"filename":"a.txt","content":"alpha","metadata":{"__proto_":1,"proto":"x","__proto__x":2}}')
    t.equal(ok.status, 201)
    const { id } = (await ok.json()) as { id: string }
    await h.restart()
    t.same(((await (await h.fetch(`/api/v1/files/${id}`)).json()) as { metadata: unknown }).metadata, { __proto_: 1, proto: 'x', __proto__x: 2 })
  })

  t.test(`${engine.name}: Content-Encoding: gzip, deflate and br bodies are decoded within the body limit; others are a 415`, async (t) => {
    const h = await startHarness(t, { engine, env: { MAX_BODY_BYTES: String(64 * 1024) } })
    const body = JSON.stringify({ model: 'openai/gpt-4o', sessionId: 'zipped', messages: [{ role: 'user', content: 'hello, compressed' }] })
    const post = (path: string, data: Buffer | string | FormData, headers: Record<string, string>) =>
      h.fetch(path, { method: 'POST', headers, body: data })
    const json = { 'content-type': 'application/json' }
    for (const [coding, encoded] of [
      ['gzip', gzipSync(body)],
      ['deflate', deflateSync(body)],
      ['br', brotliCompressSync(body)],
    ] as const) {
      const r = await post('/api/v1/chat/completions', encoded, { ...json, 'content-encoding': coding })
      t.equal(r.status, 200, coding)
    }
    const session = (await (await h.fetch('/api/v1/sessions/zipped')).json()) as { messages: { content: string }[] }
    t.equal(session.messages[0]?.content, 'hello, compressed', 'read as the JSON it encodes')

    // 1 MiB of zeros in a string: about 1 KiB gzipped, far past the 64 KiB limit once decoded.
    const bomb = gzipSync(JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: '0'.repeat(1024 * 1024) }] }))
    t.ok(bomb.length < 8 * 1024)
    const refused = await post('/api/v1/chat/completions', bomb, { ...json, 'content-encoding': 'gzip' })
    t.equal(refused.status, 413)
    t.match(await refused.json(), { error: { code: 'payload_too_large', message: 'Request body exceeds 65536 bytes once decoded (Content-Encoding: gzip)' } })

    const corrupt = await post('/api/v1/chat/completions', Buffer.from('not gzip at all'), { ...json, 'content-encoding': 'gzip' })
    t.equal(corrupt.status, 400)
    t.match(await corrupt.json(), { error: { code: 'invalid_json', message: /^Request body is not valid gzip data/ } })

    const unknown = await post('/api/v1/chat/completions', body, { ...json, 'content-encoding': 'compress' })
    t.equal(unknown.status, 415)
    t.match(await unknown.json(), { error: { code: 'unsupported_media_type', message: /Content-Encoding "compress" is not supported/ } })

    // A multipart upload, gzipped whole: decoded on its way to the form parser.
    const form = new Response(formWith('notes.txt', 'zipped notes about llamas'))
    const type = form.headers.get('content-type') ?? ''
    const upload = await post('/api/v1/files', gzipSync(Buffer.from(await form.arrayBuffer())), { 'content-type': type, 'content-encoding': 'gzip' })
    t.equal(upload.status, 201)
    t.match(await upload.json(), { filename: 'notes.txt', bytes: 25 })
    const big = new Response(formWith('big.txt', '0'.repeat(30 * 1024 * 1024)))
    const bigUpload = await post('/api/v1/files', gzipSync(Buffer.from(await big.arrayBuffer())), {
      'content-type': big.headers.get('content-type') ?? '',
      'content-encoding': 'gzip',
    })
    t.equal(bigUpload.status, 413, 'a form inflating past the upload limit')
  })

  function formWith(name: string, text: string): FormData {
    const form = new FormData()
    form.set('file', new Blob([text], { type: 'text/plain' }), name)
    return form
  }

  t.test(`${engine.name}: failed authentications are limited per client address: 429 with Retry-After, valid keys still served`, async (t) => {
    let now = 1_000_000
    const h = await startHarness(t, { engine, env: { AUTH_FAILURE_LIMIT: '3' }, gateway: { clock: () => now } })
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) statuses.push((await h.fetch('/api/v1/sessions', { key: `rg_wrong_key_${i}` })).status)
    statuses.push((await h.fetch('/api/v1/sessions', { key: null })).status)
    t.same(statuses, [401, 401, 401, 429], 'three failures a minute, then 429 (a missing key counts too)')
    const limited = await h.fetch('/api/v1/sessions', { key: 'rg_wrong_key_again' })
    t.equal(limited.status, 429)
    t.equal(limited.headers.get('retry-after'), '20', 'one failure comes back every 20 s at 3 a minute')
    t.match(await limited.json(), {
      error: { code: 'rate_limit_exceeded', type: 'rate_limit_error', message: /^Too many failed authentications from your address \(3 a minute\)/ },
    })
    t.equal((await h.fetch('/api/v1/sessions')).status, 200, 'a valid key from the same address is served (a NAT or proxy shares it)')
    t.equal((await h.fetch('/healthz', { key: 'rg_wrong' })).status, 200, 'routes without a key are not affected')
    now += 20_000
    t.equal((await h.fetch('/api/v1/sessions', { key: 'rg_wrong_key_later' })).status, 401, 'the budget refills with time')
    t.equal((await h.fetch('/api/v1/sessions', { key: 'rg_wrong_key_later' })).status, 429)
  })

  t.test(`${engine.name}: /metrics labels only models the upstream accepted, and METRICS_TOKEN guards it`, async (t) => {
    const token = 'mt_Zk3vQ9xLr2Wp8Ny4Bs7Hd1Jc6Fg5Tm0A'
    const h = await startHarness(t, { engine, env: { METRICS_TOKEN: token } })
    const client = h.client()
    for (let i = 0; i < 5; i++) {
      h.mock.enqueue({ status: 400, errorMessage: `${i} is not a valid model ID` })
      await client.chat.completions.create({ model: `junk/slot-filler-${i}`, messages: [{ role: 'user', content: 'x' }] }).catch(() => undefined)
    }
    await client.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'a real one' }] })

    const open = await fetch(`${h.gw.url}/metrics`)
    t.equal(open.status, 401)
    t.match(await open.json(), { error: { code: 'invalid_metrics_token', type: 'authentication_error' } })
    t.equal((await fetch(`${h.gw.url}/metrics`, { headers: { authorization: 'Bearer wrong' } })).status, 401)
    const scraped = await fetch(`${h.gw.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })
    t.equal(scraped.status, 200)
    const text = await scraped.text()
    t.notMatch(text, /slot-filler/, 'no refused name took a label slot')
    t.match(text, /recallgate_upstream_headers_seconds_count\{model="openai\/gpt-4o-mini"\} 1/)
    t.match(text, /recallgate_upstream_headers_seconds_count\{model="other"\} 5/, 'refused requests are still timed, as other')
  })

  t.test(`${engine.name}: a client-chosen request id never becomes ours: echoed as x-client-request-id and logged beside our own`, async (t) => {
    const h = await startHarness(t, { engine })
    // Tenant B tries to pass its request off as one of tenant A's, by A's id.
    const a = await h.fetch('/api/v1/sessions')
    const aId = a.headers.get('x-request-id') ?? ''
    t.match(aId, /^req_[0-9a-f-]{36}$/)
    const b = await h.fetch('/api/v1/sessions', { key: KEY_B, headers: { 'x-request-id': aId } })
    const bId = b.headers.get('x-request-id') ?? ''
    t.not(bId, aId, 'the forged id is not taken')
    t.match(bId, /^req_/)
    t.equal(b.headers.get('x-client-request-id'), aId, "the client's own id comes back beside ours")
    const c = await h.fetch('/api/v1/sessions', { headers: { 'x-client-request-id': 'trace.42:x', 'x-request-id': 'ignored' } })
    t.equal(c.headers.get('x-client-request-id'), 'trace.42:x', "OpenAI's header wins")
    const odd = await h.fetch('/api/v1/sessions', { headers: { 'x-request-id': 'has spaces' } })
    t.equal(odd.headers.get('x-client-request-id'), null, 'only plain tokens are echoed or logged')

    await h.gw.close()
    const lines = h
      .logs()
      .split('\n')
      .filter((l) => l.includes('"msg":"request"'))
      .map((l) => JSON.parse(l) as { reqId: string; clientRequestId?: string; tenant: string })
    t.equal(lines.filter((l) => l.reqId === aId).length, 1, "one line carries A's id: A's own")
    t.match(lines.find((l) => l.reqId === bId), { clientRequestId: aId })
  })
}
