/**
 * Process-level consistency, with the gateway as a real child process (`recallgate serve`, see helpers/child-gateway):
 *
 * - kill -9 under concurrent streaming and non-streaming chats on shared sessions plus file uploads, then a restart
 *   on the same store: every exchange a client saw complete ([DONE], or the whole JSON) is in its session, every
 *   session holds whole user/assistant pairs only, every file answered 201 is there and searchable, and every file
 *   stored is found by search (the vector/BM25 indexes agree with the store, rebuilt from it after the crash).
 * - SIGTERM: the listener closes at once, a stream in flight finishes (and is saved), one that outlives the grace
 *   period is cut (and not saved), logs are flushed, exit code 0.
 *
 * On every store engine (LMDB, and PostgreSQL when the test cluster is there).
 */
import t, { type Test } from 'tap'
import { connect } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startMockUpstream, type MockUpstream } from '../src/mock-upstream.js'
import { openStore } from '../src/storage/store.js'
import { openStores } from '../src/storage/open-stores.js'
import { TokenCounter } from '../src/context/tokenizer.js'
import { hashKey, tenantIdFor } from '../src/auth/service-keys.js'
import { spawnGateway, type ChildGateway } from './helpers/child-gateway.js'
import { testableEngines, type StoreEngine } from './helpers/store-engines.js'

const KEY = 'sk-crash-tenant-0001-Vq8Zr3Lw5Ym2'
const PROVIDER = 'Bearer sk-or-crash-provider'

async function setup(t: Test, engine: StoreEngine, mockOpts: Parameters<typeof startMockUpstream>[0]) {
  const engineEnv = await engine.env(t)
  const mock = await startMockUpstream(mockOpts)
  const dataDir = mkdtempSync(join(tmpdir(), 'recallgate-crash-'))
  const children: ChildGateway[] = []
  const env = { ...engineEnv, DATA_DIR: dataDir, UPSTREAM_BASE_URL: mock.url, SERVICE_KEYS: `${KEY}:unlimited`, SHUTDOWN_GRACE_MS: '1500' }
  t.teardown(async () => {
    for (const c of children) await c.stop()
    await mock.close()
    rmSync(dataDir, { recursive: true, force: true })
  })
  const start = async (): Promise<ChildGateway> => {
    const c = await spawnGateway(env)
    children.push(c)
    return c
  }
  return { mock, dataDir, databaseUrl: engineEnv.DATABASE_URL, start }
}

function api(base: string, path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers)
  headers.set('serviceKey', KEY)
  headers.set('authorization', PROVIDER)
  return fetch(`${base}${path}`, { ...init, headers })
}

const chatBody = (sessionId: string, content: string, stream: boolean) =>
  JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content }], sessionId, stream, useRAG: false })

/** The mock answers `Echo: <last user message>`, so a saved reply can be matched to its question. */
const echo = (user: string) => `Echo: ${user}`

/** Resolves once a new TCP connection to `url` is refused. Bounded polling for an event, not a sleep. */
async function refused(url: string, limitMs = 5_000): Promise<boolean> {
  const { hostname, port } = new URL(url)
  const until = Date.now() + limitMs
  while (Date.now() < until) {
    const outcome = await new Promise<'refused' | 'open'>((resolve) => {
      const s = connect(Number(port), hostname)
      s.once('connect', () => {
        s.destroy()
        resolve('open')
      })
      s.once('error', () => resolve('refused'))
    })
    if (outcome === 'refused') return true
    await new Promise((r) => setImmediate(r))
  }
  return false
}

// Every case runs on both engines (20 s here, on a 2-core machine under load): tap's 120 s would leave too little room
// on CI's loaded machine.
t.setTimeout(240_000)

