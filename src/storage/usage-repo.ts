/**
 * Usage in LMDB: [tenant, date, model] → { requests, inputTokens, outputTokens, cachedTokens }. Dates are
 * `YYYY-MM-DD`, which sort as strings in date order, so a tenant's range is one ordered scan.
 */
import type { UsageEntry, UsageRow, UsageStore } from './interface.js'
import type { Store } from './store.js'

const HIGH = Uint8Array.of(0xff)

interface Counts {
  requests: number
  inputTokens: number
  outputTokens: number
  cachedTokens: number
}

export class UsageRepo implements UsageStore {
  readonly #store: Store

  constructor(store: Store) {
    this.#store = store
  }

  async add(entries: readonly UsageEntry[]): Promise<void> {
    if (entries.length === 0) return
    const db = this.#store.usage
    await this.#store.durable(() => {
      for (const e of entries) {
        const key = [e.tenant, e.date, e.model]
        const was = asCounts(db.get(key)) ?? { requests: 0, inputTokens: 0, outputTokens: 0, cachedTokens: 0 }
        db.put(key, {
          requests: was.requests + e.requests,
          inputTokens: was.inputTokens + e.inputTokens,
          outputTokens: was.outputTokens + e.outputTokens,
          cachedTokens: was.cachedTokens + e.cachedTokens,
        })
      }
    })
  }

  list(tenant: string, range: { from?: string; to?: string }): UsageRow[] {
    const out: UsageRow[] = []
    const start = range.from === undefined ? [tenant] : [tenant, range.from]
    const end = range.to === undefined ? [tenant, HIGH] : [tenant, range.to, HIGH]
    for (const { key, value } of this.#store.usage.getRange({ start, end })) {
      const [, date, model] = key as [string, string, string]
      const c = asCounts(value)
      if (c !== undefined) out.push({ date, model, ...c })
    }
    return out
  }
}

function asCounts(v: unknown): Counts | undefined {
  if (v === undefined) return undefined
  const c = v as Partial<Counts> | null
  if (c === null || typeof c !== 'object' || typeof c.requests !== 'number') throw new Error('corrupt usage record')
  return { requests: c.requests, inputTokens: c.inputTokens ?? 0, outputTokens: c.outputTokens ?? 0, cachedTokens: c.cachedTokens ?? 0 }
}
