/**
 * Service keys at rest: hash → record, in the `keys` database. Raw keys are never written. Lookups go to LMDB on
 * every request (a memory-mapped read of a few µs), so a key created or revoked by the CLI in another process takes
 * effect at once without any cache to invalidate.
 */
import { generateKey, hashKey, keyIdFor, sameHash, tenantIdFor } from '../auth/service-keys.js'
import type { Plan, Tenant } from '../types.js'
import type { KeyRecord, KeyStore } from './interface.js'
import type { Store } from './store.js'

export type { KeyRecord } from './interface.js'

export class KeyRepo implements KeyStore {
  readonly #store: Store
  readonly #now: () => number

  constructor(store: Store, opts: { now: () => number }) {
    this.#store = store
    this.#now = opts.now
  }

  /** Create a key; the raw key is returned once and never stored. */
  async create(plan: Plan, label?: string): Promise<{ key: string; record: KeyRecord }> {
    const key = generateKey()
    const hash = hashKey(key)
    const record: KeyRecord = { id: keyIdFor(hash), hash, plan, createdAt: this.#now(), ...(label ? { label } : {}) }
    await this.#store.durable(() => this.#store.keys.put(hash, record))
    return { key, record }
  }

  list(): KeyRecord[] {
    const out: KeyRecord[] = []
    for (const { value } of this.#store.keys.getRange()) out.push(value as KeyRecord)
    return out
  }

  /** Revoke by key id (`key_…`). Returns false when no active key has that id. */
  async revoke(id: string): Promise<boolean> {
    for (const { key, value } of this.#store.keys.getRange()) {
      const rec = value as KeyRecord
      if (rec.id === id && rec.revokedAt === undefined) {
        await this.#store.durable(() => this.#store.keys.put(key, { ...rec, revokedAt: this.#now() }), { releasing: true })
        return true
      }
    }
    return false
  }

  countActive(): number {
    let n = 0
    for (const { value } of this.#store.keys.getRange()) if ((value as KeyRecord).revokedAt === undefined) n++
    return n
  }

  /** The tenant for a presented key hash, if an active stored key has it. */
  lookup(hash: string): Tenant | undefined {
    const rec = this.#store.keys.get(hash) as KeyRecord | undefined
    if (rec === undefined || rec.revokedAt !== undefined || !sameHash(rec.hash, hash)) return undefined
    return { id: tenantIdFor(rec.hash), plan: rec.plan }
  }
}
