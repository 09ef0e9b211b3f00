/**
 * Plain relay (issue 2's benchmark, issue 8's first scenario): the same small chat request sent direct to the mock
 * provider, through the floor (bare node:http → undici pass-through) and through recallgate, interleaved.
 *   - serial (one connection): latency added to a non-stream request, and to the first streamed chunk;
 *   - 32 connections, closed loop: throughput, recallgate against the floor;
 *   - the same through recallgate with retrieval on and no files (the default path: `useRAG` omitted).
 * recallgate runs with a service key on the `unlimited` plan, `useRAG: false`, no session, LOG_LEVEL info (its
 * request log written to /dev/null, as a log shipper would take it).
 * With `--ab DIR` a gateway from another build (DIR = a copy of `dist` from before a change) runs as one more arm,
 * `before`, with the same request as `recallgate`, and the table gains A/B rows: a change measured in the same run as
 * what it replaces. With `--profile`, each phase (serial, stream, 32 connections) is profiled on its own.
 */
import { chatRequest } from '../../src/cli/bench.js'
import { describeArms, failures, interleave, throughput, type Arm, type ArmResult } from '../lib/interleave.js'
import { BENCH_KEY, chatBody, PROVIDER_KEY, startStack, type ScenarioContext } from '../lib/stack.js'
import { quantile, ratio, rps, signedUs, us } from '../lib/stats.js'
import type { Row } from '../lib/table.js'

export const MESSAGE = 'In two sentences, explain why a proxy should keep its upstream connections alive between requests.'

/**
 * The mock's pause between a stream's first and second token (a model's is 10–50 ms; short here to keep runs short).
 * Without it the mock sends the whole reply at once, and on a 2-core machine the load generator reads the first token
 * only when the proxy has relayed the whole stream (mock, proxy and generator want the same cores; logged per request,
 * the client read every stream in one read): the time to first token measured was the whole stream's. Used since
 * 2026-11-27; every arm gets the same mock, so the figures added over the direct call and the floor are comparable.
 */
export const FIRST_TOKEN_GAP_MS = 2

export interface ScenarioResult {
  rows: Row[]
  problems: string[]
}

