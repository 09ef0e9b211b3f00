/**
 * Records request traces off the request path: `record` only queues (a push), and the queue is written in one
 * transaction FLUSH_MS after its first trace, or once FLUSH_AT traces wait, after the responses have gone. Traces are
 * diagnostics: not durable (a kill -9 loses at most the queue), bounded per tenant by the store (`keep`: a queued
 * trace that `keep` newer ones of its tenant follow leaves the queue unwritten) and in memory by `maxPending` (beyond
 * it the oldest queued are dropped and counted, so a store that stalls cannot grow the process).
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
 * MAX_SLOTS bounds the queue's array, superseded places included (see `record`).
 */
const FLUSH_MS = 1_000
const FLUSH_AT = 500
const MAX_SLOTS = 4_000

interface Queued {
  tenant: string
  trace: RequestTrace
}

export class TraceRecorder {
  readonly #o: TraceRecorderOptions
  /** In the order recorded; a place is emptied when its trace is dropped or superseded. */
  #pending: (Queued | undefined)[] = []
  /** Where the queue starts in `#pending` (places before it are empty). */
  #head = 0
  /** Traces queued (places not emptied). */
  #live = 0
  /** Each tenant's places in `#pending`, oldest first, from `first`. */
  #byTenant = new Map<string, { at: number[]; first: number }>()
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

  /**
   * Queue a trace. A tenant keeps its newest `keep` traces, so a queued trace that `keep` newer ones of its tenant
   * follow would only be overwritten by the same write: it leaves the queue at once (not counted as dropped), young,
   * before the garbage collector copies it to the old generation. At 32 connections a plain relayed request's trace
   * and its write cost ≈ 12 % of its CPU when every trace waited the second for its write (≈ 6,000 queued, 500 a
   * commit, each tenant's 100-slot ring rewritten five times a commit; docs/benchmarks.md, "Thirteenth round").
   */
  record(tenant: string, trace: RequestTrace): void {
    const keep = this.#o.keep
    if (keep <= 0) return
    const place = this.#pending.push({ tenant, trace }) - 1
    this.#live++
    let mine = this.#byTenant.get(tenant)
    if (mine === undefined) this.#byTenant.set(tenant, (mine = { at: [], first: 0 }))
    mine.at.push(place)
    if (mine.at.length - mine.first > keep) this.#empty(mine.at[mine.first++] as number)
    // Past the bound the oldest queued is dropped (a store that stalls cannot grow the process); its place is emptied,
    // not shifted out: a shift moves the whole queue.
    if (this.#live > (this.#o.maxPending ?? 1_000)) {
      while (this.#pending[this.#head] === undefined) this.#head++
      this.#empty(this.#head)
      this.dropped++
    }
    if (this.#live >= FLUSH_AT || this.#pending.length >= MAX_SLOTS) {
      void this.flush()
    } else if (this.#timer === undefined) {
      // One transaction per FLUSH_MS, not per request: a commit costs more than the traces in it (bench/trace-cost.ts).
      this.#timer = setTimeout(() => void this.flush(), FLUSH_MS).unref()
    }
  }

  #empty(place: number): void {
    if (this.#pending[place] === undefined) return
    this.#pending[place] = undefined
    this.#live--
  }

  /** Writes what is queued; resolves when everything recorded so far is in the store (readers call it first). */
  flush(): Promise<void> {
    clearTimeout(this.#timer)
    this.#timer = undefined
    const batch: Queued[] = []
    for (let i = this.#head; i < this.#pending.length; i++) {
      const q = this.#pending[i]
      if (q !== undefined) batch.push(q)
    }
    this.#pending = []
    this.#head = 0
    this.#live = 0
    this.#byTenant.clear()
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
