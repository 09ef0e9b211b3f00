/**
 * Service keys in PostgreSQL (`keys`: hash → id, tenant, plan, label, created_at, revoked_at), hashes only.
 *
 * `lookup` runs on every request before anything else and is synchronous (the store contract), so it answers from a
 * per-process cache of the active keys' hashes → tenant:
 * - loaded whole at start (`load`), and again every `ttl` (default 5 s) in the background, so a key revoked, rotated
 *   or moved to another plan through another replica (or the CLI, or the admin API) is seen here within the TTL; one
 *   changed through this process is seen at once;
 * - a hash the cache does not know is looked up once in the database (`lookupMiss`, awaited by the authenticator), so
 *   a key created on another replica works here on its very first request; unknown and revoked hashes are remembered
 *   as such for the TTL, so a client repeating a bad key costs one query per TTL, not one per request.
 * Bounds: at most `maxKeys` active keys are cached from the reload (newest first), `maxKeys` more found by misses, and
 * `maxKeys` unknown or revoked hashes; at most `maxMissQueries` miss queries run at once (beyond them a miss is
 * answered from the cache alone, i.e. refused), so a flood of random keys cannot queue work on the database.
 * While the database is away the cache keeps answering as it last knew (revocations then wait for it to come back).
 *
 * `tenant` is null on rows written before migration 5 by a replica that did not know the column yet (a rolling
 * upgrade); those are read with the tenant derived from their hash, as migration 5 filled in for the rows it found.
 */
import { LRUCache } from 'lru-cache'
import { generateKey, hashKey, keyIdFor, newTenantId, tenantIdFor } from '../../auth/service-keys.js'
import { PLANS, type Ms, type Plan, type Tenant } from '../../types.js'
import type { KeyLookupResult, KeyRecord, KeyStore } from '../interface.js'
import { ms, type Pg, type Row } from './pool.js'

export interface PgKeyStoreOptions {
  now: () => number
  /** How long a cached answer may be stale (a change elsewhere takes this long at most to reach this process). */
  ttl?: Ms
  maxKeys?: number
  maxMissQueries?: number
  /** Told when the background reload fails (the cache keeps its last state). */
  onReloadError?: (err: unknown) => void
}

interface KeyRow extends Row {
  hash: string
  id: string
  tenant: string | null
  plan: string
  label: string | null
  created_at: string
  revoked_at: string | null
}

const INSERT = 'INSERT INTO keys (hash, id, tenant, plan, label, created_at) VALUES ($1, $2, $3, $4, $5, $6)'
const insertValues = (r: KeyRecord): unknown[] => [r.hash, r.id, r.tenant, r.plan, r.label ?? null, r.createdAt]

export class PgKeyStore implements KeyStore {
  readonly #pg: Pg
  readonly #now: () => number
  readonly #ttl: Ms
  readonly #maxKeys: number
  readonly #maxMissQueries: number
  readonly #onReloadError: (err: unknown) => void
  /** The last reload's active keys. Replaced whole by each reload. */
  #active = new Map<string, Tenant>()
  /** Active keys found by a miss or changed here since the last reload. */
  readonly #found: LRUCache<string, Tenant>
  /** Hashes the database did not know, or knew as revoked, for the TTL. */
  readonly #unknown: LRUCache<string, 'unknown' | 'revoked'>
  readonly #pending = new Map<string, Promise<KeyLookupResult>>()
  #timer: NodeJS.Timeout | undefined

  constructor(pg: Pg, opts: PgKeyStoreOptions) {
    this.#pg = pg
    this.#now = opts.now
    this.#ttl = opts.ttl ?? 5_000
    this.#maxKeys = opts.maxKeys ?? 100_000
    this.#maxMissQueries = opts.maxMissQueries ?? 8
    this.#onReloadError = opts.onReloadError ?? (() => {})
    this.#found = new LRUCache({ max: this.#maxKeys })
    this.#unknown = new LRUCache({ max: this.#maxKeys, ttl: this.#ttl })
  }

  /** Load the active keys and keep reloading them every TTL until `close`. */
  async start(): Promise<void> {
    await this.reload()
    this.#timer = setInterval(() => {
      this.reload().catch((err: unknown) => this.#onReloadError(err))
    }, this.#ttl)
    // The reload timer alone must not keep the process alive.
    this.#timer.unref()
  }

