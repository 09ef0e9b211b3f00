/**
 * Several gateway processes on one machine sharing one DATA_DIR (LMDB is multi-process safe): two `recallgate serve`
 * processes on their own ports, and `serve --workers 2` on one port. What one process writes, the next request to any
 * other sees (sessions, files, deletes), however warm its caches were; kill -9 of one loses no acknowledged exchange.
 * None of that needs Redis (each process limits on its own, in process); only `serve --workers`, whose plan is shared,
 * does.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import t from 'tap'
import { startMockUpstream } from '../src/mock-upstream.js'
import { spawnGateway, type ChildGateway } from './helpers/child-gateway.js'
import { answeredBy, fresh, READY, startWorkers } from './helpers/workers.js'
import { sharedRedisUrl, skipWithout } from './helpers/services.js'
import { until } from './helpers/until.js'

// Child gateways start in ~1 s from dist (CI), but from source under a loaded machine each can take tens of seconds.
t.setTimeout(360_000)

const KEY = `sk-shared-store-${process.pid}-${Date.now()}`
const FREE = `sk-shared-free-${process.pid}-${Date.now()}`
type Meta = { memory: { historyMessages: number }; rag: { resultsFound: number; sources: Array<{ file_id: string }> } }

function client(gw: ChildGateway): OpenAI {
  return new OpenAI({ baseURL: `${gw.url}/api/v1`, apiKey: 'sk-or-provider', defaultHeaders: { serviceKey: KEY }, maxRetries: 0 })
}

async function chat(gw: ChildGateway, sessionId: string, content: string, extra: Record<string, unknown> = {}): Promise<Meta> {
  const r = await client(gw).chat.completions.create({
    model: 'openai/gpt-4o',
    messages: [{ role: 'user', content }],
    ...({ sessionId, useRAG: false, ...extra } as object),
  })
  return (r as unknown as { _metadata: Meta })._metadata
}

async function api(gw: ChildGateway, path: string, init: { method?: string; body?: unknown; key?: string } = {}): Promise<{ status: number; body: any }> {
  const r = await fetch(`${gw.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { serviceKey: init.key ?? KEY, 'content-type': 'application/json' },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  })
  return { status: r.status, body: await r.json() }
}

async function search(gw: ChildGateway, query: string): Promise<string[]> {
  const r = await api(gw, '/api/v1/files/search', { method: 'POST', body: { query, k: 5 } })
  return (r.body.data as Array<{ file_id: string }>).map((h) => h.file_id)
}

t.test('two processes, one DATA_DIR', async (t) => {
  const mock = await startMockUpstream({})
  t.teardown(() => mock.close())
  const dataDir = mkdtempSync(join(tmpdir(), 'recallgate-shared-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const env = { UPSTREAM_BASE_URL: mock.url, DATA_DIR: dataDir, SERVICE_KEYS: `${KEY}:unlimited` }
  const [a, b] = await Promise.all([spawnGateway(env, READY), spawnGateway(env, READY)])
  t.teardown(() => Promise.all([a.stop(), b.stop()]))

  t.test('a session written on one is read on the other, however warm its cache', async (t) => {
    await chat(b, 'trip', 'We are planning a trip to Lisbon.') // B caches the session's history
    await chat(a, 'trip', 'We leave on the fourth of May.')
    const meta = await chat(b, 'trip', 'When do we leave?')
    t.equal(meta.memory.historyMessages, 4, "B's prompt has the exchange saved through A")
    const s = await api(a, `/api/v1/sessions/trip`)
    t.equal(s.body.messages.length, 6, 'and A reads the exchange saved through B')
    t.equal((await api(b, '/api/v1/sessions/trip', { method: 'DELETE' })).status, 200)
    t.equal((await api(a, '/api/v1/sessions/trip')).status, 404, 'deleted through B, gone on A')
    const again = await chat(a, 'trip', 'Anything saved?')
    t.equal(again.memory.historyMessages, 0, 'A never packs the deleted history')
  })

  t.test('a file uploaded on one is retrieved on the other at once, and never after its delete', async (t) => {
    const before = await search(b, 'lighthouse keeper') // B loads the (empty) index
    t.same(before, [])
    const up = await api(a, '/api/v1/files', {
      method: 'POST',
      body: { filename: 'keepers.txt', content: 'The lighthouse keeper of Skerryvore is called MORWENNA. She keeps the light on stormy nights.' },
    })
    t.equal(up.status, 201)
    t.same(await search(b, 'Who keeps the lighthouse at Skerryvore?'), [up.body.id], 'B finds it on the next request')
    const viaChat = await chat(b, 'rag', 'Who is the lighthouse keeper?', { useRAG: true })
    t.same(viaChat.rag.sources.map((s) => s.file_id), [up.body.id])
    const other = await api(b, '/api/v1/files', {
      method: 'POST',
      body: { filename: 'tides.txt', content: 'Spring tides at Skerryvore reach five metres.' },
    })
    t.equal(other.status, 201)
    t.ok((await search(a, 'spring tides Skerryvore')).includes(other.body.id), 'and A finds what B uploaded')
    t.equal((await api(a, `/api/v1/files/${up.body.id}`, { method: 'DELETE' })).status, 200)
    for (const gw of [b, a, b]) {
      t.notOk((await search(gw, 'lighthouse keeper MORWENNA')).includes(up.body.id), 'deleted: never returned again')
      t.equal((await api(gw, `/api/v1/files/${up.body.id}`)).status, 404)
    }
    const after = await chat(b, 'rag', 'Who is the lighthouse keeper?', { useRAG: true })
    t.notOk(after.rag.sources.some((s) => s.file_id === up.body.id), 'not packed into a prompt either')
  })

  t.test('kill -9 of one under load loses no acknowledged exchange', async (t) => {
    const acknowledged: string[] = []
    let stop = false
    const load = async (worker: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const id = `load-${worker}-${i}`
        try {
          await chat(a, id, `message ${i} from loop ${worker}`)
          acknowledged.push(id)
        } catch {
          return // A is gone: this exchange was never acknowledged
        }
      }
    }
    const loops = [0, 1, 2, 3].map(load)
    await until(() => acknowledged.length >= 12 || a.proc.exitCode !== null, '12 acknowledged exchanges on A before killing it')
    t.equal(a.proc.exitCode, null, 'A was still running under load')
    a.proc.kill('SIGKILL')
    stop = true
    await Promise.all(loops)
    await a.exited
    for (const id of acknowledged) {
      const s = await api(b, `/api/v1/sessions/${id}`)
      t.equal(s.status, 200, `${id} is there`)
      t.equal(s.body.messages?.length, 2, `${id} whole`)
    }
    t.ok(acknowledged.length >= 12, `${acknowledged.length} acknowledged exchanges checked`)
  })
})

// `--workers` above 1 needs REDIS_URL (the configuration refuses it without: each worker would enforce the whole plan).
t.test('serve --workers 2: one port, limits shared, writes seen by every worker, SIGTERM drains', { skip: skipWithout('redis') }, async (t) => {
  const redisUrl = await sharedRedisUrl(t)
  const mock = await startMockUpstream({})
  t.teardown(() => mock.close())
  const gw = await startWorkers(t, {
    UPSTREAM_BASE_URL: mock.url,
    SERVICE_KEYS: `${KEY}:unlimited,${FREE}:free`,
    RATE_LIMITS: 'free:5',
    REDIS_URL: redisUrl,
    REDIS_TIMEOUT_MS: '10000',
  })
  const statuses = await Promise.all(Array.from({ length: 12 }, () => fresh(gw.url, '/api/v1/sessions', FREE)))
  t.equal(statuses.filter((s) => s === 200).length, 5, 'exactly the plan across both workers')

  await chat(gw, 'w', 'Remember the number 42.')
  for (let i = 0; i < 6; i++) t.equal(await fresh(gw.url, '/api/v1/sessions/w', KEY), 200, 'every worker sees the session')
  gw.proc.kill('SIGTERM')
  const exit = await gw.exited
  t.same(exit, { code: 0, signal: null }, 'the primary drains its workers and exits 0')
  t.equal(answeredBy(gw, '/api/v1/sessions/:id').size, 2, 'both workers answered')
})
