/**
 * Interleaved measurement: the arms being compared (direct, floor, gateway …) take turns in short batches, and the
 * order rotates every round (round r starts with arm r mod n), so a burst of noise from the other tenants of this
 * shared machine, a GC, or the CPU's clock changing lands on every arm alike instead of on whichever ran last.
 * Samples are pooled per arm; per-round figures are kept to show the spread.
 */
import { Pool } from 'undici'
import { runLoad, type LoadOptions, type LoadRequest, type LoadResult } from '../../src/cli/bench.js'
import type { Proc } from './procs.js'
import { quantile } from './stats.js'

export interface Arm {
  name: string
  /** Origin of the server this arm sends to. */
  origin: string
  request: LoadRequest
  /** The process whose CPU time is charged to this arm (the server under test). */
  proc?: Proc | undefined
  /**
   * CPU time, µs, of another server this arm's requests make work for (a database's backends), read before and after
   * each of the arm's batches like `proc`'s.
   */
  backendCpuUs?: (() => Promise<number>) | undefined
}

export interface ArmResult {
  name: string
  ok: number
  failed: number
  outcomes: Record<string, number>
  elapsedMs: number
  latencyMs: number[]
  ttftMs: number[]
  /** CPU time of `proc` per successful request, µs; NaN without a proc. */
  cpuUsPerRequest: number
  /** CPU time of `backendCpuUs` per successful request, µs; NaN without one. */
  backendCpuUsPerRequest: number
  rounds: Array<{ p50: number; p99: number; ttftP50: number; rps: number }>
}

export interface InterleaveOptions {
  rounds: number
  /** One batch of one arm. */
  batch: LoadOptions
  /** Unmeasured load per arm before the first round (JIT, connection pools, caches). */
  warmup?: LoadOptions
  /** Undici connections per arm; default batch.connections. */
  connections?: number
  /** Called once after the warmup, before the first measured batch (e.g. to start a profiler). */
  afterWarmup?: () => Promise<void>
}

export async function interleave(arms: readonly Arm[], o: InterleaveOptions): Promise<Map<string, ArmResult>> {
  const pools = arms.map((a) => new Pool(a.origin, { connections: o.connections ?? o.batch.connections, pipelining: 1, keepAliveTimeout: 60_000 }))
  const results = new Map<string, ArmResult>()
  const cpuUs = new Map<string, number>()
  const backendUs = new Map<string, number>()
  for (const a of arms)
    results.set(a.name, {
      name: a.name,
      ok: 0,
      failed: 0,
      outcomes: {},
      elapsedMs: 0,
      latencyMs: [],
      ttftMs: [],
      cpuUsPerRequest: NaN,
      backendCpuUsPerRequest: NaN,
      rounds: [],
    })
  try {
    if (o.warmup) for (const [i, a] of arms.entries()) await runLoad(pools[i] as Pool, a.request, { ...o.warmup, maxSamples: 0 })
    await o.afterWarmup?.()
    for (let r = 0; r < o.rounds; r++) {
      for (let j = 0; j < arms.length; j++) {
        const i = (r + j) % arms.length
        const arm = arms[i] as Arm
        const before = arm.proc ? (await arm.proc.stats()).cpuUs : 0
        const backendBefore = arm.backendCpuUs ? await arm.backendCpuUs() : 0
        const res = await runLoad(pools[i] as Pool, arm.request, o.batch)
        if (arm.backendCpuUs) backendUs.set(arm.name, (backendUs.get(arm.name) ?? 0) + (await arm.backendCpuUs()) - backendBefore)
        if (arm.proc) cpuUs.set(arm.name, (cpuUs.get(arm.name) ?? 0) + (await arm.proc.stats()).cpuUs - before)
        merge(results.get(arm.name) as ArmResult, res)
      }
    }
  } finally {
    await Promise.all(pools.map((p) => p.destroy()))
  }
  for (const r of results.values()) {
    const cpu = cpuUs.get(r.name)
    if (cpu !== undefined && r.ok > 0) r.cpuUsPerRequest = cpu / r.ok
    const backend = backendUs.get(r.name)
    if (backend !== undefined && r.ok > 0) r.backendCpuUsPerRequest = backend / r.ok
  }
  return results
}

function merge(into: ArmResult, res: LoadResult): void {
  into.ok += res.ok
  into.failed += res.failed
  for (const [k, n] of Object.entries(res.outcomes)) into.outcomes[k] = (into.outcomes[k] ?? 0) + n
  into.elapsedMs += res.elapsedMs
  // A loop, not push(...xs): spreading 100k+ samples overflows the call stack.
  for (const x of res.latencyMs) into.latencyMs.push(x)
  for (const x of res.ttftMs) into.ttftMs.push(x)
  into.rounds.push({
    p50: quantile(res.latencyMs, 0.5),
    p99: quantile(res.latencyMs, 0.99),
    ttftP50: quantile(res.ttftMs, 0.5),
    rps: res.ok / (res.elapsedMs / 1000),
  })
}

/** Successful requests per second over all of an arm's batches. */
export const throughput = (r: ArmResult): number => r.ok / (r.elapsedMs / 1000)

/** One-line complaint when an arm had failures, for the suite to print and fail on. */
export function failures(r: ArmResult): string | undefined {
  if (r.failed === 0) return undefined
  return `${r.name}: ${r.failed} failed (${Object.entries(r.outcomes).map(([k, n]) => `${k} ×${n}`).join(', ')})`
}

/** One line per arm (for --verbose and for the docs): samples, percentiles, throughput, CPU per request. */
export function describeArms(title: string, m: Map<string, ArmResult>): string {
  const f = (v: number): string => (Number.isFinite(v) ? `${Math.round(v * 1000)}` : '-')
  const lines = [...m.values()].map((r) => {
    const ttft = r.ttftMs.length ? ` ttft p50 ${f(quantile(r.ttftMs, 0.5))} p99 ${f(quantile(r.ttftMs, 0.99))}` : ''
    const backend = Number.isFinite(r.backendCpuUsPerRequest) ? ` + backend ${r.backendCpuUsPerRequest.toFixed(0)}` : ''
    return `  ${r.name.padEnd(22)} n ${String(r.ok).padStart(6)}  p50 ${f(quantile(r.latencyMs, 0.5))} p90 ${f(quantile(r.latencyMs, 0.9))} p99 ${f(quantile(r.latencyMs, 0.99))} µs${ttft}  ${throughput(r).toFixed(0)}/s  cpu ${Number.isFinite(r.cpuUsPerRequest) ? r.cpuUsPerRequest.toFixed(0) : '-'}${backend} µs/req`
  })
  return `${title}\n${lines.join('\n')}`
}
