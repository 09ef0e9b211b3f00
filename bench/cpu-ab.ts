/**
 * CPU per plain relayed request of one or more gateway builds and of the floor, driven at the same time (issue 28's
 * method for changes too small for bench/relay.ts's interleaved arms to resolve).
 *
 * Method: the mock, the floor (bench/lib/floor.ts) and one gateway per build named on the command line (a `dist`
 * directory: this build's `dist`, or a copy of one from before a change), each in its own process. Each round drives
 * every server **at the same time** with its own wrk (Debian's, one process per server: the load generator is not
 * the bottleneck) for `--seconds`, at `--connections` each, with the relay scenario's request (bench/scenarios/relay.ts:
 * no session, `useRAG: false`; `--stream` for a streamed one), and reads each server's process CPU (user + system)
 * before and after: CPU per request = CPU time over the requests wrk completed. Each arm's figure is the median over
 * rounds of its per-round ratio to the floor's (and to the first build's): arms that run together share whatever else
 * the machine is doing, so the ratio of one round is steadier than any arm's own figure. Driven one after the other
 * instead, two identical builds gave per-round ratios of 0.68–1.34 on this 2-core machine; together, 0.9–1.1 (two
 * copies of one build: median 0.98–1.00). The first round warms up and is not counted.
 *
 *   node dist/bench/cpu-ab.js [--rounds 12] [--seconds 2] [--connections 8] [--stream] [--alternate] DIST [DIST…]
 *
 * `--alternate` drives one server at a time instead, the order rotated each round, so that no arm's CPU is taken by
 * another arm's load: with three servers and three wrk on two vCPUs, the arms together saturated the machine and
 * squeezed every ratio toward 1 (2026-11-27, "Tenth round": two builds 1.017× together, 0.918–0.928× alternating,
 * three runs).
 *
 * A build given as `DIR@--flag,--flag` runs with those node flags (e.g. V8 heap settings); `DIR#responses` is driven
 * with the Responses scenario's request instead (bench/scenarios/responses.ts: the same message as `input`, `store:
 * false`, `useRAG: false`), so `dist dist#responses` prices a Responses request against a chat completion.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { spawnRole, type Proc } from './lib/procs.js'
import { BENCH_KEY, chatBody, MODEL, PROVIDER_KEY } from './lib/stack.js'
import { quantile } from './lib/stats.js'
import { FIRST_TOKEN_GAP_MS, MESSAGE } from './scenarios/relay.js'

const run = promisify(execFile)

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : Number(process.argv[i + 1])
}

interface Arm {
  name: string
  proc: Proc
  /** wrk's script for this arm's request, and the path it is sent to. */
  script: string
  path: string
  samples: Array<{ cpuUs: number; requests: number }>
}

/** A wrk script that POSTs `body` with the bench's keys. */
function wrkScript(file: string, body: Record<string, unknown>): string {
  writeFileSync(
    file,
    `wrk.method = "POST"\nwrk.body = ${JSON.stringify(JSON.stringify(body))}\nwrk.headers["content-type"] = "application/json"\n` +
      `wrk.headers["servicekey"] = ${JSON.stringify(BENCH_KEY)}\nwrk.headers["authorization"] = ${JSON.stringify(`Bearer ${PROVIDER_KEY}`)}\n`,
  )
  return file
}

