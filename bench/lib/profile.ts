/**
 * Reads the V8 CPU profiles (`.cpuprofile`, the format `node --cpu-prof` writes) the servers wrote during a scenario's
 * measured phases and prints where their time went: self time per function (file:line), self time per file, and the
 * inclusive time of the gateway's own functions (src/…), which is what names a hot path ("logRequest: 20 %").
 * One profile per phase and process (`<phase>.<role>.cpuprofile`, see Stack.profileStop); when the phase recorded how
 * many requests the process served, every figure is also given in µs per request, which compares across phases,
 * processes and runs where a share of a differently sized total does not.
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

export function hotSpots(files: readonly string[]): HotSpots {
  const self = new Map<string, number>()
  const file = new Map<string, number>()
  const incl = new Map<string, number>()
  let total = 0
  const add = (m: Map<string, number>, k: string, dt: number): void => void m.set(k, (m.get(k) ?? 0) + dt)
  for (const name of files) {
    const p = JSON.parse(readFileSync(name, 'utf8')) as CpuProfile
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

/** The profiles in `dir` grouped by `<phase>.<role>` (files of older runs, `gateway-<pid>-<time>`, are `measured.gateway`). */
function profileGroups(dir: string): Map<string, string[]> {
  const groups = new Map<string, string[]>()
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.cpuprofile')).sort()) {
    const name = f.slice(0, -'.cpuprofile'.length)
    const key = /^[\w-]+\.(gateway|floor|before)$/.test(name) ? name : 'measured.gateway'
    groups.set(key, [...(groups.get(key) ?? []), join(dir, f)])
  }
  return groups
}

function requestsOf(dir: string, group: string): number | undefined {
  try {
    const meta = JSON.parse(readFileSync(join(dir, `${group}.json`), 'utf8')) as { requests?: number | null }
    return typeof meta.requests === 'number' && meta.requests > 0 ? meta.requests : undefined
  } catch {
    // No sidecar (an older profile, or a phase that did not count requests): shares only.
    return undefined
  }
}

export function summarizeProfiles(dir: string, n = 15): string {
  const out: string[] = []
  let groups: Map<string, string[]>
  try {
    groups = profileGroups(dir)
  } catch (err) {
    return `  (no profile read: ${(err as Error).message})`
  }
  if (groups.size === 0) return '  (no profile written)'
  for (const [group, files] of groups) {
    const spots = hotSpots(files)
    if (spots.totalMs === 0) {
      out.push(`  ${group}: empty profile`)
      continue
    }
    const requests = requestsOf(dir, group)
    const perReq = (ms: number): string => (requests === undefined ? '' : `${((ms * 1000) / requests).toFixed(1).padStart(7)} µs/req`)
    const line = (h: HotSpot): string => `  ${(h.share * 100).toFixed(1).padStart(5)} %  ${h.ms.toFixed(0).padStart(6)} ms ${perReq(h.ms)}  ${h.name}`
    const full = !group.endsWith('.floor')
    out.push(
      `  ${group}: busy ${spots.totalMs.toFixed(0)} ms sampled (idle excluded)` +
        (requests === undefined ? '' : `, ${requests} requests, ${perReq(spots.totalMs).trim()}`) +
        '. Self time by function:',
      ...spots.functions.slice(0, full ? n : 8).map(line),
    )
    if (!full) continue
    out.push('  Self time by file:', ...spots.files.slice(0, 10).map(line))
    out.push("  Inclusive time of the gateway's own functions (src/):", ...spots.inclusive.slice(0, n).map(line))
  }
  return out.join('\n')
}
