/**
 * `recallgate serve --workers N`: the node:cluster primary. It forks N gateway processes that share one listening
 * port (the primary accepts and hands connections round-robin), restarts a worker that dies, and on SIGTERM/SIGINT
 * asks every worker to drain and exits once they have.
 *
 * What is shared between workers and what is not (docs/scaling.md): rate limits go through Redis (WORKERS > 1
 * requires REDIS_URL); LMDB is multi-process safe, and every in-process cache of it (session history, the BM25 and
 * HNSW indexes, recall's line counts) checks the committed record or namespace version before it answers, so a
 * write through one worker is seen by the next request on any other.
 *
 * The primary does no request work and holds no store open while workers run; it creates the first service key (if
 * there is none) before forking, so that N workers do not race to create N of them.
 */
import cluster, { type Worker } from 'node:cluster'
import { once } from 'node:events'
import type { Ms } from './types.js'

export interface SupervisorOptions {
  workers: number
  /** Environment added for the workers (e.g. WORKERS given as a flag). */
  env?: Record<string, string>
  /** A worker that exits within this long of its start counts as a crash loop. */
  minUptime?: Ms
  /** Consecutive fast exits after which the primary gives up (exit 1) instead of restarting forever. */
  maxFastExits?: number
  log: (level: 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => void
  /** Longest the primary waits for workers to drain after SIGTERM before killing them. */
  shutdownGrace: Ms
}

/** Runs in the primary until shutdown; resolves with the exit code the primary should end with. */
export async function superviseWorkers(o: SupervisorOptions): Promise<number> {
  const minUptime = o.minUptime ?? 5_000
  const maxFastExits = o.maxFastExits ?? 5
  let stopping = false
  let fastExits = 0
  const started = new Map<Worker, number>()

  const fork = (): void => {
    const w = cluster.fork(o.env ?? {})
    started.set(w, Date.now())
  }

  let resolveDone: (code: number) => void = () => undefined
  const done = new Promise<number>((resolve) => (resolveDone = resolve))

  cluster.on('exit', (w, code, signal) => {
    const uptime = Date.now() - (started.get(w) ?? 0)
    started.delete(w)
    if (stopping) {
      if (started.size === 0) resolveDone(0)
      return
    }
    o.log('warn', 'worker exited; starting another', { pid: w.process.pid, code, signal, uptimeMs: uptime })
    fastExits = uptime < minUptime ? fastExits + 1 : 0
    if (fastExits >= maxFastExits) {
      // A worker that cannot stay up (bad config, port taken, store unreadable) would otherwise be forked forever.
      o.log('error', `workers keep exiting within ${minUptime} ms of starting; giving up`, { exits: fastExits })
      void stopAll().then(() => resolveDone(1))
      return
    }
    // Back off a little on repeated fast exits, so a crash loop does not burn a core.
    setTimeout(fork, fastExits * 200).unref()
  })

  const stopAll = async (): Promise<void> => {
    stopping = true
    const workers = [...started.keys()]
    for (const w of workers) w.process.kill('SIGTERM')
    const timer = setTimeout(() => {
      for (const w of started.keys()) w.process.kill('SIGKILL')
    }, o.shutdownGrace + 2_000)
    await Promise.all(workers.filter((w) => !w.isDead()).map((w) => once(w, 'exit')))
    clearTimeout(timer)
  }

  const stop = (signal: string): void => {
    if (stopping) return
    o.log('info', 'shutting down workers', { signal })
    void stopAll().then(() => resolveDone(0))
  }
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))

  for (let i = 0; i < o.workers; i++) fork()
  // No `pid` field: the logger already puts the process's pid on every line (one `pid`, the primary's).
  o.log('info', 'recallgate primary started', { workers: o.workers })
  return done
}

export function isClusterWorker(): boolean {
  return cluster.isWorker
}
