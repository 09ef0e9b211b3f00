/**
 * What request traces cost a plain relayed request (issue 25's target: ≤ 10 µs per request), measured in this process
 * against a baseline in the same run.
 *
 * Method: the work a traced request adds, and only that: building the trace record from the planner's draft (as
 * main.ts's onRequestDone does), `TraceRecorder.record`, and its batched write into a real LMDB in a temp dir (the
 * store's `append`, pruning each tenant to REQUEST_TRACES = 100), for a plain relay's prompt (one user message). The
 * baseline arm runs the same loop with a recorder whose REQUEST_TRACES is 0 (what an untraced request pays: one
 * check). Arms alternate in rounds of 2,000 requests, 10 rounds; the figure is process CPU (user + system) per
 * request, median over rounds, traced minus baseline. The write runs on the event loop's next turn, after the
 * response has left: its CPU is counted here all the same.
 *
 *   node dist/bench/trace-cost.js
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { messagesJsonOf, upstreamBody } from '../src/chat/upstream-body.js'
import { openStore } from '../src/storage/store.js'
import { TraceRepo } from '../src/storage/trace-repo.js'
import { TraceRecorder } from '../src/traces/trace-recorder.js'
import { requestTrace } from '../src/traces/trace-record.js'
import type { PromptTrace } from '../src/types.js'
import { MESSAGE } from './scenarios/relay.js'

const ROUNDS = 10
const PER_ROUND = 2_000

const draft: PromptTrace = {
  messages: [{ role: 'user', content: MESSAGE }],
  messageTokens: [22],
  parts: { system: 0, history: 0, recall: 0, excerpts: 0 },
  sources: [],
  recalledMessages: 0,
  leftOut: { historyMessages: 0, chunks: 0, retrievalReason: 'disabled' },
  totalTokens: 25,
  window: 128_000,
  sessionId: null,
}
const sent = upstreamBody({ model: 'openai/gpt-4o', useRAG: false }, draft.messages)

async function round(recorder: TraceRecorder, tenants: number, offset: number): Promise<number> {
  const before = process.cpuUsage()
  for (let i = 0; i < PER_ROUND; i++) {
    // Requests arrive over time: yield now and then (the recorder writes its batch every 50 ms), in both arms alike.
    if (i % 32 === 31) await new Promise((r) => setImmediate(r))
    if (!recorder.enabled) continue
    // As the handler does: the messages' JSON is a slice of the upstream body it made (made in both arms anyway).
    draft.messagesJson = messagesJsonOf(sent)
    const trace = requestTrace(draft, {
      id: `req_${offset + i}`,
      createdAt: Date.now(),
      route: '/api/v1/chat/completions',
      model: 'openai/gpt-4o',
      stream: false,
      status: 200,
      durationMs: 1.2,
      promptTokens: 25,
      completionTokens: 40,
      cachedTokens: null,
      error: null,
    })
    recorder.record(`tenant-${i % tenants}`, trace)
  }
  await recorder.flush()
  const used = process.cpuUsage(before)
  return (used.user + used.system) / PER_ROUND
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rg-trace-cost-'))
  const store = openStore({ dir })
  try {
    const traces = new TraceRepo(store)
    const on = new TraceRecorder({ store: traces, keep: 100, onError: (err) => console.error(err) })
    const off = new TraceRecorder({ store: traces, keep: 0, onError: (err) => console.error(err) })
    await round(on, 8, 0) // warm-up: JIT, the databases' first pages
    const diffs: number[] = []
    const onUs: number[] = []
    for (let r = 0; r < ROUNDS; r++) {
      const a = r % 2 === 0 ? await round(on, 8, (r + 1) * PER_ROUND) : NaN
      const b = await round(off, 8, 0)
      const c = r % 2 === 1 ? await round(on, 8, (r + 1) * PER_ROUND) : a
      onUs.push(c)
      diffs.push(c - b)
    }
    diffs.sort((x, y) => x - y)
    onUs.sort((x, y) => x - y)
    const median = (xs: number[]): number => xs[Math.floor(xs.length / 2)] ?? NaN
    console.log(`request traces, plain relay prompt, REQUEST_TRACES=100, 8 tenants, ${ROUNDS} rounds × ${PER_ROUND} requests`)
    console.log(`  CPU per traced request: ${median(onUs).toFixed(1)} µs; added over untraced: median ${median(diffs).toFixed(1)} µs (rounds ${diffs[0]?.toFixed(1)}…${diffs.at(-1)?.toFixed(1)}); target ≤ 10 µs`)
  } finally {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
