/**
 * What long-term recall adds to a request's latency, for a 700-turn session whose history does not fit the window
 * (target ≤ 2 ms p50), against the same request without recall, measured in the same run.
 *
 * Method: one mock OpenRouter and two gateways in this process (real HTTP on 127.0.0.1, real LMDB in temp dirs, the
 * local embedder): A with RECALL=on, B with RECALL=off. The same 700 turns (LoCoMo turns from
 * ../shared/data/locomo/, in order, A's speaker as `user`) are replayed into one session of each through the API.
 * Then LoCoMo questions (categories 1–4) are asked on a 4,096-token model, `saveToMemory: false`, `useRAG: false`,
 * non-streaming, alternating A and B request by request (A first on even rounds, B first on odd ones) so noise from
 * this shared 2-core machine lands on both alike. Latency is the client's, from sending the request to the parsed JSON
 * body (the mock answers at once). Added latency = p50(A) − p50(B), and the median of per-question differences.
 * After the replay every index is loaded (the first question of a session after a restart pays the index load:
 * timed separately as "cold").
 *
 * Results: FILLED IN BELOW FROM THE RUNS
 *
 * Usage: node dist/bench/recall-perf.js [--turns 700] [--rounds 600] [--warmup 60] [--top-k 40]
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { loadConfig } from '../src/config.js'
import { startGateway, type Gateway } from '../src/main.js'
import { startMockUpstream, type MockUpstream } from '../src/mock-upstream.js'
import { quantile } from './lib/stats.js'

const KEY = 'rg_recall_perf_key_0001'
const SMALL = 'openai/gpt-4o'
const LARGE = 'openai/gpt-4o-mini'
const SESSION = 'long-session'

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? Number(process.argv[i + 1]) : fallback
}

function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir)
    if (up === dir) throw new Error('package.json not found above ' + fileURLToPath(import.meta.url))
    dir = up
  }
  return dir
}

/** LoCoMo turns of every conversation, in order, as user/assistant messages; and its questions. */
function corpus(turns: number): { messages: Array<{ role: 'user' | 'assistant'; content: string }>; questions: string[] } {
  const dir = join(projectRoot(), '..', 'shared', 'data', 'locomo')
  const messages: Array<{ role: 'user' | 'assistant'; content: string }> = []
  const questions: string[] = []
  for (const f of readdirSync(dir).filter((n) => /^conv-.*\.json$/.test(n)).sort()) {
    const raw = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Record<string, unknown>
    for (let n = 1; Array.isArray(raw[`session_${n}`]); n++) {
      for (const t of raw[`session_${n}`] as Array<{ speaker: string; text: string }>) {
        messages.push({ role: t.speaker === raw.speaker_a ? 'user' : 'assistant', content: t.text })
      }
    }
    for (const q of raw.qa as Array<{ question: string; category: number }>) if (q.category <= 4) questions.push(q.question)
  }
  return { messages: messages.slice(0, turns), questions }
}

async function post(gw: Gateway, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', serviceKey: KEY, authorization: 'Bearer sk-or-perf' },
    body: JSON.stringify(body),
  })
  const json = (await res.json()) as Record<string, unknown>
  if (res.status !== 200) throw new Error(`${res.status}: ${JSON.stringify(json)}`)
  return json
}

async function start(mock: MockUpstream, dataDir: string, env: Record<string, string>): Promise<Gateway> {
  const config = loadConfig({ PORT: '0', UPSTREAM_BASE_URL: mock.url, DATA_DIR: dataDir, SERVICE_KEYS: `${KEY}:unlimited`, LOG_LEVEL: 'warn', ...env })
  return startGateway(config, { logDestination: new Writable({ write: (_c, _e, cb) => cb() }), onBootstrapKey: () => undefined })
}

