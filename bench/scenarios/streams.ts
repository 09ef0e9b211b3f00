/**
 * 1,000 concurrent open streams (250 with --quick). The mock paces every reply (time to first token 50 ms, 20 tokens
 * a second, 16-character chunks, 60 words: about three seconds a stream; 40 words with --quick), and the load
 * generator starts the streams evenly over two seconds (one with --quick), open loop, so they are all open at
 * once; the mock's count of responses in flight proves it. The ramp is what a gateway meets when many clients
 * start talking at once; opening all thousand in one second measured the setup burst instead (every stream a new
 * client connection and a new upstream connection: TTFT grew by over a second in the direct arm as well).
 * Measured: recallgate's peak RSS while they are open, against its RSS before; and the time to the first streamed
 * chunk through recallgate against direct to the mock and against the floor (the bare node:http → undici
 * pass-through, bench/lib/floor.ts, with as many upstream connections), phases in the order direct, floor,
 * recallgate, recallgate, floor, direct. The floor is what any Node proxy pays for the same thousand connections on
 * this machine: the part of the added time to first chunk that is recallgate's own is the difference to it.
 *
 * Every phase opens fresh client connections (a new undici Pool), in both arms alike: a thousand concurrent streams
 * come from many clients, and reusing the previous phase's idle sockets would race the servers' 5 s keep-alive close.
 *
 * With `--ab DIR`, the other build's gateway (`before`) gets two phases of its own, in the order direct, floor,
 * recallgate, before, before, recallgate, floor, direct, and the table gains its figures next to this build's.
 *
 * UPSTREAM_CONNECTIONS is raised above the stream count: with the default (128) the streams beyond it wait for a
 * free upstream connection, i.e. for a whole generation to finish (see docs/benchmarks.md).
 */
import { Pool } from 'undici'
import { chatRequest, runLoad, type LoadResult } from '../../src/cli/bench.js'
import type { Proc } from '../lib/procs.js'
import { BENCH_KEY, chatBody, PROVIDER_KEY, startStack, type ScenarioContext } from '../lib/stack.js'
import { mb, ms, quantile, ratio, signedMs, signedUs, us } from '../lib/stats.js'
import type { Row } from '../lib/table.js'
import type { ScenarioResult } from './relay.js'

