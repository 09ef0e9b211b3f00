/**
 * A start that fails closes what it had opened (main.ts startGateway, compose/closers.ts): with the port taken by
 * another server, `startGateway` rejects with the listen error, and the process is left as it was: no store, pool,
 * Redis connection or server handle open, and DATA_DIR free for the next start. On every store engine (LMDB, and
 * PostgreSQL when the test cluster is there: its pool's connections are handles too).
 */
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import t, { type Test } from 'tap'
import { loadConfig } from '../src/config.js'
import { startGateway } from '../src/main.js'
import { startMockUpstream } from '../src/mock-upstream.js'
import { KEY_A } from './helpers/harness.js'
import { sharedRedisUrl, skipWithout } from './helpers/services.js'
import { testableEngines } from './helpers/store-engines.js'

/** Handles that outlive a start: timers and file reads in flight come and go with the test runner, so they are left out. */
const TRANSIENT = new Set(['Timeout', 'Immediate', 'FSReqCallback'])
const handles = (): string[] => process.getActiveResourcesInfo().filter((r) => !TRANSIENT.has(r)).sort()

/** Handles open now that were not open before (a multiset difference: some of before's may have closed since). */
function added(before: readonly string[]): string[] {
  const left = [...before]
  return handles().filter((h) => {
    const i = left.indexOf(h)
    if (i === -1) return true
    left.splice(i, 1)
    return false
  })
}

/**
 * The handles once the ones closing have closed (a probe of Redis's port by services.ts, the mock's start): else a
 * socket closing in `before` would hide one the start left open. Bounded.
 */
async function settledHandles(): Promise<string[]> {
  let last = handles()
  for (let turn = 0; turn < 100; turn++) {
    await new Promise((r) => setTimeout(r, 20))
    const now = handles()
    if (now.join() === last.join() && !now.includes('ConnectWrap')) return now
    last = now
  }
  return last
}

async function startOnTakenPort(t: Test, env: Record<string, string>): Promise<void> {
  const mock = await startMockUpstream({})
  const dataDir = mkdtempSync(join(tmpdir(), 'recallgate-start-'))
  const holder = createServer()
  holder.listen(0, '127.0.0.1')
  await once(holder, 'listening')
  t.teardown(async () => {
    holder.close()
    await mock.close()
    rmSync(dataDir, { recursive: true, force: true })
  })
  const config = (port: number) =>
    loadConfig({ PORT: String(port), HOST: '127.0.0.1', UPSTREAM_BASE_URL: mock.url, DATA_DIR: dataDir, SERVICE_KEYS: `${KEY_A}:unlimited`, ...env })
  const opts = { logDestination: new PassThrough().resume(), onBootstrapKey: () => undefined }
  const before = await settledHandles()

  const taken = (holder.address() as AddressInfo).port
  await t.rejects(startGateway(config(taken), opts), { code: 'EADDRINUSE' })
  // The refused server's handle finishes closing a few loop turns later: wait for it, bounded.
  for (let turn = 0; turn < 200 && added(before).length > 0; turn++) await new Promise((r) => setTimeout(r, 10))
  t.same(added(before), [], 'no handle left open by the failed start')

  // LMDB's environment was released: the same DATA_DIR opens again and serves.
  const gw = await startGateway(config(0), opts)
  t.teardown(() => gw.close())
  const res = await fetch(`${gw.url}/readyz`)
  t.equal(res.status, 200)
}

for (const engine of testableEngines(t, 'a failed start')) {
  t.test(`${engine.name}: a gateway whose port is taken rejects with the error and leaves nothing open`, async (t) => {
    await startOnTakenPort(t, await engine.env(t))
  })

  t.test(`${engine.name}: with Redis, the failed start closes its connection too`, { skip: skipWithout('redis') }, async (t) => {
    await startOnTakenPort(t, { ...(await engine.env(t)), REDIS_URL: await sharedRedisUrl(t) })
  })
}
