/**
 * Service keys at rest: hash → record, in the `keys` database. Raw keys are never written. Lookups go to LMDB on
 * every request (a memory-mapped read of a few µs), so a key created, rotated, re-planned or revoked by the CLI or
 * the admin API in another process takes effect at once without any cache to invalidate.
 *
 * Records written before tenants had their own id carry no `tenant`: they are read with the id derived from their
 * hash, which is the tenant their data was stored under (a migration in place, record by record, with no rewrite).
 */
import { generateKey, hashKey, keyIdFor, newTenantId, sameHash, tenantIdFor } from '../auth/service-keys.js'
import type { Plan } from '../types.js'
import type { KeyLookupResult, KeyRecord, KeyStore } from './interface.js'
import type { Key, Store } from './store.js'

export type { KeyRecord } from './interface.js'

/** A record as stored: `tenant` is absent on records from before issue 27. */
type StoredKey = Omit<KeyRecord, 'tenant'> & { tenant?: string }

function withTenant(rec: StoredKey): KeyRecord {
  return rec.tenant === undefined ? { ...rec, tenant: tenantIdFor(rec.hash) } : (rec as KeyRecord)
}

export class KeyRepo implements KeyStore {
  readonly #store: Store
  readonly #now: () => number

  constructor(store: Store, opts: { now: () => number }) {
    this.#store = store
    this.#now = opts.now
  }

  /** Create a key for a new tenant; the raw key is returned once and never stored. */
  async create(plan: Plan, label?: string): Promise<{ key: string; record: KeyRecord }> {
    const made = this.#make({ tenant: newTenantId(), plan, ...(label ? { label } : {}) })
    await this.#store.durable(() => this.#store.keys.put(made.record.hash, made.record))
    return made
  }

  list(): KeyRecord[] {
    const out: KeyRecord[] = []
    for (const { value } of this.#store.keys.getRange()) out.push(withTenant(value as StoredKey))
    return out
  }

  get(id: string): KeyRecord | undefined {
    const found = this.#find(id)
    return found === undefined ? undefined : withTenant(found.rec)
  }

  /** Revoke by key id (`key_…`). Returns false when no active key has that id. */
  async revoke(id: string): Promise<boolean> {
    return this.#store.durable(
      () => {
        const found = this.#find(id, { active: true })
        if (found === undefined) return false
        void this.#store.keys.put(found.key, { ...found.rec, revokedAt: this.#now() })
        return true
      },
      { releasing: true },
    )
  }

  async rotate(id: string): Promise<{ key: string; record: KeyRecord } | undefined> {
    return this.#store.durable(() => {
      // Looked up inside the write transaction: two rotations of one key cannot both succeed.
      const found = this.#find(id, { active: true })
      if (found === undefined) return undefined
      const old = withTenant(found.rec)
      const made = this.#make({ tenant: old.tenant, plan: old.plan, ...(old.label ? { label: old.label } : {}) })
      void this.#store.keys.put(found.key, { ...old, revokedAt: this.#now() })
      void this.#store.keys.put(made.record.hash, made.record)
      return made
    })
  }

  async setPlan(id: string, plan: Plan): Promise<KeyRecord | undefined> {
    return this.#store.durable(() => {
      const found = this.#find(id, { active: true })
      if (found === undefined) return undefined
      const record: KeyRecord = { ...withTenant(found.rec), plan }
      void this.#store.keys.put(found.key, record)
      return record
    })
  }

  countActive(): number {
    let n = 0
    for (const { value } of this.#store.keys.getRange()) if ((value as StoredKey).revokedAt === undefined) n++
    return n
  }

  /** The tenant for a presented key hash, `'revoked'` for a revoked key, undefined for an unknown one. */
  lookup(hash: string): KeyLookupResult {
    const rec = this.#store.keys.get(hash) as StoredKey | undefined
    if (rec === undefined || !sameHash(rec.hash, hash)) return undefined
    if (rec.revokedAt !== undefined) return 'revoked'
    return { id: rec.tenant ?? tenantIdFor(rec.hash), plan: rec.plan }
  }

  #make(o: { tenant: string; plan: Plan; label?: string }): { key: string; record: KeyRecord } {
    const key = generateKey()
    const hash = hashKey(key)
    return { key, record: { id: keyIdFor(hash), hash, tenant: o.tenant, plan: o.plan, createdAt: this.#now(), ...(o.label ? { label: o.label } : {}) } }
  }

  /** The record with this id (a scan: keys are few, and these are operator actions, never per request). */
  #find(id: string, o: { active?: boolean } = {}): { key: Key; rec: StoredKey } | undefined {
    for (const { key, value } of this.#store.keys.getRange()) {
      const rec = value as StoredKey
      if (rec.id === id && (o.active !== true || rec.revokedAt === undefined)) return { key, rec }
    }
    return undefined
  }
}
