/**
 * Servers under test run in their own processes, apart from the load generator (this process): on a 2-core machine
 * a gateway sharing an event loop with the client that measures it would be timed by its own load. Each child is a
 * fork of role.js, started with one message and driven over IPC.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import type { MockBehaviour } from '../../src/mock-upstream.js'
import type { Command, EldStats, ProcStats, RoleSpec } from './role.js'

export interface Proc {
  readonly url: string
  readonly pid: number
  stats(): Promise<ProcStats>
  lastChatBody(): Promise<Record<string, unknown> | undefined>
  setDefault(b: MockBehaviour): Promise<void>
  /** Mock only: responses it is still writing (open streams). */
  activeResponses(): Promise<number>
  /** Start V8's CPU profiler in the child. */
  profileStart(): Promise<void>
  /** Stop it and write the profile (`.cpuprofile`) into `dir`; resolves to the file, or null if none was running. */
  profileStop(dir: string): Promise<string | null>
  /** Start measuring the child's event-loop delay (monitorEventLoopDelay). */
  eldStart(): Promise<void>
  /** Stop, and the delay's percentiles since eldStart (null if it was not started). */
  eldStop(): Promise<EldStats | null>
  /** Clean exit. */
  stop(): Promise<void>
}

export interface SpawnOptions {
  /** Milliseconds to wait for the child to be ready; default 120 s (a large knowledge base loads slowly). */
  readyTimeoutMs?: number
  /**
   * The role script to fork; default this build's role.js. `--ab DIR` points it at another build's
   * `DIR/bench/lib/role.js`, so a gateway from before a change runs as one more interleaved arm.
   */
  script?: string
}

const ROLE_SCRIPT = fileURLToPath(new URL('./role.js', import.meta.url))
const live = new Set<ChildProcess>()
// A suite that crashes must not leave servers behind.
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL')
})

export async function spawnRole(spec: RoleSpec, o: SpawnOptions = {}): Promise<Proc> {
  // stdout (the gateway's JSON request log) goes to /dev/null: written, as in production, but not shown.
  const child = fork(o.script ?? ROLE_SCRIPT, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  live.add(child)
  child.once('exit', () => live.delete(child))
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  let nextId = 1

  const ready = new Promise<{ url: string; pid: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${spec.role}: not ready in time`)), o.readyTimeoutMs ?? 120_000)
    child.once('exit', (code) => reject(new Error(`${spec.role} exited with ${String(code)} before it was ready`)))
    child.on('message', (m: { ready?: boolean; url?: string; pid?: number; error?: string; id?: number; value?: unknown }) => {
      if (m.ready === true) {
        clearTimeout(timer)
        resolve({ url: m.url ?? '', pid: m.pid ?? 0 })
      } else if (m.ready === false) {
        clearTimeout(timer)
        reject(new Error(`${spec.role} failed to start: ${m.error ?? ''}`))
      } else if (m.id !== undefined) {
        const p = pending.get(m.id)
        pending.delete(m.id)
        if (m.error !== undefined) p?.reject(new Error(m.error))
        else p?.resolve(m.value)
      }
    })
  })
  child.send(spec)
  const { url, pid } = await ready

  const call = <T>(c: Omit<Command, 'id'>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
      child.send({ ...c, id })
    })

  return {
    url,
    pid,
    stats: () => call<ProcStats>({ cmd: 'stats' }),
    lastChatBody: async () => (await call<Record<string, unknown> | null>({ cmd: 'lastChatBody' })) ?? undefined,
    profileStart: () => call<void>({ cmd: 'profileStart' }),
    profileStop: (dir) => call<string | null>({ cmd: 'profileStop', arg: dir } as Omit<Command, 'id'>),
    activeResponses: () => call<number>({ cmd: 'activeResponses' }),
    eldStart: () => call<void>({ cmd: 'eldStart' }),
    eldStop: () => call<EldStats | null>({ cmd: 'eldStop' }),
    setDefault: (b) => call<void>({ cmd: 'setDefault', arg: b } as Omit<Command, 'id'>),
    stop: async () => {
      if (child.exitCode !== null) return
      const exited = once(child, 'exit')
      child.send({ cmd: 'stop', id: nextId++ })
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await exited
      clearTimeout(timer)
    },
  }
}