export async function relayScenario(ctx: ScenarioContext): Promise<ScenarioResult> {
  const stack = await startStack({
    floor: true,
    cpuProfDir: ctx.cpuProfDir,
    abDist: ctx.abDist,
    mock: { maxRecorded: 0, behaviour: { firstTokenGapMs: FIRST_TOKEN_GAP_MS } },
  })
  const problems: string[] = []
  try {
    const { origins } = stack
    const arms = (stream: boolean): Arm[] => {
      const req = (extra: Record<string, unknown>) =>
        chatRequest({ basePath: '/api/v1', serviceKey: BENCH_KEY, providerKey: PROVIDER_KEY, body: chatBody(MESSAGE, { ...extra, ...(stream ? { stream } : {}) }) })
      const all: Arm[] = [
        { name: 'direct', origin: origins.mock, request: req({ useRAG: false }), proc: stack.mock },
        { name: 'floor', origin: origins.floor as string, request: req({ useRAG: false }), proc: stack.floor },
        { name: 'recallgate', origin: origins.gateway, request: req({ useRAG: false }), proc: stack.gateway },
        { name: 'recallgate+rag', origin: origins.gateway, request: req({}), proc: stack.gateway },
      ]
      if (origins.before !== undefined) all.push({ name: 'before', origin: origins.before, request: req({ useRAG: false }), proc: stack.before })
      return all
    }
    /** Requests each profiled process served in a phase, for the profiles' µs per request. */
    const served = (m: Map<string, ArmResult>) => ({
      gateway: (m.get('recallgate')?.ok ?? 0) + (m.get('recallgate+rag')?.ok ?? 0),
      floor: m.get('floor')?.ok ?? 0,
      before: m.get('before')?.ok ?? 0,
    })
    const rounds = ctx.quick ? 4 : 10
    const serialBatch = ctx.quick ? 200 : 400
    // Steady state, not V8's warm-up: a gateway's CPU per serial request fell from 1,073 µs (its first 800 requests) to
    // 534 µs at 3,400 and settled at 245-290 µs only after 7,000-10,000 requests; the floor's, 642 → 219 µs at 5,100,
    // settling at 150-175 µs after 11,000 (2026-11-28, wrk at 1 connection, 1 s windows, docs/benchmarks.md "Thirteenth
    // round"). With the 1,500 requests this took before, the serial rounds measured both arms mid-compilation.
    const warmup = { connections: 4, requests: ctx.quick ? 500 : 10_000 }

    ctx.log(`relay: serial non-stream, ${rounds} rounds × ${serialBatch} requests per arm`)
    const profileStart = () => stack.profileStart()
    const serial = await interleave(arms(false), { rounds, batch: { connections: 1, requests: serialBatch }, warmup, afterWarmup: profileStart })
    await stack.profileStop('serial', served(serial))
    ctx.log(`relay: serial stream`)
    const stream = await interleave(arms(true), { rounds, batch: { connections: 1, requests: serialBatch }, warmup, afterWarmup: profileStart })
    await stack.profileStop('stream', served(stream))
    const seconds = ctx.quick ? 0.6 : 1
    ctx.log(`relay: 32 connections, ${rounds} rounds × ${seconds} s per arm`)
    const c32 = await interleave(arms(false), {
      rounds,
      batch: { connections: 32, durationMs: seconds * 1000 },
      warmup: { connections: 32, durationMs: 500 },
      afterWarmup: profileStart,
    })
    await stack.profileStop('c32', served(c32))
    if (ctx.verbose) {
      ctx.log(describeArms('relay, serial non-stream', serial))
      ctx.log(describeArms('relay, serial stream', stream))
      ctx.log(describeArms('relay, 32 connections', c32))
    }
    for (const m of [serial, stream, c32]) for (const r of m.values()) {
      const f = failures(r)
      if (f !== undefined) problems.push(`relay: ${f}`)
    }

    const get = (m: Map<string, ArmResult>, n: string): ArmResult => m.get(n) as ArmResult
    const added = (m: Map<string, ArmResult>, arm: string, q: number, field: 'latencyMs' | 'ttftMs' = 'latencyMs') =>
      quantile(get(m, arm)[field], q) - quantile(get(m, 'direct')[field], q)
    const perRound = (m: Map<string, ArmResult>, arm: string, field: 'p50' | 'ttftP50') => {
      const d = get(m, arm).rounds.map((r, i) => r[field] - (get(m, 'direct').rounds[i]?.[field] ?? NaN))
      return `rounds ${signedUs(Math.min(...d))}…${signedUs(Math.max(...d))}`
    }
    const rows: Row[] = []
    const p50 = (m: Map<string, ArmResult>, n: string, field: 'latencyMs' | 'ttftMs' = 'latencyMs') => quantile(get(m, n)[field], 0.5)
    const p99 = (m: Map<string, ArmResult>, n: string) => quantile(get(m, n).latencyMs, 0.99)

    const a50 = added(serial, 'recallgate', 0.5)
    rows.push({
      scenario: 'plain relay',
      measure: 'serial p50 latency, non-stream',
      baseline: `direct ${us(p50(serial, 'direct'))}; floor ${signedUs(added(serial, 'floor', 0.5))}`,
      value: us(p50(serial, 'recallgate')),
      delta: `${signedUs(a50)} (${perRound(serial, 'recallgate', 'p50')})`,
      target: '≤ +150 µs',
      pass: a50 <= 0.15,
    })
    // What recallgate adds beyond any Node proxy on this machine (the floor's own cost is the machine's, mostly the
    // wake-up of one more process per hop: +60–90 µs on a quiet host, several hundred µs on this shared VM).
    rows.push({
      scenario: 'plain relay',
      measure: 'serial p50 latency over the floor, non-stream',
      baseline: `floor ${us(p50(serial, 'floor'))}`,
      value: us(p50(serial, 'recallgate')),
      delta: signedUs(p50(serial, 'recallgate') - p50(serial, 'floor')),
      target: '≤ +60 µs (#28)',
      pass: p50(serial, 'recallgate') - p50(serial, 'floor') <= 0.06,
    })
    rows.push({
      scenario: 'plain relay',
      measure: 'serial p99 latency, non-stream',
      baseline: `direct ${us(p99(serial, 'direct'))}; floor ${signedUs(added(serial, 'floor', 0.99))}`,
      value: us(p99(serial, 'recallgate')),
      delta: signedUs(added(serial, 'recallgate', 0.99)),
      target: '',
    })
    const t50 = added(stream, 'recallgate', 0.5, 'ttftMs')
    rows.push({
      scenario: 'plain relay',
      measure: 'serial p50 time to first chunk, stream',
      baseline: `direct ${us(p50(stream, 'direct', 'ttftMs'))}; floor ${signedUs(added(stream, 'floor', 0.5, 'ttftMs'))}`,
      value: us(p50(stream, 'recallgate', 'ttftMs')),
      delta: `${signedUs(t50)} (${perRound(stream, 'recallgate', 'ttftP50')})`,
      target: '≤ +200 µs',
      pass: t50 <= 0.2,
    })
    rows.push({
      scenario: 'plain relay',
      measure: 'serial p50 time to first chunk over the floor',
      baseline: `floor ${us(p50(stream, 'floor', 'ttftMs'))}`,
      value: us(p50(stream, 'recallgate', 'ttftMs')),
      delta: signedUs(p50(stream, 'recallgate', 'ttftMs') - p50(stream, 'floor', 'ttftMs')),
      target: '≤ +100 µs (#28)',
      pass: p50(stream, 'recallgate', 'ttftMs') - p50(stream, 'floor', 'ttftMs') <= 0.1,
    })
    rows.push({
      scenario: 'plain relay',
      measure: 'serial p50 whole stream',
      baseline: `direct ${us(p50(stream, 'direct'))}; floor ${signedUs(added(stream, 'floor', 0.5))}`,
      value: us(p50(stream, 'recallgate')),
      delta: signedUs(added(stream, 'recallgate', 0.5)),
      target: '',
    })
    const tr = throughput(get(c32, 'recallgate')) / throughput(get(c32, 'floor'))
    rows.push({
      scenario: 'plain relay',
      measure: 'throughput, 32 connections',
      baseline: `floor ${rps(throughput(get(c32, 'floor')))}; direct ${rps(throughput(get(c32, 'direct')))}`,
      value: rps(throughput(get(c32, 'recallgate'))),
      delta: ratio(tr),
      target: '≥ 0.80× floor',
      pass: tr >= 0.8,
    })
    rows.push({
      scenario: 'plain relay',
      measure: 'CPU per request, 32 connections',
      baseline: `floor ${us(get(c32, 'floor').cpuUsPerRequest / 1000)}`,
      value: us(get(c32, 'recallgate').cpuUsPerRequest / 1000),
      delta: ratio(get(c32, 'recallgate').cpuUsPerRequest / get(c32, 'floor').cpuUsPerRequest),
      target: '≤ 1.4× floor (#28)',
      pass: get(c32, 'recallgate').cpuUsPerRequest / get(c32, 'floor').cpuUsPerRequest <= 1.4,
    })
    const r50 = added(serial, 'recallgate+rag', 0.5)
    rows.push({
      scenario: 'relay, RAG on, no files',
      measure: 'serial p50 latency, non-stream',
      baseline: `direct ${us(p50(serial, 'direct'))}`,
      value: us(p50(serial, 'recallgate+rag')),
      delta: signedUs(r50),
      target: '≤ +2 ms',
      pass: r50 <= 2,
    })
    const trr = throughput(get(c32, 'recallgate+rag')) / throughput(get(c32, 'floor'))
    rows.push({
      scenario: 'relay, RAG on, no files',
      measure: 'throughput, 32 connections',
      baseline: `floor ${rps(throughput(get(c32, 'floor')))}`,
      value: rps(throughput(get(c32, 'recallgate+rag'))),
      delta: ratio(trr),
      target: '',
    })
    if (stack.before !== undefined) rows.push(...abRows({ serial, stream, c32 }))
    return { rows, problems }
  } finally {
    await stack.close()
  }
}

