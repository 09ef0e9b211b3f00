/**
 * Soak: a steady, mixed load for a long time, to show that nothing grows and nothing fails.
 *
 *   npm run build && node dist/bench/soak.js [--minutes 10] [--rate 20] [--window 10]
 *
 * Method. The mock provider and the gateway run in their own processes (bench/lib/stack.ts), the load generator in
 * this one. After uploading a small knowledge base, requests start on a fixed schedule (open loop: `--rate` per second
 * whatever the gateway's pace), drawn from a seeded mix: 35 % streamed chat, 35 % JSON chat (each on one of 200
 * sessions, so memory is read, packed and saved all the time, and sessions reach their pruning limit of 40 messages
 * within the first half of a 10-minute run; retrieval on for
 * half), 15 % knowledge-base search, 10 % session reads, 5 % uploads followed by deletes. The mock streams replies of
 * 20–80 tokens at 400 tokens/s. Every `--window` seconds the gateway's /metrics is scraped for its RSS and its
 * event-loop delay over that window (prom-client's monitorEventLoopDelay, reset on each scrape), and the client side
 * reports its p50/p99 latency and errors for the window.
 *
 * Verdict: zero errors (any non-2xx, a stream without [DONE], a connection failure, or more than 512 requests in
 * flight), and no growth trend: the least-squares slope of RSS over the second half of the run, extrapolated over the
 * whole run, under 10 % of the median RSS. Exit status 0 when both hold, 1 otherwise. Never run by the test suite.
 */
import { Pool } from 'undici'
import { BENCH_KEY, PROVIDER_KEY, MODEL, startStack } from './lib/stack.js'
import { mb, ms, quantile } from './lib/stats.js'
import { mulberry32 } from '../src/mock-upstream/prng.js'

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`)
  const v = i === -1 ? undefined : Number(process.argv[i + 1])
  if (v === undefined) return fallback
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} must be a positive number`)
  return v
}

const MINUTES = flag('minutes', 10)
const RATE = flag('rate', 20)
const WINDOW_S = flag('window', 10)
const SESSIONS = 200
const SESSION_LIMIT = 40
const MAX_IN_FLIGHT = 512
const TOPICS = ['lighthouse', 'glacier', 'orchard', 'foundry', 'observatory', 'harbour', 'archive', 'vineyard']


interface Window {
  latencies: number[]
  errors: number
  done: number
}

