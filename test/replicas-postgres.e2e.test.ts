/**
 * Replicas on separate hosts, as far as one machine can show it: three gateway processes with SEPARATE DATA_DIRs sharing
 * one PostgreSQL (DATABASE_URL). A session written through one is read through the others, a file uploaded through one
 * is retrieved through the others at once and never after its delete, a key created (CLI) works on both at once and stops
 * after its revoke, a plan change or a rotation reaches both within their key cache's 5 s, kill -9 of one under load
 * loses no acknowledged exchange; and a database
 * that goes away gives clean 503s with Retry-After and `/readyz` 503, then recovery without a restart.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import t from 'tap'
import { main } from '../src/cli/main.js'
import { startMockUpstream } from '../src/mock-upstream.js'
import { capturedIo } from './helpers/captured-io.js'
import { spawnGateway, type ChildGateway } from './helpers/child-gateway.js'
import { startHarness } from './helpers/harness.js'
import { freshDatabase, POSTGRES_SKIP_REASON, testDatabaseUrl, withoutService } from './helpers/services.js'
import { cuttableRelay } from './helpers/tcp-relay.js'

t.setTimeout(360_000)
const READY = { readyTimeoutMs: 150_000 }
const KEY = `sk-pg-replicas-${process.pid}-${Date.now()}`
type Meta = { memory: { historyMessages: number } }

const baseUrl = testDatabaseUrl()

function client(url: string, key = KEY): OpenAI {
  return new OpenAI({ baseURL: `${url}/api/v1`, apiKey: 'sk-or-provider', defaultHeaders: { serviceKey: key }, maxRetries: 0 })
}

async function chat(url: string, sessionId: string, content: string): Promise<Meta> {
  const r = await client(url).chat.completions.create({
    model: 'openai/gpt-4o',
    messages: [{ role: 'user', content }],
    ...({ sessionId, useRAG: false } as object),
  })
  return (r as unknown as { _metadata: Meta })._metadata
}

async function api(url: string, path: string, init: { method?: string; key?: string } = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const r = await fetch(`${url}${path}`, { method: init.method ?? 'GET', headers: { serviceKey: init.key ?? KEY } })
  return { status: r.status, body: await r.json(), headers: r.headers }
}

/** Poll `check` until it is true, at most `tries` times 100 ms apart; fails with `what` if it never is. */
async function until(what: string, check: () => Promise<boolean>, tries = 150): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`gave up waiting: ${what}`)
}

