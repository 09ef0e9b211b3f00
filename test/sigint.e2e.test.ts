/**
 * Ctrl-C on `recallgate serve` (README: SIGTERM/SIGINT stop it gracefully): with the gateway as a real child process,
 * a stream in flight when SIGINT arrives finishes whole through the official SDK, the exchange is saved, and the
 * process exits 0. SIGTERM's grace-period cut is covered in crash.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import t from 'tap'
import { startMockUpstream } from '../src/mock-upstream.js'
import { SessionRepo } from '../src/storage/session-repo.js'
import { openStore } from '../src/storage/store.js'
import { TokenCounter } from '../src/context/tokenizer.js'
import { hashKey, tenantIdFor } from '../src/auth/service-keys.js'
import { spawnGateway } from './helpers/child-gateway.js'

const KEY = 'sk-sigint-tenant-0001-Vq8Zr3Lw5Ym2'
const REPLY = 'a reply that takes a while to stream to the end'

t.test('SIGINT: the stream in flight finishes whole and is saved, then the process exits 0', async (t) => {
  // ~25 chunks 40 ms apart: the signal arrives while most of the reply is still to come.
  const mock = await startMockUpstream({ behaviour: { reply: REPLY, chunkChars: 2, interChunkDelayMs: 40 } })
  const dataDir = mkdtempSync(join(tmpdir(), 'recallgate-sigint-'))
  t.teardown(async () => {
    await mock.close()
    rmSync(dataDir, { recursive: true, force: true })
  })
  const gw = await spawnGateway({ DATA_DIR: dataDir, UPSTREAM_BASE_URL: mock.url, SERVICE_KEYS: `${KEY}:unlimited`, SHUTDOWN_GRACE_MS: '10000' })
  t.teardown(() => gw.stop())
  const client = new OpenAI({ baseURL: `${gw.url}/api/v1`, apiKey: 'sk-or-sigint-provider', defaultHeaders: { serviceKey: KEY }, maxRetries: 0 })

  const stream = await client.chat.completions.create({
    model: 'openai/gpt-4o',
    messages: [{ role: 'user', content: 'hello' }],
    stream: true,
    ...({ sessionId: 'interrupted', useRAG: false } as object),
  })
  let text = ''
  let signalled = false
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? ''
    if (!signalled && text !== '') {
      signalled = true
      gw.proc.kill('SIGINT')
    }
  }
  t.ok(signalled, 'SIGINT was sent while the reply was streaming')
  t.equal(text, REPLY, 'the stream in flight ended normally with the whole reply')
  t.same(await gw.exited, { code: 0, signal: null }, 'exit code 0')
  t.match(gw.stdout(), /"signal":"SIGINT"/, 'the shutdown is logged with its signal')

  // Straight from LMDB, with the gateway gone: the finished exchange was saved before exit.
  const store = openStore({ dir: dataDir })
  t.teardown(() => store.close())
  const sessions = new SessionRepo(store, { maxMessagesPerSession: 100, clock: Date.now, counter: new TokenCounter({ margins: {} }) })
  t.same(sessions.history(tenantIdFor(hashKey(KEY)), 'interrupted').map((m) => m.text), ['hello', REPLY])
})
