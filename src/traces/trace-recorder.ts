/**
 * Records request traces off the request path: `record` only queues (a push), and the queue is written in one
 * transaction FLUSH_MS after its first trace, or once FLUSH_AT traces wait, after the responses have gone. Traces are
 * diagnostics: not durable (a kill -9 loses at most the queue),
 * bounded per tenant by the store (`keep`) and in memory by `maxPending` (beyond it the oldest queued are dropped
 * and counted, so a store that stalls cannot grow the process).
 */
import type { RequestTrace, TraceStore } from '../storage/interface.js'

export interface TraceRecorderOptions {
  store: TraceStore
  /** Traces kept per tenant (REQUEST_TRACES); 0 records nothing. */
  keep: number
  /** Queued traces waiting for a write; default 1,000. */
  maxPending?: number
  /** A failed write (the traces in it are lost; requests are not affected). */
  onError: (err: unknown) => void
}

/**
 * How long traces wait to be written together, and how many make a write at once. Readers flush first, so they never
 * miss one. Each write is an LMDB commit, synced to disk like every commit of the store, and a commit costs more than
 * the traces in it: at 50 ms (20 commits a second under load) the traces and their commits took 4 % of a plain
 * relayed request's CPU more than at 1 s (parallel A/B of gateway CPU per request, 32 connections; docs/benchmarks.md).
 * FLUSH_AT keeps a busy gateway's queue (≈ 2,000 requests a second) under `maxPending`, so nothing is dropped for it.
 */
const FLUSH_MS = 1_000
const FLUSH_AT = 500

export class TraceRecorder {
  readonly #o: TraceRecorderOptions
  #pending: { tenant: string; trace: RequestTrace }[] = []
  /** Where the queue starts in `#pending` (traces before it were dropped). */
  #head = 0
  /** The write FLUSH_MS after the first queued trace, while one is due. */
  #timer: NodeJS.Timeout | undefined
  #writing: Promise<void> = Promise.resolve()
  dropped = 0

  constructor(o: TraceRecorderOptions) {
    this.#o = o
  }

  get enabled(): boolean {
    return this.#o.keep > 0
  }

  /** Traces kept per tenant: what a listing returns at most (the store holds no more). */
  get keep(): number {
    return this.#o.keep
  }

  record(tenant: string, trace: RequestTrace): void {
    if (this.#o.keep <= 0) return
    this.#pending.push({ tenant, trace })
    // The oldest queued trace is skipped by moving the start, not shifted out: a shift moves the whole queue.
    if (this.#pending.length - this.#head > (this.#o.maxPending ?? 1_000)) {
      this.#head++
      this.dropped++
    }
    if (this.#pending.length - this.#head >= FLUSH_AT) {
      void this.flush()
    } else if (this.#timer === undefined) {
      // One transaction per FLUSH_MS, not per request: a commit costs more than the traces in it (bench/trace-cost.ts).
      this.#timer = setTimeout(() => void this.flush(), FLUSH_MS).unref()
    }
  }

  /** Writes what is queued; resolves when everything recorded so far is in the store (readers call it first). */
  flush(): Promise<void> {
    clearTimeout(this.#timer)
    this.#timer = undefined
    const batch = newestPerTenant(this.#head === 0 ? this.#pending : this.#pending.slice(this.#head), this.#o.keep)
    this.#pending = []
    this.#head = 0
    if (batch.length > 0) {
      this.#writing = this.#writing.then(() =>
        this.#o.store.append(batch, this.#o.keep).catch((err: unknown) => {
          // Diagnostics only: a lost batch is reported and the next one tries again.
          this.#o.onError(err)
        }),
      )
    }
    return this.#writing
  }
}

/**
 * The batch without the traces the same write would overwrite: a tenant keeps its newest `keep` traces, so of a batch
 * holding more than that for one tenant only the newest `keep` are written. A busy tenant's batch of FLUSH_AT (500)
 * against the default REQUEST_TRACES (100) wrote every ring slot five times in one transaction; at 32 connections the
 * traces' store writes were ≈ 7 % of a plain relayed request's CPU (docs/benchmarks.md, "Thirteenth round").
 */
function newestPerTenant<T extends { tenant: string }>(batch: T[], keep: number): T[] {
  if (batch.length <= keep) return batch
  const left = new Map<string, number>()
  for (const b of batch) left.set(b.tenant, (left.get(b.tenant) ?? 0) + 1)
  let over = false
  for (const n of left.values()) if (n > keep) over = true
  if (!over) return batch
  const kept: T[] = []
  for (const b of batch) {
    const n = left.get(b.tenant) as number
    left.set(b.tenant, n - 1)
    if (n <= keep) kept.push(b)
  }
  return kept
}
