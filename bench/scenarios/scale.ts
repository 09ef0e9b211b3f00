/**
 * Scaling out (docs/scaling.md): what the shared rate limit costs, and what a second worker buys. Needs redis-server
 * on PATH (a private one is started on a free port). Not in the default suite: `--only scale`.
 *
 * 1. The Redis limit check. Two gateways, same mock, same limited plan (free, raised so it never refuses): one with
 *    the in-process limiter, one with REDIS_URL. Serial plain relay requests, interleaved; the difference in p50 is
 *    what one Redis round trip (the bucket script) adds per request.
 * 2. Workers. `recallgate serve --workers 1` against `--workers 2` (both with REDIS_URL, unlimited key: the store is
 *    not touched), closed loop at 32 connections, interleaved rounds: the throughput ratio. The load generator (this
 *    process) and the mock share the same 2 cores, so this is a lower bound of what a second core gives the gateway.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chatRequest } from '../../src/cli/bench.js'
import { arm, armProblems, latencyRow } from '../lib/arm-report.js'
import { describeArms, interleave, throughput } from '../lib/interleave.js'
import { spawnRole } from '../lib/procs.js'
import { projectRoot } from '../lib/project-root.js'
import { BENCH_KEY, chatBody, PROVIDER_KEY, type ScenarioContext } from '../lib/stack.js'
import { ratio, rps } from '../lib/stats.js'
import type { Row } from '../lib/table.js'
import type { ScenarioResult } from './relay.js'

const LIMITED_KEY = 'rg_bench_limited_key_0002-Vq8Zr3Lw5Ym2'

async function freePort(): Promise<number> {
  const s = createServer().listen(0, '127.0.0.1')
  await once(s, 'listening')
  const port = (s.address() as { port: number }).port
  await new Promise((r) => s.close(r))
  return port
}

async function startRedis(dir: string): Promise<{ url: string; proc: ChildProcess }> {
  const port = await freePort()
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  proc.stdout?.setEncoding('utf8')
  await new Promise<void>((resolve, reject) => {
    proc.once('error', reject)
    proc.once('exit', (code) => reject(new Error(`redis-server exited (${String(code)}): is it installed?`)))
    proc.stdout?.on('data', (d: string) => {
      out += d
      if (out.includes('Ready to accept connections')) resolve()
    })
  })
  proc.stdout?.resume()
  return { url: `redis://127.0.0.1:${port}`, proc }
}

/** `recallgate serve --workers n` from dist on `port`; resolves once it answers and its workers have had time to start. */
async function startWorkers(n: number, port: number, env: Record<string, string>): Promise<{ url: string; stop: () => Promise<void> }> {
  const proc = spawn(process.execPath, [join(projectRoot(), 'dist/src/cli.js'), 'serve', '--workers', String(n)], {
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', WORKERS: String(n) },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) throw new Error(`serve --workers ${n} exited with ${proc.exitCode}`)
    try {
      if ((await fetch(`${url}/healthz`)).ok) break
    } catch {
      if (i > 600) throw new Error(`serve --workers ${n}: not answering after 60 s`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  // The first answer proves one worker is up: give the others the time a worker takes to start.
  await new Promise((r) => setTimeout(r, 2000))
  return {
    url,
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return
      const exited = once(proc, 'exit')
      proc.kill('SIGTERM')
      await exited
    },
  }
}

export async function scaleScenario(ctx: ScenarioContext): Promise<ScenarioResult> {
  const dir = mkdtempSync(join(tmpdir(), 'recallgate-bench-scale-'))
  const problems: string[] = []
  const rows: Row[] = []
  const stops: Array<() => Promise<void>> = []
  try {
    const redis = await startRedis(dir)
    stops.push(async () => {
      redis.proc.kill('SIGKILL')
    })
    const mock = await spawnRole({ role: 'mock', options: { maxRecorded: 1 } })
    stops.push(() => mock.stop())
    const base = {
      PORT: '0',
      HOST: '127.0.0.1',
      UPSTREAM_BASE_URL: mock.url,
      SERVICE_KEYS: `${LIMITED_KEY}:free,${BENCH_KEY}:unlimited`,
      RATE_LIMITS: 'free:1000000000',
    }
    const local = await spawnRole({ role: 'gateway', env: { ...base, DATA_DIR: join(dir, 'local') } })
    stops.push(() => local.stop())
    const shared = await spawnRole({ role: 'gateway', env: { ...base, DATA_DIR: join(dir, 'shared'), REDIS_URL: redis.url } })
    stops.push(() => shared.stop())

    const req = chatRequest({ basePath: '/api/v1', serviceKey: LIMITED_KEY, providerKey: PROVIDER_KEY, body: chatBody('Hello there.', { useRAG: false }) })
    const rounds = ctx.quick ? 4 : 8
    const batch = ctx.quick ? 100 : 250
    ctx.log(`scale: Redis limit check, serial, ${rounds} rounds × ${batch} requests per arm`)
    const m = await interleave(
      [
        { name: 'local limiter', origin: local.url, request: req, proc: local },
        { name: 'redis limiter', origin: shared.url, request: req, proc: shared },
      ],
      {
        rounds,
        batch: { connections: 1, requests: batch },
        warmup: { connections: 1, requests: 300 },
        afterWarmup: async () => {
          if (ctx.cpuProfDir !== undefined) await Promise.all([local.profileStart(), shared.profileStart()])
        },
      },
    )
    const profDir = ctx.cpuProfDir
    if (profDir !== undefined) {
      // One profile per gateway, named as the suite's summary expects (`<phase>.<role>.cpuprofile` and its request count).
      for (const [role, p, name] of [['gateway', local, 'local limiter'], ['before', shared, 'redis limiter']] as const) {
        const file = await p.profileStop(profDir)
        if (file === null) continue
        renameSync(file, join(profDir, `limiter-${role === 'gateway' ? 'local' : 'redis'}.${role}.cpuprofile`))
        writeFileSync(join(profDir, `limiter-${role === 'gateway' ? 'local' : 'redis'}.${role}.json`), JSON.stringify({ requests: arm(m, name).ok }))
      }
    }
    if (ctx.verbose) ctx.log(describeArms('scale, limiter', m))
    problems.push(...armProblems('scale', m))
    rows.push(
      latencyRow(m, {
        scenario: 'shared rate limit (Redis)',
        measure: 'serial p50 added by the Redis check',
        arm: 'redis limiter',
        baseline: 'local limiter',
        baselineLabel: 'in-process limiter',
        p: 0.5,
        targetMs: 0.3,
      }),
      {
        scenario: 'shared rate limit (Redis)',
        measure: 'gateway CPU per request: Redis / in-process',
        baseline: '',
        value: `${arm(m, 'redis limiter').cpuUsPerRequest.toFixed(0)} µs / ${arm(m, 'local limiter').cpuUsPerRequest.toFixed(0)} µs`,
        delta: '',
        target: '',
      },
    )
    await local.stop()
    await shared.stop()

    const w1Port = await freePort()
    const w2Port = await freePort()
    const wenv = { UPSTREAM_BASE_URL: mock.url, SERVICE_KEYS: `${BENCH_KEY}:unlimited`, REDIS_URL: redis.url }
    const one = await startWorkers(1, w1Port, { ...wenv, DATA_DIR: join(dir, 'w1') })
    stops.push(one.stop)
    const two = await startWorkers(2, w2Port, { ...wenv, DATA_DIR: join(dir, 'w2') })
    stops.push(two.stop)
    const unlimited = chatRequest({ basePath: '/api/v1', serviceKey: BENCH_KEY, providerKey: PROVIDER_KEY, body: chatBody('Hello there.', { useRAG: false }) })
    const seconds = ctx.quick ? 2 : 4
    ctx.log(`scale: workers 1 vs 2, 32 connections, ${rounds} rounds × ${seconds} s per arm`)
    const w = await interleave(
      [
        { name: 'workers 1', origin: one.url, request: unlimited },
        { name: 'workers 2', origin: two.url, request: unlimited },
      ],
      { rounds, batch: { connections: 32, durationMs: seconds * 1000 }, warmup: { connections: 32, durationMs: 2000 } },
    )
    if (ctx.verbose) ctx.log(describeArms('scale, workers', w))
    problems.push(...armProblems('scale', w))
    const t1 = throughput(arm(w, 'workers 1'))
    const t2 = throughput(arm(w, 'workers 2'))
    const perRound = arm(w, 'workers 2').rounds.map((r, i) => r.rps / (arm(w, 'workers 1').rounds[i]?.rps ?? NaN))
    rows.push({
      scenario: 'workers (node:cluster)',
      measure: 'throughput at 32 connections, 2 workers vs 1 (load generator on the same 2 cores)',
      baseline: `1 worker ${rps(t1)}`,
      value: rps(t2),
      delta: `${ratio(t2 / t1)} (rounds ${ratio(Math.min(...perRound))}–${ratio(Math.max(...perRound))})`,
      target: '',
    })
    return { rows, problems }
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined)
    rmSync(dir, { recursive: true, force: true })
  }
}
