/**
 * Structured data → readable text. JSON becomes "key.path: value" lines (one paragraph per top-level entry, so a
 * record stays together); CSV becomes one paragraph per row of "header: value" lines, so every value carries the
 * name of its column into the chunk that holds it.
 */
import { isObject } from '../types.js'
import { TextBuilder, type Block } from './text-builder.js'

/** Deeper structures are rendered as compact JSON on one line instead of being walked. */
const MAX_DEPTH = 32

/** `undefined` when `text` is not valid JSON: the caller indexes it as plain text instead of refusing it. */
export function extractJson(text: string): { text: string; blocks: Block[] } | undefined {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    // Not JSON after all (or nested past the engine's stack): still text worth indexing.
    return undefined
  }
  const out = new TextBuilder()
  const entries: Array<[string, unknown]> = Array.isArray(value)
    ? value.map((v, i) => [`[${i}]`, v])
    : isObject(value)
      ? Object.entries(value).map(([k, v]) => [key(k, ''), v])
      : [['', value]]
  let scalars: string[] = []
  for (const [path, v] of entries) {
    const lines: string[] = []
    walk(v, path, 0, lines)
    // Consecutive scalar top-level entries share a paragraph; a nested entry gets its own.
    if (lines.length === 1 && !isObject(v) && !Array.isArray(v)) {
      scalars.push(lines[0] as string)
      continue
    }
    if (scalars.length) out.paragraph(scalars.join('\n'))
    scalars = []
    out.paragraph(lines.join('\n'))
  }
  if (scalars.length) out.paragraph(scalars.join('\n'))
  return out.build()
}

function walk(v: unknown, path: string, depth: number, lines: string[]): void {
  if (Array.isArray(v) && v.length > 0 && depth < MAX_DEPTH) {
    v.forEach((x, i) => walk(x, `${path}[${i}]`, depth + 1, lines))
  } else if (isObject(v) && Object.keys(v).length > 0 && depth < MAX_DEPTH) {
    for (const [k, x] of Object.entries(v)) walk(x, key(k, path), depth + 1, lines)
  } else {
    const s = typeof v === 'string' ? v : compact(v)
    lines.push(path ? `${path}: ${s}` : s)
  }
}

/**
 * One-line JSON of what lies past MAX_DEPTH. V8's JSON.parse accepts nesting that JSON.stringify then overflows the
 * stack on (thousands of levels): such a remainder is not text anyone searches for, so it is left out with a marker
 * rather than failing the whole upload with a 500.
 */
function compact(v: unknown): string {
  try {
    return JSON.stringify(v) ?? 'null'
  } catch (err) {
    if (err instanceof RangeError) return '[nested too deeply to index]'
    throw err
  }
}

function key(k: string, parent: string): string {
  const seg = /^[\p{L}_$][\p{L}\p{N}_$-]*$/u.test(k) ? k : JSON.stringify(k)
  return parent ? `${parent}.${seg}` : seg
}

/** RFC 4180 CSV (quoted fields, "" escapes, line breaks inside quotes); the delimiter is sniffed unless `tabs`. */
export function extractCsv(text: string, tabs: boolean): { text: string; blocks: Block[] } {
  const delimiter = tabs ? '\t' : sniffDelimiter(text)
  const rows = parseCsv(text, delimiter)
  const out = new TextBuilder()
  const header = rows[0]?.map((h) => h.trim()) ?? []
  if (rows.length === 1) out.paragraph(header.join(', '))
  for (let r = 1; r < rows.length; r++) {
    const row = rows[r] as string[]
    const lines: string[] = []
    row.forEach((cell, c) => {
      const value = cell.trim()
      if (value) lines.push(`${header[c] || `column ${c + 1}`}: ${value}`)
    })
    out.paragraph(lines.join('\n'))
  }
  return out.build()
}

function sniffDelimiter(text: string): string {
  const first = text.slice(0, text.indexOf('\n') === -1 ? text.length : text.indexOf('\n'))
  let best = ','
  let bestCount = 0
  for (const d of [',', ';', '\t', '|']) {
    const count = first.split(d).length - 1
    if (count > bestCount) {
      best = d
      bestCount = count
    }
  }
  return best
}

export function parseCsv(text: string, delimiter: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let cell = ''
  // Whether `cell` holds anything but white space: kept as we go, since trimming the cell at every quote was
  // quadratic on a cell of many quotes.
  let cellText = false
  let quoted = false
  let i = 0
  const n = text.length
  while (i < n) {
    const ch = text[i] as string
    if (quoted) {
      if (ch === '"') {
        if (text[i + 1] === '"') {
          cell += '"'
          cellText = true
          i += 2
          continue
        }
        quoted = false
      } else {
        cell += ch
        if (!cellText && ch.trim() !== '') cellText = true
      }
      i++
      continue
    }
    if (ch === '"' && !cellText) {
      quoted = true
      cell = ''
    } else if (ch === delimiter) {
      row.push(cell)
      cell = ''
      cellText = false
    } else if (ch === '\n') {
      row.push(cell)
      if (row.some((c) => c.trim() !== '')) rows.push(row)
      row = []
      cell = ''
      cellText = false
    } else {
      cell += ch
      if (!cellText && ch.trim() !== '') cellText = true
    }
    i++
  }
  row.push(cell)
  if (row.some((c) => c.trim() !== '')) rows.push(row)
  return rows
}