/** One value of a Prometheus text exposition (first sample of the metric, no labels). */
function metric(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `))
  return line === undefined ? NaN : Number(line.slice(name.length + 1))
}

async function main(): Promise<number> {
  const stack = await startStack({
    mock: { maxRecorded: 0, behaviour: { replyTokens: { min: 20, max: 80 }, tokensPerSecond: 400 } },
    // Reached in about 5 minutes (each of the 200 sessions gets ~0.14 messages a second), so the second half of a
    // 10-minute run — the half the trend is fitted on — sees sessions at their limit, pruning on every save. With 200
    // (the earlier value) sessions were still filling at the end (84 of 200 messages): RSS rose 151 → 261 MB as
    // history, its cache and the recall indexes grew, which the trend read as "GROWING"; with 20 it plateaued at
    // 194–195 MB from the third minute on.
    env: { MAX_SESSION_MESSAGES: String(SESSION_LIMIT) },
  })
  const pool = new Pool(stack.origins.gateway, { connections: 256, pipelining: 1, keepAliveTimeout: 60_000 })
  const headers = { servicekey: BENCH_KEY, authorization: `Bearer ${PROVIDER_KEY}`, 'content-type': 'application/json' }
  const call = async (method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<{ status: number; text: string }> => {
    const r = await pool.request({ method, path, headers, body: body === undefined ? undefined : JSON.stringify(body) })
    return { status: r.statusCode, text: await r.body.text() }
  }
  const errors: string[] = []
  let errorCount = 0
  const rows: Array<{ t: number; rss: number; lagP99: number; lagMax: number; p50: number; p99: number; done: number; errors: number }> = []
  try {
    for (const [i, topic] of TOPICS.entries()) {
      const content = `# The ${topic}\n\n${`The ${topic} record ${i} notes facts about ${topic} number ${i}. `.repeat(40)}`
      const r = await call('POST', '/api/v1/files', { filename: `${topic}.md`, content })
      if (r.status !== 201) throw new Error(`setup upload: ${r.status} ${r.text.slice(0, 200)}`)
    }

    // Deterministic: two runs offer the same sequence of requests.
    const rand = mulberry32(42)
    let win: Window = { latencies: [], errors: 0, done: 0 }
    let inFlight = 0
    const fail = (what: string): void => {
      win.errors++
      errorCount++
      if (errors.length < 20) errors.push(what)
    }
    const one = async (): Promise<void> => {
      const x = rand()
      const topic = TOPICS[Math.floor(rand() * TOPICS.length)] as string
      const sessionId = `soak-${Math.floor(rand() * SESSIONS)}`
      const started = performance.now()
      try {
        if (x < 0.7) {
          const stream = x < 0.35
          const body = { model: MODEL, messages: [{ role: 'user', content: `Tell me about the ${topic}.` }], sessionId, stream, useRAG: rand() < 0.5 }
          const r = await call('POST', '/api/v1/chat/completions', body)
          if (r.status !== 200 || (stream && !r.text.endsWith('data: [DONE]\n\n'))) fail(`chat ${r.status} ${r.text.slice(-120)}`)
        } else if (x < 0.85) {
          const r = await call('POST', '/api/v1/files/search', { query: `${topic} record`, k: 5 })
          if (r.status !== 200) fail(`search ${r.status}`)
        } else if (x < 0.95) {
          const r = await call('GET', `/api/v1/sessions/${sessionId}`)
          if (r.status !== 200 && r.status !== 404) fail(`session ${r.status}`)
        } else {
          const up = await call('POST', '/api/v1/files', { filename: 'scratch.txt', content: `Scratch note about the ${topic}.` })
          if (up.status !== 201) fail(`upload ${up.status}`)
          else {
            const id = (JSON.parse(up.text) as { id: string }).id
            const del = await call('DELETE', `/api/v1/files/${id}`)
            if (del.status !== 200) fail(`delete ${del.status}`)
          }
        }
      } catch (err) {
        fail(`network ${String(err)}`)
      }
      win.latencies.push(performance.now() - started)
      win.done++
    }

    const totalMs = MINUTES * 60_000
    const t0 = performance.now()
    let nextWindow = t0 + WINDOW_S * 1000
    let sent = 0
    const pending = new Set<Promise<void>>()
    process.stdout.write(`soak: ${MINUTES} min at ${RATE}/s, windows of ${WINDOW_S} s\n`)
    process.stdout.write('   t     rss  loop p99  loop max   p50      p99     done errors\n')
    while (performance.now() - t0 < totalMs) {
      // Open loop: start every request whose scheduled time has come, then sleep until the next one is due.
      const due = Math.floor(((performance.now() - t0) / 1000) * RATE)
      while (sent < due) {
        sent++
        if (inFlight >= MAX_IN_FLIGHT) {
          fail('overload: too many requests in flight')
          continue
        }
        inFlight++
        const p = one().finally(() => {
          inFlight--
          pending.delete(p)
        })
        pending.add(p)
      }
      if (performance.now() >= nextWindow) {
        nextWindow += WINDOW_S * 1000
        const m = (await call('GET', '/metrics')).text
        const row = {
          t: Math.round((performance.now() - t0) / 1000),
          rss: metric(m, 'process_resident_memory_bytes'),
          lagP99: metric(m, 'nodejs_eventloop_lag_p99_seconds') * 1000,
          lagMax: metric(m, 'nodejs_eventloop_lag_max_seconds') * 1000,
          p50: quantile(win.latencies, 0.5),
          p99: quantile(win.latencies, 0.99),
          done: win.done,
          errors: win.errors,
        }
        rows.push(row)
        win = { latencies: [], errors: 0, done: 0 }
        process.stdout.write(
          `${String(row.t).padStart(4)}s ${mb(row.rss).padStart(7)} ${ms(row.lagP99).padStart(9)} ${ms(row.lagMax).padStart(9)} ` +
            `${ms(row.p50).padStart(8)} ${ms(row.p99).padStart(8)} ${String(row.done).padStart(7)} ${String(row.errors).padStart(6)}\n`,
        )
      }
      await new Promise((r) => setTimeout(r, Math.max(1, 1000 / RATE / 2)))
    }
    await Promise.all(pending)
  } finally {
    await pool.close()
    await stack.close()
  }

  const totalErrors = errorCount
  const half = rows.slice(Math.floor(rows.length / 2))
  const slope = leastSquaresSlope(half.map((r) => [r.t, r.rss]))
  const medianRss = quantile(rows.map((r) => r.rss), 0.5)
  const growth = slope * MINUTES * 60
  const trend = Number.isFinite(growth) && growth > 0.1 * medianRss
  process.stdout.write(`\nerrors: ${totalErrors}${errors.length ? ` (first: ${errors.slice(0, 5).join(' | ')})` : ''}\n`)
  process.stdout.write(`RSS: median ${mb(medianRss)}, trend over the second half ${(slope * 60 / 1024 / 1024).toFixed(2)} MB/min → ${mb(growth)} over the run (${trend ? 'GROWING' : 'flat'})\n`)
  process.stdout.write(`event-loop delay p99: worst window ${ms(Math.max(...rows.map((r) => r.lagP99)))}, median ${ms(quantile(rows.map((r) => r.lagP99), 0.5))}\n`)
  return totalErrors === 0 && !trend ? 0 : 1
}

function leastSquaresSlope(points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length
  if (n < 2) return 0
  const mx = points.reduce((s, [x]) => s + x, 0) / n
  const my = points.reduce((s, [, y]) => s + y, 0) / n
  let num = 0
  let den = 0
  for (const [x, y] of points) {
    num += (x - mx) * (y - my)
    den += (x - mx) ** 2
  }
  return den === 0 ? 0 : num / den
}

main().then(
  (code) => {
    process.exitCode = code
  },
  (err: unknown) => {
    process.stderr.write(`soak: ${String(err)}\n`)
    process.exitCode = 1
  },
)
