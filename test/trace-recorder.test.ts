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
import type { RequestTrace } from '../src/storage/interface.js'
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

function openTraces(t: Test) {
  const dir = mkdtempSync(join(tmpdir(), 'rg-traces-'))
  const s = openStore({ dir })
  t.teardown(async () => {
    await s.close()
    rmSync(dir, { recursive: true, force: true })
  })
  return { lmdb: s, repo: new TraceRepo(s) }
}
const store = (t: Test) => openTraces(t).repo

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

t.test('every field of a trace reads back as written, and traces stored by earlier versions still read', async (t) => {
  const { lmdb, repo } = openTraces(t)
  const full: RequestTrace = {
    ...requestTrace(
      {
        ...draft('with everything'),
        messageTokens: [5, 7, 9],
        parts: { system: 1, history: 4, recall: 1, excerpts: 1 },
        sources: [{ file_id: 'file_1', filename: 'refunds.md', chunk_index: 3, score: 0.42 }],
        recalledMessages: 6,
        leftOut: { historyMessages: 12, chunks: 2, retrievalReason: null },
        sessionId: 'sess-1',
      },
      { ...facts('req_full', 5), cachedTokens: 4, status: 502, error: { code: 'upstream_error', message: 'bad gateway' } },
    ),
  }
  await repo.append([{ tenant: 'tenant-f', trace: full }], 10)
  t.same(await repo.get('tenant-f', 'req_full'), full, 'read back field for field')
  // Before the tuple format, the record itself was the value: a console listing still shows those.
  const old = { ...full, id: 'req_old', createdAt: 4 }
  await lmdb.traces.put(['tenant-f', 4, 'req_old'], old)
  // A value of a format this version does not know (written by a newer one) is skipped, not misread.
  await lmdb.traces.put(['tenant-f', 3, 'req_new'], [99, 'req_new'])
  t.same((await repo.list('tenant-f', 10)).map((x) => x.id), ['req_full', 'req_old'])
  t.same(await repo.get('tenant-f', 'req_old'), old)
})

t.test('a tenant keeps exactly its newest REQUEST_TRACES, when the setting changes too, with traces of earlier versions', async (t) => {
  const { lmdb, repo } = openTraces(t)
  const trace = (id: string, at: number, sessionId: string | null = null) => requestTrace({ ...draft(id), sessionId }, facts(id, at))
  const held = () => lmdb.traces.getCount({ start: ['tenant-r'], end: ['tenant-r', Uint8Array.of(0xff)] })
  const ids = async () => (await repo.list('tenant-r', 100)).map((x) => x.id)
  // Three traces as an earlier version stored them, each under its own key.
  for (const at of [1, 2, 3]) await lmdb.traces.put(['tenant-r', at, `old${at}`], trace(`old${at}`, at))
  const append = (keep: number, ...traces: RequestTrace[]) => repo.append(traces.map((x) => ({ tenant: 'tenant-r', trace: x })), keep)
  await append(5, trace('a', 10), trace('b', 11, 'sess-x'), trace('c', 12), trace('d', 13))
  t.same(await ids(), ['d', 'c', 'b', 'a', 'old3'], 'the newest five, the earlier version’s included')
  t.equal(held(), 5, 'and no more are held')
  // The clock going back does not reorder: the order is the order of arrival.
  await append(5, trace('e', 5), trace('f', 14))
  t.same(await ids(), ['f', 'e', 'd', 'c', 'b'])
  t.equal(held(), 5)
  await append(2, trace('g', 15))
  t.same(await ids(), ['g', 'f'], 'REQUEST_TRACES lowered: the newest two')
  t.equal(held(), 2)
  await append(4, trace('h', 16, 'sess-x'), trace('i', 17))
  t.same(await ids(), ['i', 'h', 'g', 'f'], 'raised: the ring grows as traces come')
  t.equal(await repo.deleteSession('tenant-r', 'sess-x'), 1)
  await append(4, trace('j', 18))
  t.same(await ids(), ['j', 'i', 'g'], 'a deleted trace leaves a gap that the ring fills in turn')
  t.same(await repo.list('tenant-other', 10), [], 'tenants apart')
})

t.test('a busy gateway writes a full batch at once, without waiting for the timer, and drops nothing', async (t) => {
  const repo = store(t)
  let appended!: () => void
  const written = new Promise<void>((resolve) => (appended = resolve))
  const watched = {
    ...repo,
    list: repo.list.bind(repo),
    append: async (...a: Parameters<TraceRepo['append']>) => {
      await repo.append(...a)
      appended()
    },
  } as unknown as TraceRepo
  const recorder = new TraceRecorder({ store: watched, keep: 1_000, maxPending: 1_000, onError: (err) => t.fail(String(err)) })
  // Two batches' worth arrive faster than the timer fires (it would take a second): the first batch goes by count.
  for (let i = 0; i < 700; i++) recorder.record('tenant-busy', requestTrace(draft(`m${i}`), facts(`req_busy_${i}`, i)))
  await written
  t.equal((await repo.list('tenant-busy', 1_000)).length, 500, 'the first 500 are written without a flush')
  await recorder.flush()
  t.equal((await repo.list('tenant-busy', 1_000)).length, 700)
  t.equal(recorder.dropped, 0)
})

t.test('a batch with more traces of one tenant than it keeps writes only the newest, and the listing is the same', async (t) => {
  const repo = store(t)
  let written = 0
  const counting = {
    list: repo.list.bind(repo),
    append: (traces: Parameters<TraceRepo['append']>[0], keep: number) => {
      written += traces.length
      return repo.append(traces, keep)
    },
  } as unknown as TraceRepo
  const recorder = new TraceRecorder({ store: counting, keep: 3, onError: (err) => t.fail(String(err)) })
  for (let i = 1; i <= 10; i++) {
    recorder.record('tenant-a', requestTrace(draft(`a${i}`), facts(`req_a_${i}`, i)))
    if (i % 4 === 0) recorder.record('tenant-b', requestTrace(draft(`b${i}`), facts(`req_b_${i}`, i)))
  }
  await recorder.flush()
  t.equal(written, 5, "tenant-a's newest 3 and tenant-b's 2: nothing written only to be overwritten")
  t.same((await repo.list('tenant-a', 10)).map((x) => x.id), ['req_a_10', 'req_a_9', 'req_a_8'], 'the newest three, newest first')
  t.same((await repo.list('tenant-b', 10)).map((x) => x.id), ['req_b_8', 'req_b_4'])
  // The next batch goes on the ring where this one ended.
  recorder.record('tenant-a', requestTrace(draft('a11'), facts('req_a_11', 11)))
  await recorder.flush()
  t.same((await repo.list('tenant-a', 10)).map((x) => x.id), ['req_a_11', 'req_a_10', 'req_a_9'])
  t.equal(recorder.dropped, 0, 'superseded traces are not counted as dropped')

  // A tenant recording faster than the timer: its superseded traces leave no unbounded queue behind; a write comes
  // without a flush once the queue's places fill.
  written = 0
  for (let i = 0; i < 5_000; i++) recorder.record('tenant-c', requestTrace(draft(`c${i}`), facts(`req_c_${i}`, 100 + i)))
  await new Promise((r) => setTimeout(r, 50))
  t.equal(written, 3, 'one write, of the newest three at that point, before any flush or timer')
  await recorder.flush()
  t.same((await repo.list('tenant-c', 10)).map((x) => x.id), ['req_c_4999', 'req_c_4998', 'req_c_4997'])
  t.equal(recorder.dropped, 0)
})
