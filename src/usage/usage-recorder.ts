/**
 * Records usage off the request path: `record` adds to an in-memory row per (tenant, UTC day, model) and the rows are
 * written as one batch (UsageStore.add) a short while later, after the response has gone. Many requests between two
 * writes cost one row each in the batch, not one write each. Bounded: at most `maxPending` rows wait (beyond it the
 * batch is written at once); a failed write is reported (a warning with how many rows were lost) and not retried:
 * usage is an account for the tenant, not a ledger the gateway bills from, and a retry queue would grow while the
 * store is down.
 */
import type { UsageEntry, UsageStore } from '../storage/interface.js'
import type { Ms, Tokens } from '../types.js'

export interface UsageRecorderOptions {
  store: UsageStore
  /** Epoch ms: which UTC day a request counts toward. */
  now: () => number
  /** How long rows gather before they are written; default 1,000 ms. */
  flushAfter?: Ms
  /** Rows (tenant, day, model) waiting for a write before one starts at once; default 1,000. */
  maxPending?: number
  /** A failed write (its rows are lost; requests are not affected). */
  onError: (err: unknown, lost: number) => void
}

interface Pending {
  tenant: string
  date: string
  model: string
  requests: number
  inputTokens: number
  outputTokens: number
  cachedTokens: number
}

export class UsageRecorder {
  readonly #o: UsageRecorderOptions
  #pending = new Map<string, Pending>()
  #timer: NodeJS.Timeout | undefined
  #writing: Promise<void> = Promise.resolve()

  constructor(o: UsageRecorderOptions) {
    this.#o = o
  }

  /** The UTC day last written and the epoch-ms span it covers: a `Date` and its ISO string per request showed in the relay's profile. */
  #today = { from: 0, to: 0, date: '' }

  #day(ms: number): string {
    const t = this.#today
    if (ms >= t.from && ms < t.to) return t.date
    const from = ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS)
    this.#today = { from, to: from + DAY_MS, date: utcDay(ms) }
    return this.#today.date
  }

  record(u: { tenant: string; model: string; inputTokens: Tokens; outputTokens: Tokens; cachedTokens: Tokens }): void {
    const date = this.#day(this.#o.now())
    const key = `${u.tenant}\0${date}\0${u.model}`
    let p = this.#pending.get(key)
    if (p === undefined) {
      p = { tenant: u.tenant, date, model: u.model, requests: 0, inputTokens: 0, outputTokens: 0, cachedTokens: 0 }
      this.#pending.set(key, p)
    }
    p.requests++
    p.inputTokens += u.inputTokens
    p.outputTokens += u.outputTokens
    p.cachedTokens += u.cachedTokens
    if (this.#pending.size >= (this.#o.maxPending ?? 1_000)) void this.flush()
    else if (this.#timer === undefined) {
      this.#timer = setTimeout(() => void this.flush(), this.#o.flushAfter ?? 1_000)
      // A pending write must not keep a process alive that is otherwise done: close() flushes.
      this.#timer.unref()
    }
  }

  /** Writes what is pending; resolves when everything recorded so far is in the store (readers call it first). */
  flush(): Promise<void> {
    if (this.#timer !== undefined) clearTimeout(this.#timer)
    this.#timer = undefined
    if (this.#pending.size > 0) {
      const batch: UsageEntry[] = [...this.#pending.values()]
      this.#pending = new Map()
      this.#writing = this.#writing.then(() =>
        this.#o.store.add(batch).catch((err: unknown) => {
          // Reported, not retried: a store that is down would otherwise grow the queue without bound.
          this.#o.onError(err, batch.length)
        }),
      )
    }
    return this.#writing
  }
}

const DAY_MS = 86_400_000

/** `YYYY-MM-DD` of an epoch-ms instant, in UTC. */
function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10)
}