if (baseUrl === undefined) {
  withoutService(t, 'gateway replicas sharing PostgreSQL', POSTGRES_SKIP_REASON)
} else {
  t.test('three gateway processes, separate DATA_DIRs, one PostgreSQL', async (t) => {
    const databaseUrl = await freshDatabase(t, baseUrl)
    const mock = await startMockUpstream({})
    t.teardown(() => mock.close())
    const dirs = [0, 1, 2].map(() => mkdtempSync(join(tmpdir(), 'recallgate-pg-replica-')))
    t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })))
    const env = (dir: string): Record<string, string> => ({
      UPSTREAM_BASE_URL: mock.url,
      DATA_DIR: dir,
      SERVICE_KEYS: `${KEY}:unlimited`,
      DATABASE_URL: databaseUrl,
      DATABASE_POOL_SIZE: '4',
    })
    const [a, b, c] = (await Promise.all(dirs.map((d) => spawnGateway(env(d), READY)))) as [ChildGateway, ChildGateway, ChildGateway]
    t.teardown(() => Promise.all([a.stop(), b.stop(), c.stop()]))

    t.test('a session written through one is read and packed through the others; a delete is final on all', async (t) => {
      await chat(b.url, 'trip', 'We are planning a trip to Lisbon.')
      await chat(a.url, 'trip', 'We leave on the fourth of May.')
      const meta = await chat(b.url, 'trip', 'When do we leave?')
      t.equal(meta.memory.historyMessages, 4, "B's prompt has the exchange saved through A")
      const s = await api(a.url, '/api/v1/sessions/trip')
      t.equal(s.body.messages.length, 6, 'and A reads the exchange saved through B')
      t.equal((await chat(c.url, 'trip', 'And who is coming?')).memory.historyMessages, 6, "C's prompt has both replicas' exchanges")
      t.equal((await api(a.url, '/api/v1/sessions/trip')).body.messages.length, 8, "and A reads C's")
      t.same((await api(a.url, '/api/v1/sessions')).body.data.map((x: { id: string }) => x.id), ['trip'])
      t.equal((await api(b.url, '/api/v1/sessions/trip', { method: 'DELETE' })).status, 200)
      t.equal((await api(a.url, '/api/v1/sessions/trip')).status, 404, 'deleted through B, gone on A')
      t.equal((await api(c.url, '/api/v1/sessions/trip')).status, 404, 'and on C')
      t.equal((await chat(a.url, 'trip', 'Anything saved?')).memory.historyMessages, 0)
    })

    t.test('a file uploaded through one is retrieved through the others at once; after a delete, never again by any', async (t) => {
      const search = async (url: string, query: string): Promise<string[]> => {
        const r = await fetch(`${url}/api/v1/files/search`, {
          method: 'POST',
          headers: { serviceKey: KEY, 'content-type': 'application/json' },
          body: JSON.stringify({ query, k: 5 }),
        })
        return ((await r.json()) as { data: Array<{ file_id: string }> }).data.map((h) => h.file_id)
      }
      const upload = async (url: string, filename: string, content: string): Promise<string> => {
        const r = await fetch(`${url}/api/v1/files`, {
          method: 'POST',
          headers: { serviceKey: KEY, 'content-type': 'application/json' },
          body: JSON.stringify({ filename, content }),
        })
        t.equal(r.status, 201, `${filename} uploaded`)
        return ((await r.json()) as { id: string }).id
      }
      t.same(await search(b.url, 'lighthouse keeper'), [], 'B has loaded the empty index first')
      t.same(await search(c.url, 'lighthouse keeper'), [], 'and so has C')
      const keeper = await upload(a.url, 'keepers.txt', 'The lighthouse keeper of Skerryvore is called MORWENNA. She keeps the light on stormy nights.')
      t.same(await search(b.url, 'Who keeps the lighthouse at Skerryvore?'), [keeper], 'B finds it on its next request')
      t.same(await search(c.url, 'Who keeps the lighthouse at Skerryvore?'), [keeper], 'and so does C')
      const viaChat = await client(b.url).chat.completions.create({
        model: 'openai/gpt-4o',
        messages: [{ role: 'user', content: 'Who is the lighthouse keeper of Skerryvore?' }],
      })
      const sources = (viaChat as unknown as { _metadata: { rag: { sources: Array<{ file_id: string }> } } })._metadata.rag.sources
      t.same(sources.map((s) => s.file_id), [keeper], "and packs it into a chat's prompt")
      const tides = await upload(b.url, 'tides.txt', 'Spring tides at Skerryvore reach five metres.')
      t.ok((await search(a.url, 'spring tides Skerryvore')).includes(tides), 'and A finds what B uploaded')
      t.same((await api(a.url, '/api/v1/files?order=asc')).body.data.map((f: { id: string }) => f.id), [keeper, tides])
      t.equal((await api(b.url, `/api/v1/files/${keeper}`, { method: 'DELETE' })).status, 200)
      for (const [name, gw] of [['A', a], ['B', b], ['C', c], ['A', a]] as const) {
        t.notOk((await search(gw.url, 'lighthouse keeper MORWENNA')).includes(keeper), `deleted through B: never returned by ${name}`)
        t.equal((await api(gw.url, `/api/v1/files/${keeper}`)).status, 404)
      }
      t.equal((await api(a.url, `/api/v1/files/${keeper}`, { method: 'DELETE' })).status, 404, 'nor deleted twice')
    })

    t.test('a key created with the CLI works on both replicas at once, and stops on both after its revoke', async (t) => {
      const cli = { DATABASE_URL: databaseUrl, DATA_DIR: dirs[0] as string }
      const created = capturedIo(cli)
      t.equal(await main(['keys', 'create', '--plan', 'pro'], created), 0, created.err())
      const key = created.out().trim()
      const id = /created (key_\w+)/.exec(created.err())?.[1] ?? ''
      t.equal((await api(a.url, '/api/v1/sessions', { key })).status, 200, 'its first request through A is accepted')
      t.equal((await api(b.url, '/api/v1/sessions', { key })).status, 200, 'and through B')
      const revoked = capturedIo(cli)
      t.equal(await main(['keys', 'revoke', id], revoked), 0, revoked.err())
      for (const [name, gw] of [['A', a], ['B', b]] as const) {
        // Each replica's key cache reloads every 5 s: the revoke reaches it within that, not on a fixed schedule.
        await until(`the revoked key refused by ${name}`, async () => (await api(gw.url, '/api/v1/sessions', { key })).status === 401)
      }
      t.pass('refused by both')
    })

    t.test('keys set-plan and rotate through the CLI reach both replicas within their key cache (5 s); the data stays', async (t) => {
      const cli = { DATABASE_URL: databaseUrl, DATA_DIR: dirs[0] as string }
      const created = capturedIo(cli)
      t.equal(await main(['keys', 'create', '--plan', 'pro'], created), 0, created.err())
      t.match(created.err(), /using the PostgreSQL database postgres:\/\/.*\(DATABASE_URL\)/, 'the CLI says which database it used')
      const key = created.out().trim()
      const id = /created (key_\w+)/.exec(created.err())?.[1] ?? ''
      const write = await fetch(`${a.url}/api/v1/conversations`, { method: 'POST', headers: { serviceKey: key, 'content-type': 'application/json' }, body: JSON.stringify({ items: [{ type: 'message', role: 'user', content: 'kept' }] }) })
      t.equal(write.status, 200)
      const conversation = ((await write.json()) as { id: string }).id
      for (const gw of [a, b]) t.equal((await api(gw.url, '/api/v1/sessions', { key })).headers.get('x-ratelimit-limit-requests'), '100', 'pro on both')

      t.equal(await main(['keys', 'set-plan', id, 'free'], capturedIo(cli)), 0)
      for (const [name, gw] of [['A', a], ['B', b]] as const)
        await until(`the free plan on ${name}`, async () => (await api(gw.url, '/api/v1/sessions', { key })).headers.get('x-ratelimit-limit-requests') === '10')

      const rotated = capturedIo(cli)
      t.equal(await main(['keys', 'rotate', id], rotated), 0, rotated.err())
      const next = rotated.out().trim()
      for (const [name, gw] of [['A', a], ['B', b]] as const) {
        t.equal((await api(gw.url, `/api/v1/sessions/${conversation}`, { key: next })).status, 200, `the new key opens the same data on ${name} at once`)
        await until(`the old key refused as revoked by ${name}`, async () => (await api(gw.url, '/api/v1/sessions', { key })).body?.error?.code === 'key_revoked')
      }
      t.pass('both replicas refuse the old key as revoked')
    })

    t.test('kill -9 of one under load loses no acknowledged exchange (checked through both survivors)', async (t) => {
      const acknowledged: string[] = []
      let stop = false
      const load = async (worker: number): Promise<void> => {
        for (let i = 0; !stop && i < 10_000; i++) {
          const id = `load-${worker}-${i}`
          try {
            await chat(a.url, id, `message ${i} from loop ${worker}`)
            acknowledged.push(id)
          } catch {
            return // A is gone: this exchange was never acknowledged
          }
        }
      }
      const loops = [0, 1, 2, 3].map(load)
      await until('12 exchanges acknowledged by A', async () => acknowledged.length >= 12, 600)
      a.proc.kill('SIGKILL')
      stop = true
      await Promise.all(loops)
      await a.exited
      for (const id of acknowledged) {
        for (const [name, gw] of [['B', b], ['C', c]] as const) {
          const s = await api(gw.url, `/api/v1/sessions/${id}`)
          t.equal(s.status, 200, `${id} is there through ${name}`)
          t.equal(s.body.messages?.length, 2, `${id} whole through ${name}`)
        }
      }
      t.ok(acknowledged.length >= 12, `${acknowledged.length} acknowledged exchanges checked`)
    })
  })

  t.test('PostgreSQL away: clean 503s with Retry-After, /readyz says so, recovery without a restart', async (t) => {
    const relay = await cuttableRelay(new URL(await freshDatabase(t, baseUrl)))
    t.teardown(() => relay.close())
    const h = await startHarness(t, { env: { DATABASE_URL: relay.url, DATABASE_STATEMENT_TIMEOUT_MS: '2000' } })
    const url = h.gw.url
    const key = 'sk-test-tenant-a-0001-Vq8Zr3Lw5Ym2'
    const chatOnce = (content: string): Promise<Response> =>
      h.fetch('/api/v1/chat/completions', {
        method: 'POST',
        key,
        body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content }], sessionId: 'outage', useRAG: false }),
        headers: { 'content-type': 'application/json' },
      })
    t.equal((await chatOnce('before the outage')).status, 200)
    t.equal((await fetch(`${url}/readyz`)).status, 200)

    await relay.cut()
    const during = await chatOnce('during the outage')
    t.equal(during.status, 503)
    t.equal(((await during.json()) as { error: { code: string } }).error.code, 'database_unavailable')
    t.ok(Number(during.headers.get('retry-after')) >= 1, 'Retry-After in seconds')
    const list = await api(url, '/api/v1/sessions', { key })
    t.equal(list.status, 503, 'reads too')
    t.equal(list.body.error.code, 'database_unavailable')
    const ready = await fetch(`${url}/readyz`)
    t.equal(ready.status, 503)
    t.same(((await ready.json()) as { stores: Record<string, string> }).stores, { lmdb: 'ok', postgres: 'unavailable' })
    const metrics = await (await fetch(`${url}/metrics`)).text()
    t.match(metrics, /recallgate_store_errors_total\{store="postgres",op="[a-z_]+"\} [1-9]/, 'failures counted per store')

    await relay.restore()
    await until('/readyz 200 again', async () => (await fetch(`${url}/readyz`)).status === 200)
    const after = await chatOnce('after the outage')
    t.equal(after.status, 200, 'served again by the same process')
    const meta = ((await after.json()) as { _metadata: Meta })._metadata
    t.equal(meta.memory.historyMessages, 2, 'the exchange before the outage is there; the refused one saved nothing')
  })
}
