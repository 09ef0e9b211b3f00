/** The suite's one output: a plain-text table (also valid Markdown), one row per figure. */

export interface Row {
  scenario: string
  measure: string
  /** What the figure is compared with, measured in the same run (e.g. "direct 412 µs"). */
  baseline: string
  /** recallgate's own figure. */
  value: string
  /** The difference or ratio against the baseline: the figure that counts. */
  delta: string
  target: string
  /** undefined: no target. */
  pass?: boolean | undefined
}

const COLUMNS: Array<[keyof Row, string]> = [
  ['scenario', 'scenario'],
  ['measure', 'measure'],
  ['baseline', 'baseline (same run)'],
  ['value', 'recallgate'],
  ['delta', 'added / ratio'],
  ['target', 'target'],
  ['pass', 'ok'],
]

const cell = (r: Row, k: keyof Row): string => {
  if (k === 'pass') return r.pass === undefined ? '' : r.pass ? 'yes' : 'MISS'
  return String(r[k])
}

export function renderTable(rows: readonly Row[]): string {
  const width = COLUMNS.map(([k, title]) => Math.max(title.length, ...rows.map((r) => [...cell(r, k)].length)))
  const pad = (s: string, w: number): string => s + ' '.repeat(Math.max(0, w - [...s].length))
  const line = (cells: string[]): string => `| ${cells.map((c, i) => pad(c, width[i] as number)).join(' | ')} |`
  return [
    line(COLUMNS.map(([, t]) => t)),
    `|${width.map((w) => '-'.repeat(w + 2)).join('|')}|`,
    ...rows.map((r) => line(COLUMNS.map(([k]) => cell(r, k)))),
  ].join('\n')
}
