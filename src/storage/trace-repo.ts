/**
 * Request traces in LMDB, a ring per tenant: [tenant, slot] → the trace as a positional tuple (`encode`), slot =
 * sequence number mod REQUEST_TRACES, and the tenant's next sequence number and ring size under ['traces', tenant] in
 * the meta database. An append overwrites the oldest trace in place: one put per trace and no delete, where cutting the
 * oldest from a growing range cost a key walk and a delete per trace (bench/trace-cost.ts). The head is read inside the
 * write transaction, so processes sharing DATA_DIR (`--workers`) take turns on one ring and the bound holds for all of
 * them together. A tenant's ring holds at most `keep` traces, so listing (sorted by sequence), lookups by id and
 * deletes by session read that small range.
 */
import type { RequestTrace, TraceStore } from './interface.js'
import type { Store } from './store.js'

/** Above any first byte ordered-binary writes for a string or number, so [tenant, HIGH] ends a tenant's range. */
const HIGH = Uint8Array.of(0xff)

interface RingHead {
  /** The sequence number the next trace gets. */
  next: number
  /** The ring's slots (the REQUEST_TRACES it was written with). */
  size: number
}

interface Stored {
  seq: number
  trace: RequestTrace
}

export class TraceRepo implements TraceStore {
  readonly #store: Store

  constructor(store: Store) {
    this.#store = store
  }

  async append(traces: readonly { tenant: string; trace: RequestTrace }[], keep: number): Promise<void> {
    if (keep <= 0 || traces.length === 0) return
    const db = this.#store.traces
    await this.#store.transaction(() => {
      const heads = new Map<string, RingHead>()
      for (const { tenant, trace } of traces) {
        let head = heads.get(tenant)
        if (head === undefined) heads.set(tenant, (head = this.#head(tenant, keep)))
        db.put([tenant, head.next % keep], encode(head.next, trace))
        head.next++
      }
      for (const [tenant, head] of heads) this.#store.meta.put(['traces', tenant], head)
    })
  }

  /**
   * The tenant's ring head, in the write transaction. A ring written with another REQUEST_TRACES is laid out again
   * (the newest `keep` kept), and so are traces an earlier version stored under [tenant, createdAt, id].
   */
  #head(tenant: string, keep: number): RingHead {
    const stored: unknown = this.#store.meta.get(['traces', tenant])
    const head = isHead(stored) ? stored : undefined
    if (head?.size === keep) return head
    const kept = this.#read(tenant).slice(0, keep)
    for (const key of this.#store.traces.getKeys({ start: [tenant], end: [tenant, HIGH] })) this.#store.traces.remove(key)
    // The kept traces take the numbers just below the head's (from 0 when there was no head).
    let next = (head?.next ?? kept.length) - kept.length
    for (const { trace } of kept.reverse()) {
      this.#store.traces.put([tenant, next % keep], encode(next, trace))
      next++
    }
    return { next, size: keep }
  }

  /** The tenant's traces, newest first: by sequence number, and those of earlier versions (no number) after, by time. */
  #read(tenant: string): Stored[] {
    const out: Stored[] = []
    for (const { value } of this.#store.traces.getRange({ start: [tenant], end: [tenant, HIGH] })) {
      const s = asStored(value)
      if (s !== undefined) out.push(s)
    }
    return out.sort((a, b) => b.seq - a.seq || b.trace.createdAt - a.trace.createdAt)
  }

  list(tenant: string, limit: number): RequestTrace[] {
    return this.#read(tenant)
      .slice(0, limit)
      .map((s) => s.trace)
  }

  get(tenant: string, id: string): RequestTrace | undefined {
    for (const { value } of this.#store.traces.getRange({ start: [tenant], end: [tenant, HIGH] })) {
      const s = asStored(value)
      if (s?.trace.id === id) return s.trace
    }
    return undefined
  }

  async deleteSession(tenant: string, sessionId: string): Promise<number> {
    const db = this.#store.traces
    return this.#store.transaction(() => {
      let n = 0
      for (const { key, value } of db.getRange({ start: [tenant], end: [tenant, HIGH] })) {
        if (asStored(value)?.trace.sessionId === sessionId) {
          db.remove(key)
          n++
        }
      }
      return n
    })
  }
}

