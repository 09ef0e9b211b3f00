/**
 * Request traces in LMDB: [tenant, createdAt, requestId] → RequestTrace, so a tenant's range reads newest first
 * with `reverse` and the oldest beyond the bound are cut from the start of the range. A tenant holds at most
 * REQUEST_TRACES of them (default 100; reads return that many, the range may briefly hold PRUNE_SLACK more), so
 * lookups by id and deletes by session scan that small range.
 */
import type { RequestTrace, TraceStore } from './interface.js'
import type { Store } from './store.js'

/** Above any first byte ordered-binary writes for a string or number, so [tenant, HIGH] ends a tenant's range. */
const HIGH = Uint8Array.of(0xff)

/**
 * Traces a tenant may gain beyond `keep` before its range is pruned. Pruning walks the tenant's newest `keep` keys, so
 * doing it on every append cost more than the trace itself (bench/trace-cost.ts: 130 µs a request pruning on every
 * batch); letting the range overshoot by this much and then cutting it back amortises the walk.
 */
const PRUNE_SLACK = 32

export class TraceRepo implements TraceStore {
  readonly #store: Store
  /** Traces appended per tenant since its last prune (this process's appends; bounded by the tenants it served). */
  readonly #sincePrune = new Map<string, number>()

  constructor(store: Store) {
    this.#store = store
  }

  async append(traces: readonly { tenant: string; trace: RequestTrace }[], keep: number): Promise<void> {
    const db = this.#store.traces
    await this.#store.transaction(() => {
      const due = new Set<string>()
      for (const { tenant, trace } of traces) {
        db.put([tenant, trace.createdAt, trace.id], trace)
        // A tenant not seen since this process started is pruned on its first append (others may have written).
        const n = (this.#sincePrune.get(tenant) ?? PRUNE_SLACK) + 1
        this.#sincePrune.set(tenant, n)
        if (n >= PRUNE_SLACK) due.add(tenant)
      }
      for (const tenant of due) {
        // Newest first; everything past the newest `keep` goes.
        for (const key of db.getKeys({ start: [tenant, HIGH], end: [tenant], reverse: true, offset: keep })) db.remove(key)
        this.#sincePrune.set(tenant, 0)
      }
      if (this.#sincePrune.size > 100_000) this.#sincePrune.clear()
    })
  }

  list(tenant: string, limit: number): RequestTrace[] {
    const out: RequestTrace[] = []
    for (const { value } of this.#store.traces.getRange({ start: [tenant, HIGH], end: [tenant], reverse: true, limit })) {
      const t = asTrace(value)
      if (t !== undefined) out.push(t)
    }
    return out
  }

  get(tenant: string, id: string): RequestTrace | undefined {
    for (const { value } of this.#store.traces.getRange({ start: [tenant], end: [tenant, HIGH] })) {
      const t = asTrace(value)
      if (t?.id === id) return t
    }
    return undefined
  }

  async deleteSession(tenant: string, sessionId: string): Promise<number> {
    const db = this.#store.traces
    return this.#store.transaction(() => {
      let n = 0
      for (const { key, value } of db.getRange({ start: [tenant], end: [tenant, HIGH] })) {
        if (asTrace(value)?.sessionId === sessionId) {
          db.remove(key)
          n++
        }
      }
      return n
    })
  }
}

/** A record read back: one without the fields the readers rely on is skipped (a trace is diagnostics, not state). */
function asTrace(v: unknown): RequestTrace | undefined {
  const t = v as Partial<RequestTrace> | null | undefined
  if (t === null || typeof t !== 'object' || typeof t.id !== 'string' || !Array.isArray(t.messages)) return undefined
  return t as RequestTrace
}
