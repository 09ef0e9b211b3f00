/**
 * Throughput of two replicas against one on the PostgreSQL store (issue 23), with the load generator outside the
 * replicas' CPU.
 *
 * The issue asks for the load generator on a core of its own; on a 2-core machine two replicas, the generator, the
 * database and the mock provider cannot each have one. So each replica runs with a CPU limit, as it would in a
 * container: a cgroup of its own capped at `--cap` of a core (default 0.25: at 0.4 the database's backends, at ≈ 1.5 ms
 * of CPU a saved exchange, had too little of a 2-core machine left to keep up with two replicas), while wrk (Debian's, one process per
 * replica, one thread each), PostgreSQL and the mock run uncapped on what is left. A replica is then bound by its own
 * CPU, and what two replicas reach against one shows whether anything shared (the database, its locks, the pool)
 * stops the second from adding its share. The replicas' CPU use over the run (µs per wall second, against the cap)
 * and the database's CPU per request are printed beside it, so a run where the cap was not what bound them shows.
 *
 * Workload: a saved exchange, the chat path that writes (each request reads one of 64 sessions per replica, and saves
 * the exchange durably before answering; MAX_SESSION_MESSAGES=20 keeps the sessions' size fixed). Arms: one replica
 * with one wrk, and two replicas with a wrk each at once, alternating over `--rounds` (default 5) of `--seconds`
 * (default 6) after a warm-up; the figure is the median over rounds of the two arms' ratio (requests per second, summed over the replicas).
 *
 *   RECALLGATE_BENCH_DATABASE_URL=postgres://… node dist/bench/replica-throughput.js [--cap 0.25] [--rounds 5]
 *     [--seconds 6] [--connections 8]
 *
 * Needs root (to make the cgroups), wrk on the PATH, and a PostgreSQL server whose user may create databases.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { openCpuCap, type CpuCap } from './lib/cpu-cap.js'
import { freshDatabase, serverCpu } from './lib/postgres.js'
import { BENCH_KEY, chatBody, PROVIDER_KEY, startStack, type Stack } from './lib/stack.js'
import { quantile } from './lib/stats.js'

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? undefined : process.argv[i + 1]
}

const cap = Number(flag('cap') ?? 0.25)
const rounds = Number(flag('rounds') ?? 5)
const seconds = Number(flag('seconds') ?? 6)
const connections = Number(flag('connections') ?? 8)
const SESSIONS = 64

/** wrk's script: POSTs a saved exchange, the session id cycling over SESSIONS ids of this replica's own. */
function wrkScript(dir: string, prefix: string): string {
  const [head, tail] = JSON.stringify(chatBody('And then?', { sessionId: '@SESSION@', useRAG: false })).split('@SESSION@') as [string, string]
  const lua = `
local n = 0
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["servicekey"] = ${JSON.stringify(BENCH_KEY)}
wrk.headers["authorization"] = ${JSON.stringify(`Bearer ${PROVIDER_KEY}`)}
request = function()
  n = n + 1
  return wrk.format(nil, "/api/v1/chat/completions", nil, ${JSON.stringify(head)} .. "${prefix}-" .. (n % ${SESSIONS}) .. ${JSON.stringify(tail)})
end
`
  const file = join(dir, `${prefix}.lua`)
  writeFileSync(file, lua)
  return file
}

interface WrkResult {
  rps: number
  requests: number
  errors: number
}

/** One wrk run against `origin` for `s` seconds. */
function wrk(origin: string, script: string, s: number): Promise<WrkResult> {
  return new Promise((resolve, reject) => {
    const p = spawn('wrk', ['-t1', `-c${connections}`, `-d${s}s`, '-s', script, origin], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    p.stdout.on('data', (d: Buffer) => (out += d.toString()))
    p.once('error', reject)
    p.once('exit', (code) => {
      const rps = /Requests\/sec:\s+([\d.]+)/.exec(out)
      const total = /(\d+) requests in/.exec(out)
      if (code !== 0 || rps === null || total === null) return reject(new Error(`wrk failed (${String(code)}): ${out}`))
      const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out)
      const sockErr = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
      const errors = Number(non2xx?.[1] ?? 0) + (sockErr ? sockErr.slice(1).reduce((a, b) => a + Number(b), 0) : 0)
      resolve({ rps: Number(rps[1]), requests: Number(total[1]), errors })
    })
  })
}

