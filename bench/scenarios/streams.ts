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
 * UPSTREAM_CONNECTIONS is raised above the stream count: with the default (128) the streams beyond it wait for a
 * free upstream connection, i.e. for a whole generation to finish (see docs/benchmarks.md).
 */
import { Pool } from 'undici'
import { chatRequest, runLoad, type LoadResult } from '../../src/cli/bench.js'
import { BENCH_KEY, chatBody, PROVIDER_KEY, startStack, type ScenarioContext } from '../lib/stack.js'
import { mb, ms, quantile, signedMs, signedUs } from '../lib/stats.js'
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
    env: { UPSTREAM_CONNECTIONS: String(n + 64) },
    mock: { behaviour, maxRecorded: 0 },
  })
  const problems: string[] = []
  const origins = { direct: stack.origins.mock, recallgate: stack.origins.gateway }
  const pool = (arm: 'direct' | 'recallgate'): Pool => new Pool(origins[arm], { connections: n, pipelining: 1 })
  try {
    const request = chatRequest({ basePath: '/api/v1', serviceKey: BENCH_KEY, providerKey: PROVIDER_KEY, body: chatBody('Tell me a story.', { stream: true, useRAG: false }) })
    ctx.log(`streams: warming up`)
    for (const arm of ['direct', 'recallgate'] as const) {
      const p = pool(arm)
      await runLoad(p, request, { connections: 50, requests: 100, rate: 100, maxSamples: 0 })
      await p.destroy()
    }
    const idleRss = (await stack.gateway.stats()).rss
    await stack.profileStart()

    const ttft: Record<'direct' | 'recallgate', number[]> = { direct: [], recallgate: [] }
    let peakRss = 0
    let peakOpen = 0
    for (const arm of ['direct', 'recallgate', 'recallgate', 'direct'] as const) {
      ctx.log(`streams: ${n} streams ${arm === 'direct' ? 'direct to the mock' : 'through recallgate'}`)
      let sampling = true
      const sampler = (async () => {
        while (sampling) {
          const [g, open] = await Promise.all([stack.gateway.stats(), stack.mock.activeResponses()])
          if (arm === 'recallgate') peakRss = Math.max(peakRss, g.rss)
          peakOpen = Math.max(peakOpen, open)
          await new Promise((r) => setTimeout(r, 100))
        }
      })()
      let r: LoadResult
      const p = pool(arm)
      try {
        r = await runLoad(p, request, { connections: n, requests: n, rate: n / rampSeconds })
      } finally {
        sampling = false
        await sampler
        await p.destroy()
      }
      for (const x of r.ttftMs) ttft[arm].push(x)
      if (r.failed > 0) problems.push(`streams (${arm}): ${r.failed} failed: ${JSON.stringify(r.outcomes)}`)
    }
    if (peakOpen < n * 0.9) problems.push(`streams: only ${peakOpen} of ${n} streams were open at once`)

    const q = (arm: 'direct' | 'recallgate', p: number): number => quantile(ttft[arm], p)
    const a50 = q('recallgate', 0.5) - q('direct', 0.5)
    const rows: Row[] = [
      {
        scenario: label,
        measure: `gateway RSS, ${peakOpen} streams open at peak`,
        baseline: `before ${mb(idleRss)}`,
        value: `peak ${mb(peakRss)}`,
        delta: `+${mb(peakRss - idleRss)}`,
        target: '≤ 200 MB',
        pass: peakRss <= 200 * 1024 * 1024,
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
    return { rows, problems }
  } finally {
    await stack.close()
  }
}
