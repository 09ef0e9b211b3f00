/**
 * Real Redis and PostgreSQL servers for the tests that need them. CI (`.ci/run`) installs both from Debian's packages,
 * starts one of each on loopback and exports their URLs as RECALLGATE_TEST_REDIS_URL / RECALLGATE_TEST_DATABASE_URL
 * (test-only names, so a child gateway inheriting the environment never picks them up as its own config). Run
 * locally without them, a test starts its own server from the binaries on PATH, in a temp dir, on a free port, and
 * stops it at teardown. When neither is possible, the test is skipped with the reason (never silently passed).
 *
 * `ownRedis` always starts a private server: for tests that stop or restart it, which must not disturb the shared one.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { connect, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import type { Test } from 'tap'

type TestLike = Pick<Test, 'teardown' | 'skip'>

export async function freePort(): Promise<number> {
  const s = createServer()
  s.listen(0, '127.0.0.1')
  await once(s, 'listening')
  const port = (s.address() as { port: number }).port
  await new Promise((r) => s.close(r))
  return port
}

function onPath(bin: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${bin}`], { stdio: 'ignore' }).status === 0
}

/** Resolves once something accepts TCP connections on the port (or rejects after `ms`). */
async function waitForPort(port: number, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const sock = connect(port, '127.0.0.1')
      sock.once('connect', () => {
        sock.destroy()
        resolve(true)
      })
      sock.once('error', () => resolve(false))
    })
    if (ok) return
    if (Date.now() > deadline) throw new Error(`nothing listening on 127.0.0.1:${port} after ${ms} ms`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

export interface RedisServer {
  readonly url: string
  readonly port: number
  /** SIGKILL the server (an outage). */
  stop(): Promise<void>
  /** Start it again on the same port (empty: it keeps nothing on disk). */
  start(): Promise<void>
}

/** A private redis-server on a free port, stopped at teardown; undefined (and the test skipped) without the binary. */
export async function ownRedis(t: TestLike): Promise<RedisServer | undefined> {
  if (!onPath('redis-server')) {
    t.skip('redis-server is not installed (CI installs it; locally: apt-get install redis-server)', () => {})
    return undefined
  }
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'recallgate-redis-'))
  let proc: ChildProcess | undefined
  const server: RedisServer = {
    url: `redis://127.0.0.1:${port}`,
    port,
    async start() {
      proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
        stdio: 'ignore',
      })
      await waitForPort(port)
    },
    async stop() {
      const p = proc
      proc = undefined
      if (p === undefined || p.exitCode !== null || p.signalCode !== null) return
      const exited = once(p, 'exit')
      p.kill('SIGKILL')
      await exited
    },
  }
  await server.start()
  t.teardown(async () => {
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
  })
  return server
}

/** CI's Redis when it is there, else a private one. Tests sharing it keep to their own keys (random service keys). */
export async function sharedRedisUrl(t: TestLike): Promise<string | undefined> {
  const fromCi = process.env.RECALLGATE_TEST_REDIS_URL
  if (fromCi) return fromCi
  return (await ownRedis(t))?.url
}

/**
 * PostgreSQL for the tests that need it: CI's cluster (`.ci/run` exports RECALLGATE_TEST_DATABASE_URL). Debian ships
 * the server binaries off PATH and they refuse to run as root, so unlike Redis a test does not start its own: without
 * the URL, a test file calls `t.skip(POSTGRES_SKIP_REASON)` at its top level (visible in the summary).
 */
export const POSTGRES_SKIP_REASON =
  'RECALLGATE_TEST_DATABASE_URL is not set (.ci/run starts PostgreSQL and sets it; see test/helpers/services.ts)'

export function testDatabaseUrl(): string | undefined {
  return process.env.RECALLGATE_TEST_DATABASE_URL || undefined
}

/**
 * A new, empty database on the test cluster for one test (dropped at teardown), so tests sharing the cluster never
 * see each other's rows and migration tests start from nothing.
 */
export async function freshDatabase(t: Pick<Test, 'teardown'>, baseUrl: string): Promise<string> {
  const { default: pg } = await import('pg')
  const name = `rg_test_${process.pid}_${Math.random().toString(36).slice(2, 10)}`
  const admin = new pg.Client({ connectionString: baseUrl })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  t.teardown(async () => {
    const c = new pg.Client({ connectionString: baseUrl })
    await c.connect()
    try {
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    } finally {
      await c.end()
    }
  })
  const u = new URL(baseUrl)
  u.pathname = `/${name}`
  return u.toString()
}
