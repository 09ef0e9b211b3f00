/**
 * The process layout every scenario uses: a mock provider, a recallgate gateway and optionally the floor
 * pass-through, each in its own child process, with the load generator in this one.
 */
import { existsSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import type { MockUpstreamOptions } from '../../src/mock-upstream.js'
import { spawnRole, type Proc } from './procs.js'

/** The bench's service key (inline, `unlimited` plan: the rate limiter must not be what is measured). */
export const BENCH_KEY = 'rg_bench_unlimited_key_0001-Vq8Zr3Lw5Ym2'
export const PROVIDER_KEY = 'sk-or-bench-not-a-real-key'
export const MODEL = 'openai/gpt-4o'

export interface Stack {
  mock: Proc
  gateway: Proc
  floor: Proc | undefined
  /** The gateway of another build (`--ab DIR`), same configuration, its own DATA_DIR. */
  before: Proc | undefined
  /** Origins (scheme://host:port) of each server. */
  origins: { mock: string; gateway: string; floor: string | undefined; before: string | undefined }
  dataDir: string
  /**
   * Start profiling the gateway, and the floor and the other build's gateway when they run (a no-op unless the stack
   * was started with cpuProfDir): call after warmup.
   */
  profileStart(): Promise<void>
  /**
   * Stop the profilers and write one profile per process as `<dir>/<phase>.<role>.cpuprofile`, with the requests each
   * process served in the phase (for µs per request) in `<dir>/<phase>.<role>.json`. A profile still running at
   * close() is written as phase `measured`.
   */
  profileStop(phase: string, requests?: Partial<Record<ProfiledRole, number>>): Promise<void>
  close(): Promise<void>
}

export type ProfiledRole = 'gateway' | 'floor' | 'before'

export interface StackOptions {
  mock?: MockUpstreamOptions
  /** Extra gateway environment (on top of PORT, UPSTREAM_BASE_URL, DATA_DIR, SERVICE_KEYS). */
  env?: Record<string, string>
  floor?: boolean
  /** The floor's upstream connections (default 128, the gateway's UPSTREAM_CONNECTIONS default). */
  floorConnections?: number
  /** Use this DATA_DIR (kept); default a temp dir removed on close. */
  dataDir?: string
  /** Profile the gateway from profileStart() to profileStop()/close() and write the profiles here. */
  cpuProfDir?: string | undefined
  /** Another build's `dist` directory: start its gateway too, as `before` (see SpawnOptions.script). */
  abDist?: string | undefined
  /** `before` opens the same DATA_DIR (LMDB is shared between processes) instead of an empty one of its own. */
  abSameDataDir?: boolean
}

export async function startStack(o: StackOptions = {}): Promise<Stack> {
  const dataDir = o.dataDir ?? mkdtempSync(join(tmpdir(), 'recallgate-bench-'))
  const started: Proc[] = []
  try {
    const mock = await spawnRole({ role: 'mock', options: { maxRecorded: 1, ...o.mock } })
    started.push(mock)
    const gatewayEnv: Record<string, string> = {
      PORT: '0',
      HOST: '127.0.0.1',
      UPSTREAM_BASE_URL: mock.url,
      DATA_DIR: dataDir,
      SERVICE_KEYS: `${BENCH_KEY}:unlimited`,
      ...o.env,
    }
    const gateway = await spawnRole({ role: 'gateway', env: gatewayEnv })
    started.push(gateway)
    const mockOrigin = new URL(mock.url).origin
    const floor = o.floor ? await spawnRole({ role: 'floor', upstreamOrigin: mockOrigin, connections: o.floorConnections ?? 128 }) : undefined
    if (floor) started.push(floor)
    let beforeDataDir: string | undefined
    let before: Proc | undefined
    if (o.abDist !== undefined) {
      const script = join(resolve(o.abDist), 'bench', 'lib', 'role.js')
      if (!existsSync(script)) throw new Error(`--ab: no ${script} (point it at a build's dist directory)`)
      if (o.abSameDataDir !== true) beforeDataDir = mkdtempSync(join(tmpdir(), 'recallgate-bench-before-'))
      before = await spawnRole({ role: 'gateway', env: { ...gatewayEnv, DATA_DIR: beforeDataDir ?? dataDir } }, { script })
      started.push(before)
    }
    const profiled = (): Array<[ProfiledRole, Proc]> => {
      const all: Array<[ProfiledRole, Proc | undefined]> = [['gateway', gateway], ['floor', floor], ['before', before]]
      return all.filter((e): e is [ProfiledRole, Proc] => e[1] !== undefined)
    }
    let profiling = false
    const profileStop = async (phase: string, requests: Partial<Record<ProfiledRole, number>> = {}): Promise<void> => {
      const dir = o.cpuProfDir
      if (dir === undefined || !profiling) return
      profiling = false
      await Promise.all(
        profiled().map(async ([role, p]) => {
          const file = await p.profileStop(dir)
          if (file === null) return
          renameSync(file, join(dir, `${phase}.${role}.cpuprofile`))
          writeFileSync(join(dir, `${phase}.${role}.json`), JSON.stringify({ requests: requests[role] ?? null }))
        }),
      )
    }
    return {
      mock,
      gateway,
      floor,
      before,
      origins: { mock: mockOrigin, gateway: gateway.url, floor: floor?.url, before: before?.url },
      dataDir,
      profileStart: async () => {
        if (o.cpuProfDir === undefined) return
        profiling = true
        await Promise.all(profiled().map(([, p]) => p.profileStart()))
      },
      profileStop,
      close: async () => {
        await profileStop('measured')
        await Promise.all(started.map((p) => p.stop()))
        if (o.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true })
        if (beforeDataDir !== undefined) rmSync(beforeDataDir, { recursive: true, force: true })
      },
    }
  } catch (err) {
    await Promise.all(started.map((p) => p.stop()))
    throw err
  }
}

/** Headers and path of a chat request; the same bytes go to every arm (the mock ignores `servicekey`). */
export function chatBody(content: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: MODEL, messages: [{ role: 'user', content }], ...extra }
}

export interface ScenarioContext {
  quick: boolean
  /** Print per-arm details (samples, percentiles, CPU per request) as they are measured. */
  verbose: boolean
  /** When set, the gateway is profiled (node --cpu-prof) and its profiles land here. */
  cpuProfDir: string | undefined
  /** `--ab DIR`: another build's dist, run as an extra gateway arm `before` where a scenario supports it. */
  abDist?: string | undefined
  /** `--stream-ramp S` / `--stream-words N`: the streams scenario's ramp (default 2 s) and reply length (default 60). */
  streams?: { rampSeconds?: number | undefined; words?: number | undefined }
  log(line: string): void
}

/** One JSON call with the bench's keys (setup and checks, not measured). Throws on a non-2xx answer. */
export async function callJson(origin: string, method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<unknown> {
  const { request } = await import('undici')
  const res = await request(`${origin}${path}`, {
    method,
    headers: { servicekey: BENCH_KEY, authorization: `Bearer ${PROVIDER_KEY}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.body.text()
  if (res.statusCode < 200 || res.statusCode > 299) throw new Error(`${method} ${path}: ${res.statusCode} ${text.slice(0, 300)}`)
  return JSON.parse(text) as unknown
}

/**
 * The body the mock received for the gateway's last request: the exact prompt recallgate built (history, retrieved
 * context), used as the direct arm's request so both arms ask the mock for the same work.
 */
export async function capturedUpstreamBody(stack: Stack): Promise<Record<string, unknown>> {
  const body = await stack.mock.lastChatBody()
  if (body === undefined) throw new Error('the mock recorded no chat request')
  return body
}
