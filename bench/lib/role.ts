/**
 * Entry point of a benchmark child process. The parent (procs.ts) forks this file and sends one `start` message
 * naming the role; the child starts it, answers `{ready, url}`, then serves small requests over IPC: its RSS and CPU
 * time (so the parent can attribute them to the server under test), the mock's last received body, and `stop`
 * (a clean exit, so `--cpu-prof` writes its profile).
 */
import { loadConfig } from '../../src/config.js'
import { startGateway } from '../../src/main.js'
import { startMockUpstream, type MockBehaviour, type MockUpstreamOptions } from '../../src/mock-upstream.js'
import { buildKnowledgeBase, type KbBuildOptions } from './kb-build.js'
import { startFloor } from './floor.js'

export type RoleSpec =
  | { role: 'mock'; options: MockUpstreamOptions }
  | { role: 'gateway'; env: Record<string, string> }
  | { role: 'floor'; upstreamOrigin: string; connections: number }
  | { role: 'kb-build'; options: KbBuildOptions }

export type Command = { id: number; cmd: 'stats' | 'stop' | 'lastChatBody' } | { id: number; cmd: 'setDefault'; arg: MockBehaviour }

export interface ProcStats {
  rss: number
  /** User + system CPU time since start, µs. */
  cpuUs: number
}

function send(msg: unknown): void {
  process.send?.(msg)
}

async function start(spec: RoleSpec): Promise<{ url: string; handle: (c: Command) => unknown; close: () => Promise<void> }> {
  switch (spec.role) {
    case 'mock': {
      const mock = await startMockUpstream(spec.options)
      const handle = (c: Command): unknown => {
        if (c.cmd === 'lastChatBody') return mock.lastChatBody()
        if (c.cmd === 'setDefault') return void mock.setDefault(c.arg)
        return undefined
      }
      return { url: mock.url, handle, close: () => mock.close() }
    }
    case 'gateway': {
      const gw = await startGateway(loadConfig(spec.env), { onBootstrapKey: () => undefined })
      return { url: gw.url, handle: () => undefined, close: () => gw.close() }
    }
    case 'floor': {
      const floor = await startFloor(spec)
      return { url: floor.url, handle: () => undefined, close: () => floor.close() }
    }
    case 'kb-build': {
      const built = await buildKnowledgeBase(spec.options)
      return { url: JSON.stringify(built), handle: () => undefined, close: async () => undefined }
    }
  }
}

process.once('message', (spec: RoleSpec) => {
  start(spec).then(
    (r) => {
      process.on('message', (c: Command) => {
        if (c.cmd === 'stats') {
          const cpu = process.cpuUsage()
          return send({ id: c.id, value: { rss: process.memoryUsage.rss(), cpuUs: cpu.user + cpu.system } satisfies ProcStats })
        }
        if (c.cmd === 'stop') {
          // Exit whatever close() does: a stuck close must not hang the suite.
          const force = setTimeout(() => process.exit(0), 5000)
          r.close().finally(() => {
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
