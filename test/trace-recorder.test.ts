/**
 * The trace recorder (src/traces/trace-recorder.ts) over a real LMDB trace store: what it queues is in the store after
 * a flush, newest kept; a store that stalls cannot grow the queue past its bound (the oldest queued go, counted); and
 * the trace record keeps the messages as the JSON that went upstream.
 */
import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../src/storage/store.js'
import { TraceRepo } from '../src/storage/trace-repo.js'
import { TraceRecorder } from '../src/traces/trace-recorder.js'
import { requestTrace } from '../src/traces/trace-record.js'
import { messagesJsonOf, upstreamBody } from '../src/chat/upstream-body.js'
import type { PromptTrace } from '../src/types.js'

function draft(content: string): PromptTrace {
  return {
    messages: [{ role: 'user', content }],
    messageTokens: [3],
    parts: { system: 0, history: 0, recall: 0, excerpts: 0 },
    sources: [],
    recalledMessages: 0,
    leftOut: { historyMessages: 0, chunks: 0, retrievalReason: 'disabled' },
    totalTokens: 6,
    window: 1000,
    sessionId: null,
  }
}

const facts = (id: string, createdAt: number) => ({
  id,
  createdAt,
  route: '/api/v1/chat/completions',
  model: 'openai/gpt-4o',
  stream: false,
  status: 200,
  durationMs: 1,
  promptTokens: 6,
  completionTokens: 2,
  cachedTokens: null,
  error: null,
})

function store(t: Test) {
  const dir = mkdtempSync(join(tmpdir(), 'rg-traces-'))
  const s = openStore({ dir })
  t.teardown(async () => {
    await s.close()
    rmSync(dir, { recursive: true, force: true })
  })
  return new TraceRepo(s)
}

t.test('queued traces are in the store after a flush, with the messages as the JSON sent upstream', async (t) => {
  const repo = store(t)
  const recorder = new TraceRecorder({ store: repo, keep: 10, onError: (err) => t.fail(String(err)) })
  const d = draft('quote " and \u00e9')
  const body = upstreamBody({ model: 'openai/gpt-4o', temperature: 0 }, d.messages)
  d.messagesJson = messagesJsonOf(body)
  recorder.record('tenant-a', requestTrace(d, facts('req_1', 1)))
  t.same(await repo.list('tenant-a', 10), [], 'nothing is written before the flush')
  await recorder.flush()
  const [got] = await repo.list('tenant-a', 10)
  t.equal(got?.id, 'req_1')
  t.same(JSON.parse(got?.messagesJson ?? 'null'), (JSON.parse(body.json) as { messages: unknown }).messages, 'the messages exactly as in the body')
  // A draft whose body was never made (the request failed before) still has its messages.
  recorder.record('tenant-a', requestTrace(draft('no body'), facts('req_2', 2)))
  await recorder.flush()
  t.same(JSON.parse((await repo.get('tenant-a', 'req_2'))?.messagesJson ?? 'null'), [{ role: 'user', content: 'no body' }])
})

t.test('the queue is bounded: past maxPending the oldest queued are dropped and counted', async (t) => {
  const repo = store(t)
  for (const max of [3, 0]) {
    const recorder = new TraceRecorder({ store: repo, keep: 100, maxPending: max, onError: (err) => t.fail(String(err)) })
    const tenant = `tenant-max-${max}`
    for (let i = 1; i <= 5; i++) recorder.record(tenant, requestTrace(draft(`m${i}`), facts(`req_${max}_${i}`, i)))
    t.equal(recorder.dropped, 5 - max, `maxPending ${max}: dropped`)
    await recorder.flush()
    const ids = (await repo.list(tenant, 100)).map((x) => x.id)
    t.same(ids, ['req_%_5', 'req_%_4', 'req_%_3'].slice(0, max).map((x) => x.replace('%', String(max))), `maxPending ${max}: the newest kept`)
    // And the next batch starts clean.
    recorder.record(tenant, requestTrace(draft('after'), facts(`req_${max}_6`, 6)))
    await recorder.flush()
    t.equal((await repo.list(tenant, 100)).length, Math.min(max, 5) + (max === 0 ? 0 : 1))
  }
})