async function main(): Promise<void> {
  const base = process.env.RECALLGATE_BENCH_DATABASE_URL
  if (base === undefined || base === '') throw new Error('set RECALLGATE_BENCH_DATABASE_URL to a PostgreSQL server whose user may create databases')
  if (spawnSync('wrk', ['--version']).error !== undefined) throw new Error('wrk is not on the PATH (Debian: apt-get install wrk)')
  const db = await freshDatabase(base)
  const server = await serverCpu(base)
  const scratch = mkdtempSync(join(tmpdir(), 'recallgate-bench-replicas-'))
  const stacks: Stack[] = []
  const caps: CpuCap[] = []
  try {
    const env = { DATABASE_URL: db.url, MAX_SESSION_MESSAGES: '20' }
    for (let i = 0; i < 2; i++) stacks.push(await startStack({ env }))
    const [a, b] = stacks as [Stack, Stack]
    for (const [i, s] of stacks.entries()) {
      const c = openCpuCap(`recallgate-bench-replica-${i}-${process.pid}`, cap)
      if (typeof c === 'string') throw new Error(c)
      caps.push(c)
      c.add(s.gateway.pid)
    }
    const scripts = [wrkScript(scratch, 'a'), wrkScript(scratch, 'b')] as const
    process.stderr.write(`replicas capped at ${cap} of a core each; warming up\n`)
    await Promise.all([wrk(a.origins.gateway, scripts[0], 3), wrk(b.origins.gateway, scripts[1], 3)])

    const one: number[] = []
    const two: number[] = []
    const util: number[] = []
    const dbPerRequest: number[] = []
    let errors = 0
    for (let r = 0; r < rounds; r++) {
      for (const arm of r % 2 === 0 ? [1, 2] : [2, 1]) {
        const used = stacks.slice(0, arm)
        const cpuBefore = await Promise.all(used.map(async (s) => (await s.gateway.stats()).cpuUs))
        const dbBefore = (await server?.read()) ?? NaN
        const started = performance.now()
        const res = await Promise.all(used.map((s, i) => wrk(s.origins.gateway, scripts[i] as string, seconds)))
        const wallS = (performance.now() - started) / 1000
        const cpuAfter = await Promise.all(used.map(async (s) => (await s.gateway.stats()).cpuUs))
        const dbAfter = (await server?.read()) ?? NaN
        const total = res.reduce((x, y) => x + y.rps, 0)
        const requests = res.reduce((x, y) => x + y.requests, 0)
        errors += res.reduce((x, y) => x + y.errors, 0)
        ;(arm === 1 ? one : two).push(total)
        for (const [i, c] of cpuAfter.entries()) util.push((c - (cpuBefore[i] ?? 0)) / 1e6 / wallS)
        dbPerRequest.push((dbAfter - dbBefore) / requests)
        process.stderr.write(`round ${r + 1}, ${arm} replica${arm > 1 ? 's' : ''}: ${total.toFixed(0)} req/s (${res.map((x) => x.rps.toFixed(0)).join(' + ')})\n`)
      }
    }
    const m1 = quantile(one, 0.5)
    const m2 = quantile(two, 0.5)
    // Both arms of a round ran minutes apart at most: their ratio cancels the host's drift between rounds.
    const perRound = one.map((x, i) => (two[i] ?? NaN) / x)
    const fmt = (v: number[]): string => v.map((x) => x.toFixed(0)).join(', ')
    process.stdout.write(
      [
        `replica throughput, saved exchanges on PostgreSQL, each replica capped at ${cap} of a core, wrk ${connections} connections per replica`,
        `  1 replica:  ${m1.toFixed(0)} req/s median (rounds ${fmt(one)})`,
        `  2 replicas: ${m2.toFixed(0)} req/s median (rounds ${fmt(two)})`,
        `  ratio 2 / 1: ${quantile(perRound, 0.5).toFixed(2)}× median of the rounds' ratios (${perRound.map((x) => x.toFixed(2)).join(', ')}); of the medians ${(m2 / m1).toFixed(2)}× (≈ 2× when nothing shared binds)`,
        `  replicas' CPU use: ${quantile(util, 0.5).toFixed(2)} of a core median (cap ${cap}); database CPU per request ${quantile(dbPerRequest, 0.5).toFixed(0)} µs`,
        `  errors (non-2xx, socket): ${errors}; load average at the end ${loadavg().map((x) => x.toFixed(1)).join(' ')}`,
        '',
      ].join('\n'),
    )
  } finally {
    for (const s of stacks) await s.close().catch(() => undefined)
    for (const c of caps) c.close()
    await server?.close().catch(() => undefined)
    await db.drop().catch(() => undefined)
    rmSync(scratch, { recursive: true, force: true })
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`)
  process.exit(1)
})
