/**
 * 1,000 concurrent open streams (250 with --quick). The mock paces every reply (time to first token 50 ms, 20 tokens
 * a second, 16-character chunks, 60 words: about three seconds a stream; 40 words with --quick), and the load
 * generator starts the streams evenly over two seconds (one with --quick), open loop, so they are all open at
 * once; the mock's count of responses in flight proves it. The ramp is what a gateway meets when many clients
 * start talking at once; opening all thousand in one second measured the setup burst instead (every stream a new
 * client connection and a new upstream connection: TTFT grew by over a second in the direct arm as well).
 * Measured: recallgate's peak RSS while they are open, against its RSS before; and the time to the first streamed
 * chunk through recallgate against direct to the mock, phases in the order direct, recallgate, recallgate, direct.
 *
 * Every phase opens fresh client connections (a new undici Pool), in both arms alike: a thousand concurrent streams
 * come from many clients, and reusing the previous phase's idle sockets would race the servers' 5 s keep-alive close.
 *
 * With `--ab DIR`, the other build's gateway (`before`) gets two phases of its own, in the order direct, recallgate,
 * before, before, recallgate, direct, and the table gains its figures next to this build's.
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
  const label = `${n.toLocaleString('en')} open streams`
  const words = ctx.quick ? 40 : 60
  const rampSeconds = ctx.quick ? 1 : 2
  const behaviour = { ttftMs: 50, tokensPerSecond: 20, replyTokens: { min: words, max: words }, chunkChars: 16 }
  const stack = await startStack({
    cpuProfDir: ctx.cpuProfDir,
    abDist: ctx.abDist,
    env: { UPSTREAM_CONNECTIONS: String(n + 64) },
    mock: { behaviour, maxRecorded: 0 },
  })
  const problems: string[] = []
  type ArmName = 'direct' | 'recallgate' | 'before'
  const origins: Record<ArmName, string> = { direct: stack.origins.mock, recallgate: stack.origins.gateway, before: stack.origins.before ?? '' }
  const procs = { recallgate: stack.gateway, before: stack.before }
  const ab = stack.before !== undefined
  const gatewayArms: Array<'recallgate' | 'before'> = ab ? ['recallgate', 'before'] : ['recallgate']
  const pool = (arm: ArmName): Pool => new Pool(origins[arm], { connections: n, pipelining: 1 })
  try {
    const request = chatRequest({ basePath: '/api/v1', serviceKey: BENCH_KEY, providerKey: PROVIDER_KEY, body: chatBody('Tell me a story.', { stream: true, useRAG: false }) })
    ctx.log(`streams: warming up`)
    for (const arm of ['direct', ...gatewayArms] as const) {
      const p = pool(arm)
      await runLoad(p, request, { connections: 50, requests: 100, rate: 100, maxSamples: 0 })
      await p.destroy()
    }
    const idleRss = { recallgate: (await stack.gateway.stats()).rss, before: ab ? (await (stack.before as Proc).stats()).rss : NaN }
    await stack.profileStart()

    const ttft: Record<ArmName, number[]> = { direct: [], recallgate: [], before: [] }
    const peakRss = { recallgate: 0, before: 0 }
    /** Gateway CPU over its phases (ramp, every stream from first byte to [DONE]), for CPU per stream. */
    const cpuUs = { recallgate: 0, before: 0 }
    let peakOpen = 0
    const phases: ArmName[] = ab ? ['direct', 'recallgate', 'before', 'before', 'recallgate', 'direct'] : ['direct', 'recallgate', 'recallgate', 'direct']
    for (const arm of phases) {
      ctx.log(`streams: ${n} streams ${arm === 'direct' ? 'direct to the mock' : arm === 'before' ? 'through the other build' : 'through recallgate'}`)
      let sampling = true
      const sampler = (async () => {
        while (sampling) {
          const gw = arm === 'direct' ? undefined : procs[arm]
          const [g, open] = await Promise.all([gw?.stats(), stack.mock.activeResponses()])
          if (arm !== 'direct' && g !== undefined) peakRss[arm] = Math.max(peakRss[arm], g.rss)
          peakOpen = Math.max(peakOpen, open)
          await new Promise((r) => setTimeout(r, 100))
        }
      })()
      let r: LoadResult
      const p = pool(arm)
      const gw = arm === 'direct' ? undefined : procs[arm]
      const cpuBefore = gw === undefined ? 0 : (await gw.stats()).cpuUs
      try {
        r = await runLoad(p, request, { connections: n, requests: n, rate: n / rampSeconds })
      } finally {
        sampling = false
        await sampler
        await p.destroy()
      }
      if (arm !== 'direct' && gw !== undefined) cpuUs[arm] += (await gw.stats()).cpuUs - cpuBefore
      for (const x of r.ttftMs) ttft[arm].push(x)
      if (r.failed > 0) problems.push(`streams (${arm}): ${r.failed} failed: ${JSON.stringify(r.outcomes)}`)
    }
    await stack.profileStop('streams', { gateway: ttft.recallgate.length, before: ttft.before.length })
    if (peakOpen < n * 0.9) problems.push(`streams: only ${peakOpen} of ${n} streams were open at once`)

    const q = (arm: ArmName, p: number): number => quantile(ttft[arm], p)
    const a50 = q('recallgate', 0.5) - q('direct', 0.5)
    const rows: Row[] = [
      {
        scenario: label,
        measure: `gateway RSS, ${peakOpen} streams open at peak`,
        baseline: `idle ${mb(idleRss.recallgate)}`,
        value: `peak ${mb(peakRss.recallgate)}`,
        delta: `+${mb(peakRss.recallgate - idleRss.recallgate)}`,
        target: '≤ 200 MB',
        pass: peakRss.recallgate <= 200 * 1024 * 1024,
      },
      {
        scenario: label,
        measure: 'p50 time to first chunk',
        baseline: `direct ${ms(q('direct', 0.5))}`,
        value: ms(q('recallgate', 0.5)),
        delta: Math.abs(a50) < 1 ? signedUs(a50) : signedMs(a50),
        target: '≤ +200 µs',
        pass: a50 <= 0.2,
      },
      {
        scenario: label,
        measure: 'p99 time to first chunk',
        baseline: `direct ${ms(q('direct', 0.99))}`,
        value: ms(q('recallgate', 0.99)),
        delta: signedMs(q('recallgate', 0.99) - q('direct', 0.99)),
        target: '',
      },
    ]
    const perStream = (arm: 'recallgate' | 'before'): string => us(cpuUs[arm] / 1000 / Math.max(1, ttft[arm].length))
    rows.push({ scenario: label, measure: 'gateway CPU per stream', baseline: '', value: perStream('recallgate'), delta: '', target: '' })
    if (ab) {
      rows.push({ scenario: `A/B: ${label}`, measure: 'gateway CPU per stream', baseline: `before ${perStream('before')}`, value: perStream('recallgate'), delta: ratio(cpuUs.recallgate / Math.max(1, ttft.recallgate.length) / (cpuUs.before / Math.max(1, ttft.before.length))), target: '' })
      const added = (arm: ArmName, p: number): string => {
        const d = q(arm, p) - q('direct', p)
        return Math.abs(d) < 1 ? signedUs(d) : signedMs(d)
      }
      rows.push(
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
