/**
 * Entry point of a benchmark child process. The parent (procs.ts) forks this file and sends one `start` message
 * naming the role; the child starts it, answers `{ready, url}`, then serves small requests over IPC: its RSS and CPU
 * time (so the parent can attribute them to the server under test), the mock's last received body, and `stop`
 * (a clean exit, so `--cpu-prof` writes its profile).
 */
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks'
import { join } from 'node:path'
import type { MockBehaviour, MockUpstreamOptions } from '../../src/mock-upstream.js'
import type { KbBuildOptions } from './kb-build.js'

export type RoleSpec =
  | { role: 'mock'; options: MockUpstreamOptions }
  | { role: 'gateway'; env: Record<string, string> }
  | { role: 'floor'; upstreamOrigin: string; connections: number }
  | { role: 'kb-build'; options: KbBuildOptions }

export type Command =
  | { id: number; cmd: 'stats' | 'stop' | 'lastChatBody' | 'activeResponses' | 'profileStart' | 'eldStart' | 'eldStop' }
  | { id: number; cmd: 'setDefault'; arg: MockBehaviour }
  | { id: number; cmd: 'profileStop'; arg: string }

export interface ProcStats {
  rss: number
  /** User + system CPU time since start, µs. */
  cpuUs: number
  /** How long the role took to start (for the gateway: startGateway, config to listening), ms. */
  startMs: number
}

/** Event-loop delay of this process over a phase, ms (`monitorEventLoopDelay`, 10 ms resolution). */
export interface EldStats {
  p50: number
  p99: number
  max: number
  samples: number
}

let eld: IntervalHistogram | undefined
function eldStop(): EldStats | null {
  if (eld === undefined) return null
  eld.disable()
  const h = eld
  eld = undefined
  return { p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6, max: h.max / 1e6, samples: h.count }
}

function send(msg: unknown): void {
  process.send?.(msg)
}

/**
 * V8's sampling CPU profiler (what `node --cpu-prof` runs), started and stopped on command through the inspector so
 * the profile covers the measured phase only, not startup, module loading or index building.
 */
let profiler: Session | undefined
function post(method: string, params?: object): Promise<unknown> {
  return new Promise((resolve, reject) => {
    ;(profiler as Session).post(method, params ?? {}, (err: Error | null, result?: unknown) => (err ? reject(err) : resolve(result)))
  })
}
async function profileStart(): Promise<void> {
  if (profiler !== undefined) return
  profiler = new Session()
  profiler.connect()
  await post('Profiler.enable')
  // 250 µs: a request costs a few hundred µs of CPU here, so the default 1 ms would see one sample in several requests.
  await post('Profiler.setSamplingInterval', { interval: 250 })
  await post('Profiler.start')
}
async function profileStop(dir: string): Promise<string | null> {
  if (profiler === undefined) return null
  const { profile } = (await post('Profiler.stop')) as { profile: unknown }
  profiler.disconnect()
  profiler = undefined
  const file = join(dir, `gateway-${process.pid}-${Date.now()}.cpuprofile`)
  writeFileSync(file, JSON.stringify(profile))
  return file
}

/**
 * When the role's start began, after its modules were imported: each role imports only its own (a gateway process
 * that imported the mock too held gpt-tokenizer's encoder, ≈ 30 MB of RSS a production gateway never has).
 */
let startedAt = 0

async function start(spec: RoleSpec): Promise<{ url: string; handle: (c: Command) => unknown; close: () => Promise<void> }> {
  switch (spec.role) {
    case 'mock': {
      const { startMockUpstream } = await import('../../src/mock-upstream.js')
      startedAt = performance.now()
      const mock = await startMockUpstream(spec.options)
      const handle = (c: Command): unknown => {
        if (c.cmd === 'lastChatBody') return mock.lastChatBody()
        if (c.cmd === 'activeResponses') return mock.activeResponses()
        if (c.cmd === 'setDefault') return void mock.setDefault(c.arg)
        return undefined
      }
      return { url: mock.url, handle, close: () => mock.close() }
    }
    case 'gateway': {
      const [{ loadConfig }, { startGateway }] = await Promise.all([import('../../src/config.js'), import('../../src/main.js')])
      startedAt = performance.now()
      const gw = await startGateway(loadConfig(spec.env), { onBootstrapKey: () => undefined })
      return { url: gw.url, handle: () => undefined, close: () => gw.close() }
    }
    case 'floor': {
      const { startFloor } = await import('./floor.js')
      startedAt = performance.now()
      const floor = await startFloor(spec)
      return { url: floor.url, handle: () => undefined, close: () => floor.close() }
    }
    case 'kb-build': {
      const { buildKnowledgeBase } = await import('./kb-build.js')
      startedAt = performance.now()
      const built = await buildKnowledgeBase(spec.options)
      return { url: JSON.stringify(built), handle: () => undefined, close: async () => undefined }
    }
  }
}

let startMs = 0
process.once('message', (spec: RoleSpec) => {
  start(spec).then(
    (r) => {
      startMs = performance.now() - startedAt
      process.on('message', (c: Command) => {
        if (c.cmd === 'stats') {
          const cpu = process.cpuUsage()
          return send({ id: c.id, value: { rss: process.memoryUsage.rss(), cpuUs: cpu.user + cpu.system, startMs } satisfies ProcStats })
        }
        if (c.cmd === 'eldStart') {
          eldStop()
          eld = monitorEventLoopDelay({ resolution: 10 })
          eld.enable()
          return send({ id: c.id, value: null })
        }
        if (c.cmd === 'eldStop') return send({ id: c.id, value: eldStop() })
        if (c.cmd === 'profileStart' || c.cmd === 'profileStop') {
          const p = c.cmd === 'profileStop' ? profileStop(c.arg) : profileStart()
          p.then(
            (value) => send({ id: c.id, value: value ?? null }),
            (err: unknown) => send({ id: c.id, error: String(err) }),
          )
          return
        }
        if (c.cmd === 'stop') {
          // Exit whatever close() does: a stuck close must not hang the suite.
          const force = setTimeout(() => process.exit(0), 5000)
          // The callback exits the process whether close() resolved or not: nothing is left to see a rejection.
          void r.close().finally(() => {
            clearTimeout(force)
            send({ id: c.id, value: null })
            process.exit(0)
          })
          return
        }
        Promise.resolve(r.handle(c)).then(
          (value) => send({ id: c.id, value: value ?? null }),
          (err: unknown) => send({ id: c.id, error: String(err) }),
        )
      })
      send({ ready: true, url: r.url, pid: process.pid })
    },
    (err: unknown) => {
      send({ ready: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) })
      process.exit(1)
    },
  )
})