async function main(): Promise<void> {
  const rounds = arg('rounds', 12)
  const seconds = arg('seconds', 2)
  const connections = arg('connections', 8)
  const stream = process.argv.includes('--stream')
  const alternate = process.argv.includes('--alternate')
  const builds = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !(all[i - 1] ?? '').match(/^--(rounds|seconds|connections)$/))
  if (builds.length === 0) throw new Error('name at least one gateway build (a dist directory)')
  await run('wrk', ['--version']).catch((err: { stdout?: string }) => {
    // wrk --version exits 1 after printing its version: only a missing binary is an error.
    if (err.stdout === undefined) throw new Error('wrk is not on the PATH (apt-get install -y wrk)')
  })

  const dir = mkdtempSync(join(tmpdir(), 'recallgate-cpu-ab-'))
  const streaming = stream ? { stream: true } : {}
  const chat = wrkScript(join(dir, 'chat.lua'), chatBody(MESSAGE, { useRAG: false, ...streaming }))
  const responses = wrkScript(join(dir, 'responses.lua'), { model: MODEL, input: MESSAGE, useRAG: false, store: false, ...streaming })
  const mock = await spawnRole({ role: 'mock', options: { maxRecorded: 0, behaviour: { firstTokenGapMs: stream ? FIRST_TOKEN_GAP_MS : 0 } } })
  const floor = await spawnRole({ role: 'floor', upstreamOrigin: new URL(mock.url).origin, connections: 128 })
  const arms: Arm[] = [{ name: 'floor', proc: floor, script: chat, path: '/api/v1/chat/completions', samples: [] }]
  try {
    for (const [i, build] of builds.entries()) {
      const [spec, kind] = build.split('#') as [string, string | undefined]
      const [path, flags] = spec.split('@') as [string, string | undefined]
      const saved = process.execArgv
      // fork() takes the parent's execArgv at the call: the build's node flags, for this child only.
      if (flags !== undefined) process.execArgv = flags.split(',')
      const env = { PORT: '0', HOST: '127.0.0.1', UPSTREAM_BASE_URL: mock.url, DATA_DIR: mkdtempSync(join(dir, 'data-')), SERVICE_KEYS: `${BENCH_KEY}:unlimited` }
      const proc = await spawnRole({ role: 'gateway', env }, { script: join(resolve(path), 'bench', 'lib', 'role.js') })
      process.execArgv = saved
      const kindOf = kind === 'responses' ? { script: responses, path: '/api/v1/responses' } : { script: chat, path: '/api/v1/chat/completions' }
      arms.push({ name: `${i + 1}: ${build}`, proc, ...kindOf, samples: [] })
    }
    const drive = (a: Arm) => run('wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '-s', a.script, `${a.proc.url.replace(/\/$/, '')}${a.path}`])
    for (let round = -1; round < rounds; round++) {
      let before: Array<{ cpuUs: number }>
      let after: Array<{ cpuUs: number }>
      let out: Array<{ stdout: string }>
      if (alternate) {
        // One server at a time, the order rotated each round: each has the machine (the mock and wrk aside) to itself.
        before = []
        after = []
        out = []
        for (let j = 0; j < arms.length; j++) {
          const i = (j + Math.max(0, round)) % arms.length
          const a = arms[i] as Arm
          before[i] = await a.proc.stats()
          out[i] = await drive(a)
          after[i] = await a.proc.stats()
        }
      } else {
        before = await Promise.all(arms.map((a) => a.proc.stats()))
        out = await Promise.all(arms.map(drive))
        after = await Promise.all(arms.map((a) => a.proc.stats()))
      }
      if (round < 0) continue
      arms.forEach((a, i) => {
        const text = out[i]?.stdout ?? ''
        if (/Non-2xx/.test(text)) throw new Error(`${a.name}: wrk saw answers other than 2xx:\n${text}`)
        const requests = Number(/(\d+) requests in/.exec(text)?.[1] ?? NaN)
        a.samples.push({ cpuUs: (after[i]?.cpuUs ?? NaN) - (before[i]?.cpuUs ?? NaN), requests })
      })
      process.stderr.write(`round ${round + 1}/${rounds}\n`)
    }
    const perRequest = (a: Arm): number[] => a.samples.map((s) => s.cpuUs / s.requests)
    const [floor, first] = [arms[0] as Arm, arms[1] as Arm]
    const ratios = (a: Arm, to: Arm): number[] => perRequest(a).map((v, r) => v / (perRequest(to)[r] as number))
    const fmt = (xs: number[]): string => `${quantile(xs, 0.5).toFixed(3)} (rounds ${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`
    console.log(`${stream ? 'stream' : 'JSON'}, ${connections} connections per server, ${rounds} rounds × ${seconds} s${alternate ? ', one server at a time' : ''}`)
    for (const a of arms) {
      let line = `${a.name}: CPU per request ${quantile(perRequest(a), 0.5).toFixed(0)} µs (median), requests per round ${quantile(a.samples.map((s) => s.requests), 0.5)}`
      if (a !== floor) line += `; ÷ floor ${fmt(ratios(a, floor))}`
      if (a !== floor && a !== first) line += `; ÷ build 1 ${fmt(ratios(a, first))}`
      console.log(line)
    }
  } finally {
    await Promise.all([mock, ...arms.map((a) => a.proc)].map((p) => p.stop()))
    rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((err: unknown) => {
  console.error(err)
  process.exit(1)
})
