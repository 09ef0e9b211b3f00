/**
 * The gateway as a real child process (`recallgate serve`), for what only a separate process can show: kill -9 and
 * SIGTERM. Configured through the environment like production.
 *
 * Which entry point: CI runs `npm ci` (whose `prepare` builds dist/) right before `npm test`, so there the compiled
 * `dist/src/cli.js` is fresh and starts in ~0.8 s. In a working copy dist/ is often older than src/, and a stale
 * build would test yesterday's code, so when any src/ file is newer than dist/src/cli.js (or dist is missing) the
 * child runs src/cli.ts through tap's own TypeScript loader instead (`--import @tapjs/typescript/import`,
 * transpile-only: ~3 s to start, same code). Both run under `process.execPath`, so a signal reaches the gateway
 * itself, not a wrapper. RECALLGATE_CHILD=dist|source forces one.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

export interface ChildGateway {
  readonly url: string
  readonly proc: ChildProcess
  /** Everything written so far (JSON log lines on stdout; the bootstrap key line and crashes on stderr). */
  stdout(): string
  stderr(): string
  /** Resolves with how the process ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** SIGKILL if still running, and wait for the exit (for teardown). */
  stop(): Promise<void>
}

export type EntryPoint = 'dist' | 'source'

function newestMtime(dir: string): number {
  let newest = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) newest = Math.max(newest, newestMtime(p))
    else if (e.name.endsWith('.ts')) newest = Math.max(newest, statSync(p).mtimeMs)
  }
  return newest
}

/** dist when it is at least as new as every source file, else the TypeScript source. */
export function entryPoint(): EntryPoint {
  const forced = process.env.RECALLGATE_CHILD
  if (forced === 'dist' || forced === 'source') return forced
  let built: number
  try {
    built = statSync(join(ROOT, 'dist/src/cli.js')).mtimeMs
  } catch {
    return 'source'
  }
  return built >= newestMtime(join(ROOT, 'src')) ? 'dist' : 'source'
}

function command(entry: EntryPoint): { args: string[]; env: Record<string, string> } {
  if (entry === 'dist') return { args: [join(ROOT, 'dist/src/cli.js'), 'serve'], env: {} }
  return {
    args: ['--import', '@tapjs/typescript/import', join(ROOT, 'src/cli.ts'), 'serve'],
    env: { TS_NODE_TRANSPILE_ONLY: '1', TS_NODE_PROJECT: join(ROOT, 'tsconfig.json') },
  }
}

const DEFAULT_READY_TIMEOUT_MS = 120_000

/**
 * Start `recallgate serve` with `env` (PORT is 0 unless given) and resolve once it logs the address it listens on.
 * Rejects with its output if it exits first or is not listening within `readyTimeoutMs` (default 120 s: a bound for a
 * loaded machine, where a start from source has taken over 30 s, not a timing assertion).
 */
export async function spawnGateway(
  env: Record<string, string>,
  opts: { readyTimeoutMs?: number; args?: string[] } = {},
): Promise<ChildGateway> {
  const readyTimeoutMs = opts.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS
  const { args, env: loaderEnv } = command(entryPoint())
  const proc = spawn(process.execPath, [...args, ...(opts.args ?? [])], {
    cwd: ROOT,
    env: { ...process.env, ...loaderEnv, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  proc.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d))
  proc.stderr?.setEncoding('utf8').on('data', (d: string) => (err += d))
  const exited = once(proc, 'exit').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }))

  const url = await new Promise<string>((resolve, reject) => {
    let settled = false
    const timer = setTimeout(() => fail(new Error(`gateway not listening after ${readyTimeoutMs} ms`)), readyTimeoutMs)
    const onData = (): void => {
      for (const line of out.split('\n')) {
        if (!line.includes('recallgate listening')) continue
        const found = (JSON.parse(line) as { url?: unknown }).url
        if (typeof found === 'string') {
          settled = true
          clearTimeout(timer)
          proc.stdout?.off('data', onData)
          resolve(found)
          return
        }
      }
    }
    const fail = (e: Error): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      proc.kill('SIGKILL')
      reject(new Error(`${e.message}\nstdout: ${out.slice(-2000)}\nstderr: ${err.slice(-2000)}`))
    }
    proc.stdout?.on('data', onData)
    void exited.then((e) => fail(new Error(`gateway exited before listening (code ${e.code}, signal ${e.signal})`)))
  })

  return {
    url,
    proc,
    stdout: () => out,
    stderr: () => err,
    exited,
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL')
      await exited
    },
  }
}