  stop(): void {
    clearInterval(this.#timer)
    this.#timer = undefined
  }

  /** Replace the cache with the database's active keys (newest first, at most maxKeys). */
  async reload(): Promise<void> {
    const rows = await this.#pg.query<KeyRow>(
      'keys_reload',
      'SELECT hash, tenant, plan FROM keys WHERE revoked_at IS NULL ORDER BY created_at DESC LIMIT $1',
      [this.#maxKeys],
    )
    const next = new Map<string, Tenant>()
    for (const r of rows) {
      const plan = asPlan(r.plan)
      if (plan !== undefined) next.set(r.hash, { id: tenantOf(r), plan })
    }
    this.#active = next
    this.#found.clear()
    this.#unknown.clear()
  }

  async create(plan: Plan, label?: string): Promise<{ key: string; record: KeyRecord }> {
    const made = this.#make({ tenant: newTenantId(), plan, ...(label ? { label } : {}) })
    await this.#pg.query('key_create', INSERT, insertValues(made.record))
    this.#cacheActive(made.record)
    return made
  }

  async list(): Promise<KeyRecord[]> {
    const rows = await this.#pg.query<KeyRow>('keys_list', 'SELECT * FROM keys ORDER BY created_at, id')
    return rows.map(toRecord)
  }

  async get(id: string): Promise<KeyRecord | undefined> {
    const rows = await this.#pg.query<KeyRow>('key_get', 'SELECT * FROM keys WHERE id = $1', [id])
    return rows[0] === undefined ? undefined : toRecord(rows[0])
  }

  async revoke(id: string): Promise<boolean> {
    const rows = await this.#pg.query<KeyRow>(
      'key_revoke',
      'UPDATE keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL RETURNING hash',
      [id, this.#now()],
    )
    for (const r of rows) this.#cacheRevoked(r.hash)
    return rows.length > 0
  }

  async rotate(id: string): Promise<{ key: string; record: KeyRecord } | undefined> {
    const result = await this.#pg.transaction('key_rotate', async (c) => {
      // The UPDATE takes the row's lock: of two rotations of one key, the second finds it revoked and does nothing.
      const res = await c.query<KeyRow>('UPDATE keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL RETURNING *', [id, this.#now()])
      const old = res.rows[0]
      if (old === undefined) return undefined
      const was = toRecord(old)
      const made = this.#make({ tenant: was.tenant, plan: was.plan, ...(was.label ? { label: was.label } : {}) })
      await c.query(INSERT, insertValues(made.record))
      return { old: was, made }
    })
    if (result === undefined) return undefined
    this.#cacheRevoked(result.old.hash)
    this.#cacheActive(result.made.record)
    return result.made
  }

  async setPlan(id: string, plan: Plan): Promise<KeyRecord | undefined> {
    const rows = await this.#pg.query<KeyRow>('key_set_plan', 'UPDATE keys SET plan = $2 WHERE id = $1 AND revoked_at IS NULL RETURNING *', [id, plan])
    if (rows[0] === undefined) return undefined
    const record = toRecord(rows[0])
    this.#cacheActive(record)
    return record
  }

  async countActive(): Promise<number> {
    const rows = await this.#pg.query('keys_count', 'SELECT count(*)::int AS n FROM keys WHERE revoked_at IS NULL')
    return Number(rows[0]?.n ?? 0)
  }

  lookup(hash: string): KeyLookupResult {
    return this.#active.get(hash) ?? this.#found.get(hash) ?? (this.#unknown.get(hash) === 'revoked' ? 'revoked' : undefined)
  }

  /**
   * A hash the cache does not hold: ask the database once (concurrent misses for one hash share the query).
   * Resolves `'revoked'` for a revoked key, undefined for an unknown one and when too many miss queries are already
   * running.
   */
  lookupMiss(hash: string): Promise<KeyLookupResult> {
    const cached = this.lookup(hash)
    if (cached !== undefined) return Promise.resolve(cached)
    if (this.#unknown.has(hash)) return Promise.resolve(undefined)
    const pending = this.#pending.get(hash)
    if (pending !== undefined) return pending
    if (this.#pending.size >= this.#maxMissQueries) return Promise.resolve(undefined)
    const p = (async (): Promise<KeyLookupResult> => {
      try {
        const rows = await this.#pg.query<KeyRow>('key_lookup', 'SELECT hash, tenant, plan, revoked_at FROM keys WHERE hash = $1', [hash])
        const row = rows[0]
        const plan = row === undefined ? undefined : asPlan(row.plan)
        if (row === undefined || plan === undefined) {
          this.#unknown.set(hash, 'unknown')
          return undefined
        }
        if (row.revoked_at !== null) {
          this.#unknown.set(hash, 'revoked')
          return 'revoked'
        }
        const tenant = { id: tenantOf(row), plan }
        this.#found.set(hash, tenant)
        return tenant
      } finally {
        this.#pending.delete(hash)
      }
    })()
    this.#pending.set(hash, p)
    return p
  }

  #make(o: { tenant: string; plan: Plan; label?: string }): { key: string; record: KeyRecord } {
    const key = generateKey()
    const hash = hashKey(key)
    return { key, record: { id: keyIdFor(hash), hash, tenant: o.tenant, plan: o.plan, createdAt: this.#now(), ...(o.label ? { label: o.label } : {}) } }
  }

  /** This process's own change takes effect here at once (other replicas see it within the TTL). */
  #cacheActive(r: KeyRecord): void {
    this.#unknown.delete(r.hash)
    this.#active.delete(r.hash)
    this.#found.set(r.hash, { id: r.tenant, plan: r.plan })
  }

  #cacheRevoked(hash: string): void {
    this.#active.delete(hash)
    this.#found.delete(hash)
    this.#unknown.set(hash, 'revoked')
  }
}

function asPlan(v: unknown): Plan | undefined {
  return typeof v === 'string' && (PLANS as readonly string[]).includes(v) ? (v as Plan) : undefined
}

function tenantOf(r: Pick<KeyRow, 'hash' | 'tenant'>): string {
  return r.tenant ?? tenantIdFor(r.hash)
}

function toRecord(r: KeyRow): KeyRecord {
  const plan = asPlan(r.plan)
  if (plan === undefined) throw new Error(`corrupt key record ${r.id}: plan ${String(r.plan)}`)
  return {
    id: r.id,
    hash: r.hash,
    tenant: tenantOf(r),
    plan,
    createdAt: ms(r.created_at),
    ...(r.revoked_at !== null ? { revokedAt: ms(r.revoked_at) } : {}),
    ...(r.label !== null ? { label: r.label } : {}),
  }
}