/** Exchanges of one user turn (or more) and the assistant turn after it, as the chat API saves them. */
async function replay(gw: Gateway, mock: MockUpstream, messages: ReadonlyArray<{ role: 'user' | 'assistant'; content: string }>): Promise<void> {
  let pending: Array<{ role: 'user' | 'assistant'; content: string }> = []
  for (const m of messages) {
    if (m.role === 'assistant' && pending.some((p) => p.role === 'user')) {
      mock.enqueue({ reply: m.content })
      await post(gw, { model: LARGE, messages: pending, sessionId: SESSION, useRAG: false })
      pending = []
    } else pending.push(m)
  }
  if (pending.length > 0) {
    mock.enqueue({ reply: '' })
    await post(gw, { model: LARGE, messages: pending, sessionId: SESSION, useRAG: false })
  }
}

async function timed(gw: Gateway, question: string): Promise<{ ms: number; recalled: number }> {
  const t0 = performance.now()
  const res = await post(gw, { model: SMALL, messages: [{ role: 'user', content: question }], sessionId: SESSION, useRAG: false, saveToMemory: false })
  const ms = performance.now() - t0
  return { ms, recalled: (res._metadata as { memory: { recalledMessages: number } }).memory.recalledMessages }
}

async function main(): Promise<void> {
  const turns = arg('turns', 700)
  const rounds = arg('rounds', 600)
  const warmup = arg('warmup', 60)
  const topK = arg('top-k', 0)
  const { messages, questions } = corpus(turns)
  const mock = await startMockUpstream({ models: [{ id: SMALL, context_length: 4096 }, { id: LARGE, context_length: 1_000_000 }], maxRecorded: 1 })
  const dirs = [mkdtempSync(join(tmpdir(), 'recallgate-recall-perf-')), mkdtempSync(join(tmpdir(), 'recallgate-recall-perf-'))] as const
  const envA = { RECALL: 'on', ...(topK > 0 ? { RECALL_TOP_K: String(topK) } : {}) }
  try {
    let a = await start(mock, dirs[0], envA)
    let b = await start(mock, dirs[1], { RECALL: 'off' })
    await replay(a, mock, messages)
    await replay(b, mock, messages)
    // Restart A: its first recall loads the session's index from LMDB and the graph file (the cold case).
    await a.close()
    a = await start(mock, dirs[0], envA)
    const cold = await timed(a, questions[0] ?? 'what happened?')
    const coldB = await timed(b, questions[0] ?? 'what happened?')

    const samples = { a: [] as number[], b: [] as number[], diff: [] as number[] }
    let recalled = 0
    for (let i = 0; i < warmup + rounds; i++) {
      const q = questions[i % questions.length] ?? ''
      const first = i % 2 === 0 ? a : b
      const r1 = await timed(first, q)
      const r2 = await timed(first === a ? b : a, q)
      const [ra, rb] = first === a ? [r1, r2] : [r2, r1]
      if (i < warmup) continue
      samples.a.push(ra.ms)
      samples.b.push(rb.ms)
      samples.diff.push(ra.ms - rb.ms)
      recalled += ra.recalled
    }
    await a.close()
    await b.close()

    const p50a = quantile(samples.a, 0.5)
    const p50b = quantile(samples.b, 0.5)
    const added = p50a - p50b
    const f = (v: number): string => `${v.toFixed(2)} ms`
    process.stdout.write(
      [
        `recall latency: ${turns}-turn session, 4,096-token window, ${rounds} questions per arm (interleaved), ${(recalled / rounds).toFixed(1)} turns recalled per request`,
        '| arm | p50 | p90 | p99 |',
        '|---|---|---|---|',
        `| no recall (RECALL=off) | ${f(p50b)} | ${f(quantile(samples.b, 0.9))} | ${f(quantile(samples.b, 0.99))} |`,
        `| recall (RECALL=on) | ${f(p50a)} | ${f(quantile(samples.a, 0.9))} | ${f(quantile(samples.a, 0.99))} |`,
        `| added (p50 A − p50 B) | ${f(added)} | | |`,
        `| added (median of per-question A − B) | ${f(quantile(samples.diff, 0.5))} | | |`,
        `cold first request after a restart (index load): recall ${f(cold.ms)}, no recall ${f(coldB.ms)}`,
        `target: added ≤ 2 ms p50 — ${added <= 2 ? 'met' : 'MISSED'}`,
        '',
      ].join('\n'),
    )
  } finally {
    await mock.close()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  }
}

await main()