/**
 * The stored value: the trace's fields in a fixed order behind a format number. msgpack writes an object's keys into
 * every value; a tuple of the same fields packs in about half the CPU (bench/trace-cost.ts: the map was most of what
 * a traced request cost). Format 1 is this order; a new field goes at the end with a new format number.
 */
const FORMAT = 1

function encode(seq: number, t: RequestTrace): Tuple {
  return [
    FORMAT,
    seq,
    t.id,
    t.createdAt,
    t.route,
    t.model,
    t.stream,
    t.status,
    t.durationMs,
    t.promptTokens,
    t.completionTokens,
    t.cachedTokens,
    t.error === null ? null : [t.error.code, t.error.message],
    t.messagesJson,
    t.messageTokens,
    [t.parts.system, t.parts.history, t.parts.recall, t.parts.excerpts],
    t.sources.map((s) => [s.file_id, s.filename, s.chunk_index, s.score]),
    t.recalledMessages,
    [t.leftOut.historyMessages, t.leftOut.chunks, t.leftOut.retrievalReason],
    t.totalTokens,
    t.window,
    t.sessionId,
  ]
}

/** Every tenant's traces as stored, decoded (`recallgate migrate --from-lmdb`); values no format reads are skipped. */
export function* storedTraces(store: Store): Iterable<{ tenant: string; trace: RequestTrace }> {
  for (const { key, value } of store.traces.getRange()) {
    const s = asStored(value)
    if (s !== undefined && Array.isArray(key) && typeof key[0] === 'string') yield { tenant: key[0], trace: s.trace }
  }
}

/** What `encode` writes, as read back. */
type Tuple = [
  format: typeof FORMAT,
  seq: number,
  id: string,
  createdAt: number,
  route: string,
  model: string,
  stream: boolean,
  status: number,
  durationMs: number,
  promptTokens: number | null,
  completionTokens: number | null,
  cachedTokens: number | null,
  error: [string, string] | null,
  messagesJson: string,
  messageTokens: readonly number[],
  parts: [number, number, number, number],
  sources: [string, string, number, number][],
  recalledMessages: number,
  leftOut: [number, number, string | null],
  totalTokens: number,
  window: number,
  sessionId: string | null,
]

/** The format and the fields readers key on; the rest is as this version wrote it. */
const isTuple = (v: unknown[]): v is Tuple =>
  v[0] === FORMAT && v.length === 22 && typeof v[1] === 'number' && typeof v[2] === 'string' && typeof v[13] === 'string'

/** A record as earlier versions stored it, the trace itself. */
const isRecord = (v: unknown): v is RequestTrace =>
  typeof v === 'object' && v !== null && 'id' in v && typeof v.id === 'string' && 'messagesJson' in v && typeof v.messagesJson === 'string'

const isHead = (v: unknown): v is RingHead =>
  typeof v === 'object' && v !== null && 'next' in v && typeof v.next === 'number' && 'size' in v && typeof v.size === 'number'

/**
 * A value read back: a tuple of a known format, or a whole record as earlier versions wrote it (sequence -1: older
 * than any numbered one). Anything else (a format from a newer version, a damaged value) is skipped: a trace is
 * diagnostics, not state.
 */
function asStored(v: unknown): Stored | undefined {
  if (Array.isArray(v)) return isTuple(v) ? { seq: v[1], trace: decode(v) } : undefined
  return isRecord(v) ? { seq: -1, trace: v } : undefined
}

function decode(v: Tuple): RequestTrace {
  const [, , id, createdAt, route, model, stream, status, durationMs, promptTokens, completionTokens, cachedTokens, error, ...rest] = v
  const [messagesJson, messageTokens, parts, sources, recalledMessages, leftOut, totalTokens, window, sessionId] = rest
  return {
    id,
    createdAt,
    route,
    model,
    stream,
    status,
    durationMs,
    promptTokens,
    completionTokens,
    cachedTokens,
    error: error === null ? null : { code: error[0], message: error[1] },
    messagesJson,
    messageTokens,
    parts: { system: parts[0], history: parts[1], recall: parts[2], excerpts: parts[3] },
    sources: sources.map(([file_id, filename, chunk_index, score]) => ({ file_id, filename, chunk_index, score })),
    recalledMessages,
    leftOut: { historyMessages: leftOut[0], chunks: leftOut[1], retrievalReason: leftOut[2] },
    totalTokens,
    window,
    sessionId,
  }
}
