/**
 * Measurement arithmetic and formatting shared by the scenarios. Percentiles are nearest-rank, from src/cli/bench.ts,
 * so the CLI and the suite compute them the same way.
 */
import { percentile } from '../../src/cli/bench.js'

/** Quantile `q` of unsorted samples; NaN when there are none. */
export function quantile(samples: readonly number[], q: number): number {
  return percentile(Float64Array.from(samples).sort(), q)
}

export const us = (ms: number): string => (Number.isFinite(ms) ? `${Math.round(ms * 1000)} µs` : '-')
export const ms = (v: number): string => (Number.isFinite(v) ? (Math.abs(v) < 10 ? `${v.toFixed(2)} ms` : `${v.toFixed(1)} ms`) : '-')
export const signedUs = (v: number): string => (Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${Math.round(v * 1000)} µs` : '-')
export const signedMs = (v: number): string => (Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${v.toFixed(2)} ms` : '-')
export const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(0)} MB`
export const rps = (v: number): string => (v >= 100 ? `${Math.round(v)}/s` : `${v.toFixed(1)}/s`)
export const ratio = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(2)}×` : '-')

/** Wall time of `fn` (performance.now) and the CPU time of the whole process meanwhile (all threads), in ms. */
export async function timed<T>(fn: () => Promise<T> | T): Promise<{ value: T; wallMs: number; cpuMs: number }> {
  const cpu0 = process.cpuUsage()
  const s = performance.now()
  const value = await fn()
  const wallMs = performance.now() - s
  const cpu = process.cpuUsage(cpu0)
  return { value, wallMs, cpuMs: (cpu.user + cpu.system) / 1000 }
}
