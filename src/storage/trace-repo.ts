/**
 * Request traces in LMDB: [tenant, createdAt, requestId] → RequestTrace, so a tenant's range reads newest first
 * with `reverse` and the oldest beyond the bound are cut from the start of the range. A tenant holds at most
 * REQUEST_TRACES of them (default 100), so lookups by id and deletes by session scan that small range.
 */
import type { RequestTrace, TraceStore } from './interface.js'
import type { Store } from './store.js'

/** Above any first byte ordered-binary writes for a string or number, so [tenant, HIGH] ends a tenant's range. */
const HIGH = Uint8Array.of(0xff)

export class TraceRepo implements TraceStore {
  readonly #store: Store

  constructor(store: Store) {
    this.#store = store
  }

  async append(traces: readonly { tenant: string; trace: RequestTrace }[], keep: number): Promise<void> {
    const db = this.#store.traces
    await this.#store.transaction(() => {
      const tenants = new Set<string>()
      for (const { tenant, trace } of traces) {
        db.put([tenant, trace.createdAt, trace.id], trace)
        tenants.add(tenant)
      }
      for (const tenant of tenants) {
        // Newest first; everything past the newest `keep` goes.
        for (const key of db.getKeys({ start: [tenant, HIGH], end: [tenant], reverse: true, offset: keep })) db.remove(key)
      }
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
