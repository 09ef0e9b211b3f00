/**
 * From interleaved arms to the suite's output: a problems line for each arm that had failures, and a table row that
 * compares one arm's latency quantile with a baseline arm's, measured in the same run.
 */
import { failures, type ArmResult } from './interleave.js'
import { ms, quantile, signedMs } from './stats.js'
import type { Row } from './table.js'

/** One arm's result; a name the scenario never ran is a bug in the scenario, not a measurement. */
export function arm(m: ReadonlyMap<string, ArmResult>, name: string): ArmResult {
  const r = m.get(name)
  if (r === undefined) throw new Error(`no arm named "${name}" (arms: ${[...m.keys()].join(', ')})`)
  return r
}

/** Quantile `p` of an arm's request latency, ms. */
export const armQuantile = (m: ReadonlyMap<string, ArmResult>, name: string, p: number): number => quantile(arm(m, name).latencyMs, p)

/** `<scenario>: <complaint>` for every arm that had failed requests. */
export function armProblems(scenario: string, m: ReadonlyMap<string, ArmResult>): string[] {
  const out: string[] = []
  for (const r of m.values()) {
    const f = failures(r)
    if (f !== undefined) out.push(`${scenario}: ${f}`)
  }
  return out
}

export interface LatencyRowOptions {
  scenario: string
  measure: string
  /** The arm measured (recallgate's). */
  arm: string
  /** The arm it is compared with. */
  baseline: string
  /** Quantile, e.g. 0.5. */
  p: number
  /** How the baseline cell names it; default 'direct'. */
  baselineLabel?: string
  /** The target on the added latency, ms: the row passes when `arm − baseline ≤ targetMs`. None: no target. */
  targetMs?: number
}

/** A row: the baseline's quantile, the arm's, and the latency the arm adds at that quantile. */
export function latencyRow(m: ReadonlyMap<string, ArmResult>, o: LatencyRowOptions): Row {
  const base = armQuantile(m, o.baseline, o.p)
  const value = armQuantile(m, o.arm, o.p)
  const added = value - base
  return {
    scenario: o.scenario,
    measure: o.measure,
    baseline: `${o.baselineLabel ?? 'direct'} ${ms(base)}`,
    value: ms(value),
    delta: signedMs(added),
    target: o.targetMs === undefined ? '' : `≤ +${o.targetMs} ms`,
    ...(o.targetMs === undefined ? {} : { pass: added <= o.targetMs }),
  }
}
