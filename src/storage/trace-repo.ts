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
 * Traces a tenant may gain beyond `keep` before its oldest are cut. Pruning on every append walked the tenant's newest
 * `keep` keys each time, which cost more than the trace itself (bench/trace-cost.ts: 70–130 µs a request); now each
 * tenant's count is kept in memory (read once from LMDB) and, once it overshoots by this much, only the excess is
 * removed, from the oldest end.
 */
const PRUNE_SLACK = 32

export class TraceRepo implements TraceStore {
  readonly #store: Store
  /**
   * Each tenant's trace count as this process knows it (bounded by the tenants it served). Other processes sharing
   * DATA_DIR (`--workers`) prune their own view, so a tenant's range stays bounded by workers × (keep + slack).
   */
  readonly #counts = new Map<string, number>()

  constructor(store: Store) {
    this.#store = store
  }

  async append(traces: readonly { tenant: string; trace: RequestTrace }[], keep: number): Promise<void> {
    const db = this.#store.traces
    await this.#store.transaction(() => {
      for (const { tenant, trace } of traces) {
        db.put([tenant, trace.createdAt, trace.id], trace)
        let n = (this.#counts.get(tenant) ?? db.getCount({ start: [tenant], end: [tenant, HIGH] })) + 1
        if (n > keep + PRUNE_SLACK) {
          for (const key of db.getKeys({ start: [tenant], end: [tenant, HIGH], limit: n - keep })) db.remove(key)
          n = keep
        }
        this.#counts.set(tenant, n)
      }
      if (this.#counts.size > 100_000) this.#counts.clear()
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
      // Counted again on the next append.
      this.#counts.delete(tenant)
      return n
    })
  }
}

/** A record read back: one without the fields the readers rely on is skipped (a trace is diagnostics, not state). */
function asTrace(v: unknown): RequestTrace | undefined {
  const t = v as Partial<RequestTrace> | null | undefined
  if (t === null || typeof t !== 'object' || typeof t.id !== 'string' || typeof t.messagesJson !== 'string') return undefined
  return t as RequestTrace
}