export async function streamsScenario(ctx: ScenarioContext): Promise<ScenarioResult> {
  const n = ctx.quick ? 250 : 1000
  const words = ctx.streams?.words ?? (ctx.quick ? 40 : 60)
  const rampSeconds = ctx.streams?.rampSeconds ?? (ctx.quick ? 1 : 2)
  const label = `${n.toLocaleString('en')} open streams${ctx.streams?.words !== undefined || ctx.streams?.rampSeconds !== undefined ? ` (${rampSeconds} s ramp, ${words} words)` : ''}`
  const behaviour = { ttftMs: 50, tokensPerSecond: 20, replyTokens: { min: words, max: words }, chunkChars: 16 }
  const stack = await startStack({
    cpuProfDir: ctx.cpuProfDir,
    abDist: ctx.abDist,
    floor: true,
    floorConnections: n + 64,
    env: { UPSTREAM_CONNECTIONS: String(n + 64) },
    mock: { behaviour, maxRecorded: 0 },
  })
  const problems: string[] = []
  type ProxyName = 'floor' | 'recallgate' | 'before'
  type ArmName = 'direct' | ProxyName
  const origins: Record<ArmName, string> = {
    direct: stack.origins.mock,
    floor: stack.origins.floor ?? '',
    recallgate: stack.origins.gateway,
    before: stack.origins.before ?? '',
  }
  const procs: Record<ProxyName, Proc | undefined> = { floor: stack.floor, recallgate: stack.gateway, before: stack.before }
  const ab = stack.before !== undefined
  const proxies: ProxyName[] = ab ? ['floor', 'recallgate', 'before'] : ['floor', 'recallgate']
  const pool = (arm: ArmName): Pool => new Pool(origins[arm], { connections: n, pipelining: 1 })
  try {
    const request = chatRequest({ basePath: '/api/v1', serviceKey: BENCH_KEY, providerKey: PROVIDER_KEY, body: chatBody('Tell me a story.', { stream: true, useRAG: false }) })
    ctx.log(`streams: warming up`)
    for (const arm of ['direct', ...proxies] as const) {
      const p = pool(arm)
      await runLoad(p, request, { connections: 50, requests: 100, rate: 100, maxSamples: 0 })
      await p.destroy()
    }
    const idleRss: Record<ProxyName, number> = { floor: NaN, recallgate: NaN, before: NaN }
    for (const arm of proxies) idleRss[arm] = (await (procs[arm] as Proc).stats()).rss
    await stack.profileStart()

    const ttft: Record<ArmName, number[]> = { direct: [], floor: [], recallgate: [], before: [] }
    const peakRss: Record<ProxyName, number> = { floor: 0, recallgate: 0, before: 0 }
    /** CPU over each proxy's phases (ramp, every stream from first byte to [DONE]), for CPU per stream. */
    const cpuUs: Record<ProxyName, number> = { floor: 0, recallgate: 0, before: 0 }
    let peakOpen = 0
    const middle: ArmName[] = ab ? ['recallgate', 'before', 'before', 'recallgate'] : ['recallgate', 'recallgate']
    const phases: ArmName[] = ['direct', 'floor', ...middle, 'floor', 'direct']
    for (const arm of phases) {
      ctx.log(`streams: ${n} streams ${arm === 'direct' ? 'direct to the mock' : arm === 'before' ? 'through the other build' : `through ${arm}`}`)
      const proc = arm === 'direct' ? undefined : procs[arm]
      let sampling = true
      const sampler = (async () => {
        while (sampling) {
          const [g, open] = await Promise.all([proc?.stats(), stack.mock.activeResponses()])
          if (arm !== 'direct' && g !== undefined) peakRss[arm] = Math.max(peakRss[arm], g.rss)
          peakOpen = Math.max(peakOpen, open)
          await new Promise((r) => setTimeout(r, 100))
        }
      })()
      let r: LoadResult
      const p = pool(arm)
      const cpuBefore = proc === undefined ? 0 : (await proc.stats()).cpuUs
      try {
        r = await runLoad(p, request, { connections: n, requests: n, rate: n / rampSeconds })
      } finally {
        sampling = false
        await sampler
        await p.destroy()
      }
      if (arm !== 'direct' && proc !== undefined) cpuUs[arm] += (await proc.stats()).cpuUs - cpuBefore
      for (const x of r.ttftMs) ttft[arm].push(x)
      if (r.failed > 0) problems.push(`streams (${arm}): ${r.failed} failed: ${JSON.stringify(r.outcomes)}`)
    }
    await stack.profileStop('streams', { gateway: ttft.recallgate.length, floor: ttft.floor.length, before: ttft.before.length })
    if (peakOpen < n * 0.9) problems.push(`streams: only ${peakOpen} of ${n} streams were open at once`)

    const q = (arm: ArmName, p: number): number => quantile(ttft[arm], p)
    const added = (arm: ArmName, p: number, over: ArmName = 'direct'): string => {
      const d = q(arm, p) - q(over, p)
      return Math.abs(d) < 1 ? signedUs(d) : signedMs(d)
    }
    const perStream = (arm: ProxyName): number => cpuUs[arm] / 1000 / Math.max(1, ttft[arm].length)
    const a50 = q('recallgate', 0.5) - q('direct', 0.5)
    const rows: Row[] = [
      {
        scenario: label,
        measure: `gateway RSS, ${peakOpen} streams open at peak`,
        baseline: `idle ${mb(idleRss.recallgate)}; floor peak ${mb(peakRss.floor)}`,
        value: `peak ${mb(peakRss.recallgate)}`,
        delta: `+${mb(peakRss.recallgate - idleRss.recallgate)}`,
        target: '≤ 200 MB',
        pass: peakRss.recallgate <= 200 * 1024 * 1024,
      },
      {
        scenario: label,
        measure: 'p50 time to first chunk',
        baseline: `direct ${ms(q('direct', 0.5))}; floor ${added('floor', 0.5)}`,
        value: ms(q('recallgate', 0.5)),
        delta: added('recallgate', 0.5),
        target: '≤ +200 µs',
        pass: a50 <= 0.2,
      },
      {
        scenario: label,
        measure: 'p50 time to first chunk, over the floor',
        baseline: `floor ${ms(q('floor', 0.5))}`,
        value: ms(q('recallgate', 0.5)),
        delta: added('recallgate', 0.5, 'floor'),
        target: '',
      },
      {
        scenario: label,
        measure: 'p99 time to first chunk',
        baseline: `direct ${ms(q('direct', 0.99))}; floor ${added('floor', 0.99)}`,
        value: ms(q('recallgate', 0.99)),
        delta: added('recallgate', 0.99),
        target: '',
      },
      {
        scenario: label,
        measure: 'CPU per stream',
        baseline: `floor ${us(perStream('floor'))}`,
        value: us(perStream('recallgate')),
        delta: ratio(perStream('recallgate') / perStream('floor')),
        target: '',
      },
    ]
    if (ab) {
      rows.push(
        { scenario: `A/B: ${label}`, measure: 'gateway CPU per stream', baseline: `before ${us(perStream('before'))}`, value: us(perStream('recallgate')), delta: ratio(perStream('recallgate') / perStream('before')), target: '' },
        {
          scenario: `A/B: ${label}`,
          measure: 'p50 / p99 time to first chunk added',
          baseline: `before ${added('before', 0.5)} / ${added('before', 0.99)}`,
          value: `${added('recallgate', 0.5)} / ${added('recallgate', 0.99)}`,
          delta: '',
          target: '',
        },
        {
          scenario: `A/B: ${label}`,
          measure: 'gateway RSS, idle → peak',
          baseline: `before ${mb(idleRss.before)} → ${mb(peakRss.before)}`,
          value: `${mb(idleRss.recallgate)} → ${mb(peakRss.recallgate)}`,
          delta: '',
          target: '',
        },
      )
    }
    return { rows, problems }
  } finally {
    await stack.close()
  }
}