/**
 * `--ab`: the build under test against the other build (`before`), both measured in the same interleaved rounds.
 * Latency rows are what each adds to the direct call; "rounds" is the range of the per-round difference after − before.
 */
function abRows(m: { serial: Map<string, ArmResult>; stream: Map<string, ArmResult>; c32: Map<string, ArmResult> }): Row[] {
  const get = (x: Map<string, ArmResult>, n: string): ArmResult => x.get(n) as ArmResult
  const addedOf = (x: Map<string, ArmResult>, arm: string, field: 'latencyMs' | 'ttftMs') =>
    quantile(get(x, arm)[field], 0.5) - quantile(get(x, 'direct')[field], 0.5)
  const spread = (x: Map<string, ArmResult>, field: 'p50' | 'ttftP50') => {
    const d = get(x, 'recallgate').rounds.map((r, i) => r[field] - (get(x, 'before').rounds[i]?.[field] ?? NaN))
    return `rounds ${signedUs(Math.min(...d))}…${signedUs(Math.max(...d))}`
  }
  const latency = (x: Map<string, ArmResult>, measure: string, field: 'latencyMs' | 'ttftMs', roundField: 'p50' | 'ttftP50'): Row => {
    const before = addedOf(x, 'before', field)
    const after = addedOf(x, 'recallgate', field)
    return {
      scenario: 'A/B: before → this build',
      measure,
      baseline: `before ${signedUs(before)} vs direct`,
      value: `${signedUs(after)} vs direct`,
      delta: `${signedUs(after - before)} (${spread(x, roundField)})`,
      target: '',
    }
  }
  const c32 = m.c32
  return [
    latency(m.serial, 'serial p50 added, non-stream', 'latencyMs', 'p50'),
    latency(m.stream, 'serial p50 time to first chunk added', 'ttftMs', 'ttftP50'),
    {
      scenario: 'A/B: before → this build',
      measure: 'throughput, 32 connections (÷ floor)',
      baseline: `before ${rps(throughput(get(c32, 'before')))} (${ratio(throughput(get(c32, 'before')) / throughput(get(c32, 'floor')))})`,
      value: `${rps(throughput(get(c32, 'recallgate')))} (${ratio(throughput(get(c32, 'recallgate')) / throughput(get(c32, 'floor')))})`,
      delta: ratio(throughput(get(c32, 'recallgate')) / throughput(get(c32, 'before'))),
      target: '',
    },
    ...(['serial', 'stream', 'c32'] as const).map((phase): Row => ({
      scenario: 'A/B: before → this build',
      measure: `gateway CPU per request, ${phase === 'c32' ? '32 connections' : `serial ${phase === 'serial' ? 'non-stream' : 'stream'}`}`,
      baseline: `before ${us(get(m[phase], 'before').cpuUsPerRequest / 1000)}`,
      value: us(get(m[phase], 'recallgate').cpuUsPerRequest / 1000),
      delta: ratio(get(m[phase], 'recallgate').cpuUsPerRequest / get(m[phase], 'before').cpuUsPerRequest),
      target: '',
    })),
  ]
}
