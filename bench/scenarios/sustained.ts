/**
 * Sustained load: the highest request rate recallgate sustains while its p99 stays under twice its idle p99, against
 * the same figure for the floor. Open loop (requests start on schedule whatever the server's pace; latency counts
 * from the scheduled start), non-stream, the plain relay request.
 *   0. warmup: 3 s of closed-loop load per arm (a fresh process needs seconds of load before V8 has optimized its hot
 *      path: measured here, the first second after a 0.5 s warmup ran at a tenth of the warm rate);
 *   1. idle p99: 100 requests/s in four one-second segments per arm, interleaved; the median of the segments' p99s
 *      (one stall from another tenant of the machine must not define "idle");
 *   2. capacity C: closed loop, 32 connections, one second;
 *   3. bisection of the rate between 0.1 C and 1.2 C, steps of 2 s: a step passes when nothing failed, the achieved rate is within
 *      5 % of the offered one and p99 < 2 × idle p99; a failed step is tried once more (same reason).
 * The floor's and recallgate's steps alternate, so both see the same machine.
 */
import { Pool } from 'undici'
import { chatRequest, runLoad } from '../../src/cli/bench.js'
import { BENCH_KEY, chatBody, PROVIDER_KEY, startStack, type ScenarioContext } from '../lib/stack.js'
import { ms, quantile, ratio, rps } from '../lib/stats.js'
import type { Row } from '../lib/table.js'
import { MESSAGE, type ScenarioResult } from './relay.js'

interface Search {
  idleP99: number
  capacity: number
  lo: number
  hi: number
  /** Highest passing rate and its p99. */
  best: { rate: number; p99: number } | undefined
}

export async function sustainedScenario(ctx: ScenarioContext): Promise<ScenarioResult> {
  const stack = await startStack({ floor: true, cpuProfDir: ctx.cpuProfDir, mock: { maxRecorded: 0 } })
  const request = chatRequest({ basePath: '/api/v1', serviceKey: BENCH_KEY, providerKey: PROVIDER_KEY, body: chatBody(MESSAGE, { useRAG: false }) })
  const arms = { floor: stack.origins.floor as string, recallgate: stack.origins.gateway }
  const pools = Object.fromEntries(Object.entries(arms).map(([k, o]) => [k, new Pool(o, { connections: 256, pipelining: 1, keepAliveTimeout: 60_000 })])) as Record<keyof typeof arms, Pool>
  const problems: string[] = []
  const names = ['floor', 'recallgate'] as const
  try {
    const warmMs = ctx.quick ? 2000 : 3000
    const segmentMs = ctx.quick ? 750 : 1000
    const stepMs = ctx.quick ? 1000 : 2000
    const steps = ctx.quick ? 4 : 5
    const s = {} as Record<(typeof names)[number], Search>
    ctx.log('sustained: warmup, idle p99 and capacity')
    for (const a of names) await runLoad(pools[a], request, { connections: 32, durationMs: warmMs, maxSamples: 0 })
    await stack.profileStart()
    const idle: Record<string, number[]> = { floor: [], recallgate: [] }
    for (let i = 0; i < 4; i++) {
      for (const a of i % 2 === 0 ? names : [...names].reverse()) {
        const r = await runLoad(pools[a], request, { connections: 8, rate: 100, durationMs: segmentMs })
        idle[a]?.push(quantile(r.latencyMs, 0.99))
      }
    }
    for (const a of names) {
      const c = await runLoad(pools[a], request, { connections: 32, durationMs: 1000, maxSamples: 0 })
      const capacity = c.ok / (c.elapsedMs / 1000)
      s[a] = { idleP99: quantile(idle[a] ?? [], 0.5), capacity, lo: 0.1 * capacity, hi: 1.2 * capacity, best: undefined }
    }
    for (let i = 0; i < steps; i++) {
      for (const a of i % 2 === 0 ? names : [...names].reverse()) {
        const st = s[a]
        const rate = i === 0 ? st.lo : (st.lo + st.hi) / 2
        let pass = false
        let p99 = NaN
        for (let attempt = 0; attempt < 2 && !pass; attempt++) {
          const r = await runLoad(pools[a], request, { connections: 256, rate, durationMs: stepMs })
          p99 = quantile(r.latencyMs, 0.99)
          const achieved = r.ok / (stepMs / 1000)
          pass = r.failed === 0 && achieved >= rate * 0.95 && p99 < 2 * st.idleP99
          if (ctx.verbose) ctx.log(`  ${a} ${rate.toFixed(0)}/s: achieved ${achieved.toFixed(0)}/s p99 ${ms(p99)} (limit ${ms(2 * st.idleP99)}) ${pass ? 'pass' : 'fail'}`)
        }
        if (pass) {
          st.best = { rate, p99 }
          st.lo = rate
        } else if (i > 0) st.hi = rate
        // A failed first step (0.1 C) leaves the range as it is: the bisection goes on, and only a run where nothing
        // passed at all is reported as a problem.
      }
    }
    for (const a of names)
      if (s[a].best === undefined) problems.push(`sustained (${a}): no rate kept p99 under 2 × idle (${ms(2 * s[a].idleP99)})`)
    const f = s.floor
    const g = s.recallgate
    const r = (g.best?.rate ?? 0) / (f.best?.rate ?? NaN)
    const rows: Row[] = [
      {
        scenario: 'sustained load',
        measure: 'highest rate with p99 < 2 × idle p99',
        baseline: `floor ${rps(f.best?.rate ?? 0)} (idle p99 ${ms(f.idleP99)})`,
        value: `${rps(g.best?.rate ?? 0)} (idle p99 ${ms(g.idleP99)})`,
        delta: ratio(r),
        target: '≥ 0.80× floor',
        pass: r >= 0.8,
      },
      {
        scenario: 'sustained load',
        measure: 'closed-loop capacity, 32 connections',
        baseline: `floor ${rps(f.capacity)}`,
        value: rps(g.capacity),
        delta: ratio(g.capacity / f.capacity),
        target: '',
      },
    ]
    return { rows, problems }
  } finally {
    await Promise.all(Object.values(pools).map((p) => p.destroy()))
    await stack.close()
  }
}
