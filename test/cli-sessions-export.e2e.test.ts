/**
 * `recallgate sessions export … | head` (issue 27, item 11): the real bin in a child process, its stdout a pipe that
 * the reader closes after the first bytes, as `head` does. It ends quietly (exit 0, nothing on stderr), not with an
 * unhandled EPIPE and a stack trace. On every store engine (LMDB, and PostgreSQL when the test cluster is there): the
 * gateway reads the session from it while the export streams.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { hashKey, tenantIdFor } from '../src/auth/service-keys.js'
import { TokenCounter } from '../src/context/tokenizer.js'
import { openStores } from '../src/storage/open-stores.js'
import { openStore } from '../src/storage/store.js'
import { entryPoint } from './helpers/child-gateway.js'
import { KEY_A, startHarness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

const ROOT = fileURLToPath(new URL('../', import.meta.url))

for (const engine of testableEngines(t, 'sessions export')) {
  t.test(`${engine.name}: sessions export piped into a reader that leaves early exits quietly`, async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'recallgate-export-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    const env = await engine.env(t)
    // A session far larger than a pipe's buffer (64 KiB), so the export is still writing when the reader leaves.
    const lmdb = openStore({ dir: dataDir })
    const stores = await openStores({ databaseUrl: env.DATABASE_URL, databasePoolSize: 1, databaseStatementTimeout: 1000, lmdb, maxMessagesPerSession: 1000, now: Date.now, counter: new TokenCounter({ margins: {} }) })
    const text = 'x'.repeat(4000)
    for (let i = 0; i < 100; i++) await stores.sessions.appendExchange(tenantIdFor(hashKey(KEY_A)), 'long', [{ role: 'user', content: `${i} ${text}` }])
    await stores.close()
    await lmdb.close()
    const h = await startHarness(t, { dataDir, env })

    const entry = entryPoint() === 'dist' ? [join(ROOT, 'dist/src/cli.js')] : ['--import', '@tapjs/typescript/import', join(ROOT, 'src/cli.ts')]
    const child = spawn(process.execPath, [...entry, 'sessions', 'export', 'long', '--url', h.gw.url], {
      cwd: ROOT,
      env: { ...process.env, RECALLGATE_KEY: KEY_A, TS_NODE_TRANSPILE_ONLY: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    const exited = once(child, 'exit')
    const [first] = (await once(child.stdout, 'data')) as [Buffer]
    t.match(first.toString('utf8'), /^\{"id":"long"/, 'the export began')
    child.stdout.destroy()
    const [code, signal] = (await exited) as [number | null, NodeJS.Signals | null]
    t.same({ code, signal }, { code: 0, signal: null }, 'exit 0')
    t.equal(stderr, '', 'nothing on stderr')
  })
}
