/**
 * `/metrics` under `serve --workers N`: summed across the workers, whichever one answers the scrape (issue 27). A
 * scrape reaches one worker (node:cluster hands connections round-robin), so that worker asks the primary, and the
 * primary collects every worker's registry as JSON with prom-client's AggregatorRegistry (over the cluster's IPC
 * channel) and returns the text to it. Counters and histograms are summed; each gauge says how it combines (its
 * `aggregator`: the store gauges read one shared DATA_DIR, so they take the max, not N times the value).
 *
 * The workers' series are not labelled by worker: a worker that is replaced starts from zero, which Prometheus' rate()
 * reads as a counter reset of the sum — the same as a restart of a single process. Per-process detail (memory, event
 * loop) is in the process_* and nodejs_* series, aggregated the way prom-client declares for each.
 */
import cluster, { type Worker } from 'node:cluster'
import { AggregatorRegistry, type Registry } from 'prom-client'
import type { Ms } from './types.js'

const ASK = 'recallgate:metrics?'
const ANSWER = 'recallgate:metrics!'

interface Ask {
  type: typeof ASK
  id: number
}
interface Answer {
  type: typeof ANSWER
  id: number
  body?: string
  error?: string
}

/**
 * In the primary: answer the workers' requests for the whole cluster's metrics. prom-client's own wait for the
 * workers is bounded (5 s); a worker that does not answer fails that scrape, not the next.
 */
export function serveClusterMetrics(): void {
  const aggregator = new AggregatorRegistry()
  cluster.on('message', (worker: Worker, message: unknown) => {
    if (!isMessage<Ask>(message, ASK)) return
    aggregator.clusterMetrics().then(
      (body) => send(worker, { type: ANSWER, id: message.id, body }),
      (err: unknown) => send(worker, { type: ANSWER, id: message.id, error: (err as Error).message }),
    )
  })
}

/**
 * In a worker, as early as it starts: answers the primary's collection (with no metrics until `clusterRender` names the
 * gateway's registry), so a scrape while a worker is still starting is not held up by it.
 */
export function joinClusterMetrics(): void {
  void new AggregatorRegistry()
}

/**
 * In a worker: the gateway's registry is the one this worker contributes, and `render` answers a scrape with the
 * cluster's sum. At most `maxPending` scrapes wait at once (each for at most `timeout`): scrapes are rare, and a
 * flood of them must not pile up in memory.
 */
export function clusterRender(registry: Registry, o: { timeout?: Ms; maxPending?: number } = {}): () => Promise<{ contentType: string; body: string }> {
  AggregatorRegistry.setRegistries([registry])
  joinClusterMetrics()
  const timeout = o.timeout ?? 10_000
  const maxPending = o.maxPending ?? 16
  const pending = new Map<number, (a: Answer) => void>()
  let next = 0
  process.on('message', (message: unknown) => {
    if (isMessage<Answer>(message, ANSWER)) pending.get(message.id)?.(message)
  })
  return () =>
    new Promise((resolve, reject) => {
      if (pending.size >= maxPending) return reject(new Error(`${maxPending} scrapes are already waiting for the primary`))
      const id = next++
      const timer = setTimeout(() => settle({ type: ANSWER, id, error: `the primary did not answer within ${timeout} ms` }), timeout)
      const settle = (a: Answer): void => {
        clearTimeout(timer)
        pending.delete(id)
        if (a.body !== undefined) resolve({ contentType: registry.contentType, body: a.body })
        else reject(new Error(`could not collect the workers' metrics: ${a.error ?? 'no answer'}`))
      }
      pending.set(id, settle)
      process.send?.({ type: ASK, id } satisfies Ask)
    })
}

function isMessage<T extends { type: string }>(m: unknown, type: T['type']): m is T {
  return typeof m === 'object' && m !== null && (m as { type?: unknown }).type === type && typeof (m as { id?: unknown }).id === 'number'
}

function send(worker: Worker, a: Answer): void {
  // A worker that exited meanwhile has no one waiting for the answer.
  if (worker.isConnected()) worker.send(a)
}
