/**
 * Real Redis and PostgreSQL servers for the tests that need them. CI (`.ci/run`) installs both from Debian's packages,
 * starts one of each on loopback and exports their URLs as RECALLGATE_TEST_REDIS_URL / RECALLGATE_TEST_DATABASE_URL
 * (test-only names, so a child gateway inheriting the environment never picks them up as its own config). Run
 * locally without them, a test starts its own server from the binaries on PATH, in a temp dir, on a free port, and
 * stops it at teardown. When neither is possible, the test is skipped at the top level with the reason (a
 * `# SKIP` line, never a silent pass): a test needing a service asks `skipWithout(...)` for its tap `skip` option
 * before it starts, because a skip inside a subtest leaves its parent a plain `ok`.
 *
 * In CI, `.ci/run` exports RECALLGATE_CI_REQUIRE_SERVICES=1: there a service it was meant to start and could not
 * (Redis, PostgreSQL, chromium) fails the tests needing it instead of skipping them, so a broken install shows as
 * a failed run and not as a run that passed by testing less.
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

type TestLike = Pick<Test, 'teardown'>

/** Set by `.ci/run`: missing services fail instead of skip (see the top of this file). */
const REQUIRE_SERVICES = process.env.RECALLGATE_CI_REQUIRE_SERVICES === '1'

const REDIS_SERVER_REASON = 'redis-server is not installed (CI installs it; locally: apt-get install redis-server)'

/**
 * The tap `skip` option for a top-level test that needs something: false when it is there, else the reason. Under
 * RECALLGATE_CI_REQUIRE_SERVICES=1 it is always false, and the test fails on the missing service instead.
 */
export function skipUnless(available: boolean, reason: string): string | false {
  return available || REQUIRE_SERVICES ? false : reason
}

/** `skipUnless` for the services this file provides. */
export function skipWithout(service: 'redis' | 'redis-server' | 'postgres'): string | false {
  switch (service) {
    case 'redis':
      return skipUnless(Boolean(process.env.RECALLGATE_TEST_REDIS_URL) || onPath('redis-server'), REDIS_SERVER_REASON)
    case 'redis-server':
      return skipUnless(onPath('redis-server'), REDIS_SERVER_REASON)
    case 'postgres':
      return skipUnless(testDatabaseUrl() !== undefined, POSTGRES_SKIP_REASON)
  }
}

function missing(what: string): Error {
  return new Error(
    REQUIRE_SERVICES
      ? `${what}, and RECALLGATE_CI_REQUIRE_SERVICES=1: .ci/run was meant to provide it (see its warnings above)`
      : `${what} (gate the test with skipWithout() from test/helpers/services.ts)`,
  )
}

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

/** A private redis-server on a free port, stopped at teardown. Gate the test with `skipWithout('redis-server')`. */
export async function ownRedis(t: TestLike): Promise<RedisServer> {
  if (!onPath('redis-server')) throw missing(REDIS_SERVER_REASON)
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

/**
 * CI's Redis when it is there, else a private one (not in CI: there the missing URL is the failure). Tests sharing it
 * keep to their own keys (random service keys). Gate the test with `skipWithout('redis')`.
 */
export async function sharedRedisUrl(t: TestLike): Promise<string> {
  const fromCi = process.env.RECALLGATE_TEST_REDIS_URL
  if (fromCi) return fromCi
  if (REQUIRE_SERVICES) throw missing('RECALLGATE_TEST_REDIS_URL is not set')
  return (await ownRedis(t)).url
}

/**
 * PostgreSQL for the tests that need it: CI's cluster (`.ci/run` exports RECALLGATE_TEST_DATABASE_URL). Debian ships
 * the server binaries off PATH and they refuse to run as root, so unlike Redis a test does not start its own: without
 * the URL, a test file gates its tests with `skipWithout('postgres')` or calls `withoutService` (a top-level skip,
 * visible in the summary; a failure under RECALLGATE_CI_REQUIRE_SERVICES=1).
 */
export const POSTGRES_SKIP_REASON =
  'RECALLGATE_TEST_DATABASE_URL is not set (.ci/run starts PostgreSQL and sets it; see test/helpers/services.ts)'

export function testDatabaseUrl(): string | undefined {
  return process.env.RECALLGATE_TEST_DATABASE_URL || undefined
}

/**
 * In place of a file's tests when a service is missing: one top-level test skipped with the reason, or, under
 * RECALLGATE_CI_REQUIRE_SERVICES=1, failed with it.
 */
export function withoutService(t: Pick<Test, 'test'>, name: string, reason: string): void {
  if (REQUIRE_SERVICES) {
    t.test(name, async (t) => {
      t.fail(missing(reason).message)
    })
  } else {
    t.test(name, { skip: reason }, async () => {})
  }
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