for (const engine of testableEngines(t, 'process-level consistency')) {
  t.test(`${engine.name}: kill -9 under load, restart: what clients saw complete is there, whole; files are searchable`, async (t) => {
    const { mock, start } = await setup(t, engine, { behaviour: { chunkChars: 2, interChunkDelayMs: 4, ttftMs: 3 } })
    let gw = await start()

    interface Done { sessionId: string; user: string }
    const completed: Done[] = []
    const uploaded: Array<{ id: string; word: string }> = []
    let killed = false
    let streamsReading = 0
    let next = 0
    let onProgress = (): void => undefined
    const progress = (): void => onProgress()

    const chatWorker = async (w: number): Promise<void> => {
      // Workers 0–7 share four sessions, so concurrent saves to one session are part of the test.
      const sessionId = `crash-${w % 4}`
      while (!killed) {
        const n = next++
        const user = `question ${n} from worker ${w}`
        const stream = n % 2 === 0
        try {
          const r = await api(gw.url, '/api/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody(sessionId, user, stream) })
          if (stream) {
            streamsReading++
            progress()
            try {
              const text = await r.text()
              if (r.status === 200 && text.endsWith('data: [DONE]\n\n')) completed.push({ sessionId, user })
            } finally {
              streamsReading--
            }
          } else {
            const body = (await r.json()) as { choices?: Array<{ message: { content: string } }> }
            if (r.status === 200 && body.choices?.[0]?.message.content === echo(user)) completed.push({ sessionId, user })
          }
        } catch {
          // The connection died with the gateway: this exchange never completed for the client.
        }
        progress()
      }
    }
    const uploadWorker = async (): Promise<void> => {
      while (!killed) {
        const n = next++
        const word = `zorbquux${n}`
        const form = new FormData()
        form.append('file', new Blob([`Crash test file ${n}. The secret word is ${word}.`], { type: 'text/plain' }), `f${n}.txt`)
        try {
          const r = await api(gw.url, '/api/v1/files', { method: 'POST', body: form })
          if (r.status === 201) uploaded.push({ id: ((await r.json()) as { id: string }).id, word })
        } catch {
          // As above: an upload cut off by the crash was never acknowledged.
        }
        progress()
      }
    }

    // Kill once enough has completed and at least one stream is mid-flight, so the crash lands inside real work.
    // Bounded: should the load never get there (or the gateway die by itself), stop after 60 s and say so.
    let stuck = false
    const ready = new Promise<void>((resolve) => {
      onProgress = () => {
        if (completed.length >= 40 && uploaded.length >= 3 && streamsReading > 0) resolve()
      }
      const guard = setTimeout(() => {
        stuck = true
        resolve()
      }, 60_000)
      void gw.exited.then(() => resolve())
      t.teardown(() => clearTimeout(guard))
    })
    const workers = [...Array.from({ length: 8 }, (_, w) => chatWorker(w)), uploadWorker()]
    await ready
    t.notOk(stuck, 'the load reached the kill point')
    t.equal(gw.proc.exitCode, null, 'the gateway was still running under load')
    killed = true
    gw.proc.kill('SIGKILL')
    t.match(await gw.exited, { signal: 'SIGKILL' }, 'killed with -9')
    await Promise.all(workers)
    await mock.idle()

    gw = await start()
    const bySession = new Map<string, string[]>()
    for (const c of completed) bySession.set(c.sessionId, [...(bySession.get(c.sessionId) ?? []), c.user])
    t.ok(bySession.size >= 2, `${completed.length} exchanges completed before the kill, over ${bySession.size} sessions`)
    for (let s = 0; s < 4; s++) {
      const id = `crash-${s}`
      const r = await api(gw.url, `/api/v1/sessions/${id}`)
      const messages = r.status === 404 ? [] : ((await r.json()) as { messages: Array<{ role: string; content: string }> }).messages
      const pairsOk = messages.length % 2 === 0 && messages.every((m, i) => (i % 2 === 0 ? m.role === 'user' : m.role === 'assistant' && m.content === echo(messages[i - 1]?.content ?? '')))
      t.ok(pairsOk, `${id}: ${messages.length} messages, all whole user/assistant pairs`)
      const saved = new Set(messages.filter((m) => m.role === 'user').map((m) => m.content))
      const missing = (bySession.get(id) ?? []).filter((u) => !saved.has(u))
      t.same(missing, [], `${id}: every exchange its clients saw complete is saved`)
    }

    const lost: string[] = []
    for (const f of uploaded) if ((await api(gw.url, `/api/v1/files/${f.id}`)).status !== 200) lost.push(f.id)
    t.same(lost, [], `all ${uploaded.length} acknowledged uploads are there`)
    const listed = ((await (await api(gw.url, '/api/v1/files')).json()) as { data: Array<{ id: string; filename: string }> }).data
    t.ok(listed.length >= uploaded.length, `${listed.length} files stored, ${uploaded.length} acknowledged`)
    const unsearchable: string[] = []
    for (const f of listed) {
      const word = `zorbquux${f.filename.slice(1, -4)}`
      const r = await api(gw.url, '/api/v1/files/search', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: word, k: 3 }) })
      const hits = ((await r.json()) as { data: Array<{ file_id: string }> }).data
      if (!hits.some((h) => h.file_id === f.id)) unsearchable.push(f.id)
    }
    t.same(unsearchable, [], 'every file stored is found by search: the indexes agree with the store')
  })

  t.test(`${engine.name}: SIGTERM: stop accepting, finish what is in flight within the grace period, flush, exit 0`, async (t) => {
    const { mock, dataDir, databaseUrl, start } = await setup(t, engine, { behaviour: { reply: 'a slow but finite reply', chunkChars: 2, interChunkDelayMs: 40 } })
    const gw = await start()
    const open = async (sessionId: string) => {
      const r = await api(gw.url, '/api/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody(sessionId, `hello ${sessionId}`, true) })
      const reader = (r.body as ReadableStream<Uint8Array>).getReader()
      const first = await reader.read()
      let text = new TextDecoder().decode(first.value)
      const rest = (async () => {
        try {
          for (;;) {
            const { done, value } = await reader.read()
            if (done) return { text, cut: false }
            text += new TextDecoder().decode(value)
          }
        } catch {
          return { text, cut: true }
        }
      })()
      return { status: r.status, rest }
    }
    // The first stream never ends on its own (the upstream hangs after one chunk); the second takes ~1 s.
    mock.enqueue({ hang: 'mid-stream' })
    const hanging = await open('hangs')
    const slow = await open('slow')
    t.equal(hanging.status, 200)
    t.equal(slow.status, 200)

    gw.proc.kill('SIGTERM')
    t.ok(await refused(gw.url), 'new connections are refused once SIGTERM arrives')
    const finished = await slow.rest
    t.match(finished.text, /data: \[DONE\]\n\n$/, 'the in-flight stream finished normally')
    const cut = await hanging.rest

    t.notMatch(cut.text, /\[DONE\]/, 'the stream that outlived the grace period was cut')
    t.same(await gw.exited, { code: 0, signal: null }, 'exit code 0')

    const log = gw.stdout()
    t.match(log, /"signal":"SIGTERM"/, 'the shutdown is logged')
    t.equal(log.split('\n').filter((l) => l.includes('"route":"/api/v1/chat/completions"')).length, 2, 'both requests were logged before exit (flushed)')

    // Straight from the store, with the gateway gone: the finished exchange is durable, the cut one left nothing.
    const lmdb = openStore({ dir: dataDir })
    const stores = await openStores({ databaseUrl, databasePoolSize: 1, databaseStatementTimeout: 10_000, lmdb, maxMessagesPerSession: 100, now: Date.now, counter: new TokenCounter({ margins: {} }) })
    const tenant = tenantIdFor(hashKey(KEY))
    t.same((await stores.sessions.history(tenant, 'slow')).map((m) => m.text), ['hello slow', 'a slow but finite reply'])
    t.same(await stores.sessions.history(tenant, 'hangs'), [])
    await stores.close()
    await lmdb.close()
  })
}
