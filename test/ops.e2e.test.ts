/**
 * Operator-facing behaviour: keys managed by the CLI take effect on a running gateway at once (LMDB), and /metrics
 * reports the traffic it served (on every store engine).
 */
import t from 'tap'
import { Writable } from 'node:stream'
import { main } from '../src/cli/main.js'
import { startHarness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

function capture() {
  let text = ''
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      text += chunk.toString('utf8')
      cb()
    },
  })
  return { stream, text: () => text }
}

// LMDB only: the CLI's key changes reach the running gateway at once through the one LMDB environment. On PostgreSQL
// they reach it within its key cache's 5 s (storage/postgres/key-store.ts), which test/replicas-postgres.e2e.test.ts
// runs through the CLI.
t.test('keys create/list/revoke against the DATA_DIR of a running gateway', async (t) => {
  const h = await startHarness(t)
  const out = capture()
  const err = capture()
  const io = { stdout: out.stream, stderr: err.stream, env: { DATA_DIR: h.dataDir } }
  t.equal(await main(['keys', 'create', '--plan', 'free', '--label', 'ci'], io), 0)
  const key = out.text().trim()
  t.match(key, /^rg_[\w-]{20,}$/)
  t.match(err.text(), /created key_[0-9a-f]{12} \(plan free, tenant t_[0-9a-f]{24}\)/)
  t.match(err.text(), new RegExp(`using DATA_DIR ${h.dataDir}`), 'it says which DATA_DIR it used')
  t.notMatch(err.text(), /warning/, 'an existing DATA_DIR is not created again')

  const ok = await h.fetch('/api/v1/models', { key })
  t.equal(ok.status, 200, 'a key created by the CLI works at once')
  t.equal(ok.headers.get('x-ratelimit-limit-requests'), '10', 'with its plan')

  const listOut = capture()
  t.equal(await main(['keys', 'list'], { ...io, stdout: listOut.stream }), 0)
  const id = /^(key_[0-9a-f]{12})\tfree\t/m.exec(listOut.text())?.[1]
  t.ok(id, 'listed with id and plan')
  t.notMatch(listOut.text(), new RegExp(key), 'the raw key is never listed')

  t.equal(await main(['keys', 'revoke', id ?? ''], { ...io, stdout: capture().stream }), 0)
  t.equal((await h.fetch('/api/v1/models', { key })).status, 401, 'a revoked key is refused at once')
  t.equal(await main(['keys', 'revoke', id ?? ''], { ...io, stdout: capture().stream, stderr: capture().stream }), 1, 'revoking twice fails')
  t.equal(await main(['keys', 'create', '--plan', 'gold'], { ...io, stderr: capture().stream }), 2, 'unknown plan is a usage error')
})

for (const engine of testableEngines(t, 'operator metrics')) {
  t.test(`${engine.name}: /metrics reports requests, upstream timings, tokens, sizes and the token correction`, async (t) => {
    const h = await startHarness(t, { engine, mock: { promptTokenFactor: 1.2, behaviour: { reply: 'ok' } } })
    for (let i = 0; i < 3; i++) {
      await h.client().chat.completions.create({
        model: 'anthropic/claude-3.5-sonnet',
        messages: [{ role: 'user', content: `a long enough prompt to be learned from, number ${i}. `.repeat(8) }],
        ...({ sessionId: 'm' } as object),
      })
    }
    await h.fetch('/api/v1/nope')
    const res = await h.fetch('/metrics', { key: null, provider: null })
    t.equal(res.status, 200)
    t.match(res.headers.get('content-type'), /text\/plain/)
    const text = await res.text()
    t.match(text, /recallgate_http_requests_total\{[^}]*route="\/api\/v1\/chat\/completions"[^}]*status="200"[^}]*\} 3/)
    t.match(text, /recallgate_http_requests_total\{[^}]*status="404"[^}]*\} 1/)
    t.match(text, /recallgate_tokens_total\{[^}]*model="anthropic\/claude-3.5-sonnet"[^}]*type="prompt"[^}]*\} \d+/)
    t.match(text, /recallgate_gateway_overhead_seconds_count 3/)
    if (engine.name === 'lmdb') t.match(text, /recallgate_stored_records\{kind="messages"\} 6/)
    // PostgreSQL's records are not counted here (docs/scaling.md, Not shared): no figure rather than DATA_DIR's zeros.
    else t.notMatch(text, /^recallgate_stored_records\{/m, 'no stored-records figure on PostgreSQL')
    const corr = /recallgate_token_count_correction\{model="anthropic\/claude-3.5-sonnet"\} ([\d.]+)/.exec(text)
    t.ok(corr, 'correction exported for the model')
    t.ok(Number(corr?.[1]) > 1, 'learned that the upstream counts more tokens than we do')
  })
}
