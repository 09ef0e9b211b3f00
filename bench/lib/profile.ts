/**
 * Reads the V8 CPU profiles (`.cpuprofile`, the format `node --cpu-prof` writes) a gateway wrote during a scenario's
 * measured phase and prints where its time went: self time per function (file:line), self time per file, and the
 * inclusive time of the gateway's own functions (src/…), which is what names a hot path ("logRequest: 20 %").
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}
interface CpuProfile {
  nodes: ProfileNode[]
  samples?: number[]
  timeDeltas?: number[]
}

export interface HotSpot {
  name: string
  ms: number
  share: number
}

export interface HotSpots {
  /** Self time per function. */
  functions: HotSpot[]
  /** Self time per file. */
  files: HotSpot[]
  /** Inclusive time of functions in src/ (a function counted once per sample, however deep its recursion). */
  inclusive: HotSpot[]
  /** Non-idle time sampled. */
  totalMs: number
}

export function hotSpots(dir: string): HotSpots {
  const self = new Map<string, number>()
  const file = new Map<string, number>()
  const incl = new Map<string, number>()
  let total = 0
  const add = (m: Map<string, number>, k: string, dt: number): void => void m.set(k, (m.get(k) ?? 0) + dt)
  for (const name of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
    const p = JSON.parse(readFileSync(join(dir, name), 'utf8')) as CpuProfile
    const byId = new Map(p.nodes.map((n) => [n.id, n]))
    const parent = new Map<number, number>()
    for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
    const samples = p.samples ?? []
    const deltas = p.timeDeltas ?? []
    for (let i = 0; i < samples.length; i++) {
      const node = byId.get(samples[i] as number)
      // timeDeltas[i] is the gap before sample i, so sample i lasts until the next one.
      const dt = (deltas[i + 1] ?? 0) / 1000
      if (node === undefined || dt <= 0 || node.callFrame.functionName === '(idle)') continue
      total += dt
      const key = label(node)
      add(self, key, dt)
      add(file, shorten(node.callFrame.url) || node.callFrame.functionName, dt)
      const seen = new Set<string>()
      for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
        const n = byId.get(id) as ProfileNode
        if (!/\/src\//.test(n.callFrame.url)) continue
        const k = label(n)
        if (!seen.has(k)) {
          seen.add(k)
          add(incl, k, dt)
        }
      }
    }
  }
  const top = (m: Map<string, number>): HotSpot[] =>
    [...m].sort((a, b) => b[1] - a[1]).map(([name, ms]) => ({ name, ms, share: total > 0 ? ms / total : 0 }))
  return { functions: top(self), files: top(file), inclusive: top(incl), totalMs: total }
}

function label(n: ProfileNode): string {
  const { functionName, url, lineNumber } = n.callFrame
  const short = shorten(url)
  return `${functionName || '(anonymous)'}${short ? ` ${short}:${lineNumber + 1}` : ''}`
}

/** `file:///…/dist/src/chat/handler.js` → `src/chat/handler.js`; node internals keep their `node:` name. */
function shorten(url: string): string {
  const m = /\/(?:dist\/)?((?:src|bench)\/.*|node_modules\/.*)$/.exec(url)
  if (m) return (m[1] as string).replace(/^(?:node_modules\/.*)?node_modules\//, 'node_modules/')
  return url.replace(/^file:\/\//, '')
}

export function summarizeProfiles(dir: string, n = 15): string {
  let spots: HotSpots
  try {
    spots = hotSpots(dir)
  } catch (err) {
    return `  (no profile read: ${(err as Error).message})`
  }
  if (spots.totalMs === 0) return '  (empty profile)'
  const line = (h: HotSpot): string => `  ${(h.share * 100).toFixed(1).padStart(5)} %  ${h.ms.toFixed(0).padStart(6)} ms  ${h.name}`
  return [
    `  busy ${spots.totalMs.toFixed(0)} ms sampled (idle excluded). Self time by function:`,
    ...spots.functions.slice(0, n).map(line),
    '  Self time by file:',
    ...spots.files.slice(0, 10).map(line),
    "  Inclusive time of the gateway's own functions (src/):",
    ...spots.inclusive.slice(0, n).map(line),
  ].join('\n')
}
