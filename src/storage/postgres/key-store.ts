/**
 * Service keys in PostgreSQL (`keys`: hash → id, plan, label, created_at, revoked_at), hashes only.
 *
 * `lookup` runs on every request before anything else and is synchronous (the store contract), so it answers from a
 * per-process cache of the active keys' hashes → tenant:
 * - loaded whole at start (`load`), and again every `ttl` (default 5 s) in the background, so a key revoked through
 *   another replica (or the CLI) stops working here within the TTL; one revoked through this process stops at once;
 * - a hash the cache does not know is looked up once in the database (`lookupMiss`, awaited by the authenticator), so
 *   a key created on another replica works here on its very first request; unknown hashes are remembered as unknown
 *   for the TTL, so a client repeating a bad key costs one query per TTL, not one per request.
 * Bounds: at most `maxKeys` active keys are cached from the reload (newest first), `maxKeys` more found by misses, and
 * `maxKeys` unknown hashes; at most `maxMissQueries` miss queries run at once (beyond them a miss is answered from
 * the cache alone, i.e. refused), so a flood of random keys cannot queue work on the database.
 * While the database is away the cache keeps answering as it last knew (revocations then wait for it to come back).
 */
import { LRUCache } from 'lru-cache'
import { generateKey, hashKey, keyIdFor, tenantIdFor } from '../../auth/service-keys.js'
import { PLANS, type Ms, type Plan, type Tenant } from '../../types.js'
import type { KeyRecord, KeyStore } from '../interface.js'
import { ms, type Pg, type Row } from './pool.js'

export interface PgKeyStoreOptions {
  now: () => number
  /** How long a cached answer may be stale (a revoke elsewhere takes this long at most to reach this process). */
  ttl?: Ms
  maxKeys?: number
  maxMissQueries?: number
  /** Told when the background reload fails (the cache keeps its last state). */
  onReloadError?: (err: unknown) => void
}

interface KeyRow extends Row {
  hash: string
  id: string
  plan: string
  label: string | null
  created_at: string
  revoked_at: string | null
}

export class PgKeyStore implements KeyStore {
  readonly #pg: Pg
  readonly #now: () => number
  readonly #ttl: Ms
  readonly #maxKeys: number
  readonly #maxMissQueries: number
  readonly #onReloadError: (err: unknown) => void
  /** The last reload's active keys. Replaced whole by each reload. */
  #active = new Map<string, Tenant>()
  /** Active keys found by a miss since the last reload (created elsewhere after it). */
  readonly #found: LRUCache<string, Tenant>
  /** Hashes the database did not know (or knew as revoked), for the TTL. */
  readonly #unknown: LRUCache<string, true>
  readonly #pending = new Map<string, Promise<Tenant | undefined>>()
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
      'SELECT hash, plan FROM keys WHERE revoked_at IS NULL ORDER BY created_at DESC LIMIT $1',
      [this.#maxKeys],
    )
    const next = new Map<string, Tenant>()
    for (const r of rows) {
      const plan = asPlan(r.plan)
      if (plan !== undefined) next.set(r.hash, { id: tenantIdFor(r.hash), plan })
    }
    this.#active = next
    this.#found.clear()
    this.#unknown.clear()
  }

  async create(plan: Plan, label?: string): Promise<{ key: string; record: KeyRecord }> {
    const key = generateKey()
    const hash = hashKey(key)
    const record: KeyRecord = { id: keyIdFor(hash), hash, plan, createdAt: this.#now(), ...(label ? { label } : {}) }
    await this.#pg.query('key_create', 'INSERT INTO keys (hash, id, plan, label, created_at) VALUES ($1, $2, $3, $4, $5)', [
      hash,
      record.id,
      plan,
      label ?? null,
      record.createdAt,
    ])
    this.#unknown.delete(hash)
    this.#found.set(hash, { id: tenantIdFor(hash), plan })
    return { key, record }
  }

  async list(): Promise<KeyRecord[]> {
    const rows = await this.#pg.query<KeyRow>('keys_list', 'SELECT * FROM keys ORDER BY created_at, id')
    return rows.map(toRecord)
  }

  async revoke(id: string): Promise<boolean> {
    const rows = await this.#pg.query<KeyRow>(
      'key_revoke',
      'UPDATE keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL RETURNING hash',
      [id, this.#now()],
    )
    for (const r of rows) {
      this.#active.delete(r.hash)
      this.#found.delete(r.hash)
    }
    return rows.length > 0
  }

  async countActive(): Promise<number> {
    const rows = await this.#pg.query('keys_count', 'SELECT count(*)::int AS n FROM keys WHERE revoked_at IS NULL')
    return Number(rows[0]?.n ?? 0)
  }

  lookup(hash: string): Tenant | undefined {
    return this.#active.get(hash) ?? this.#found.get(hash)
  }

  /**
   * A hash the cache does not hold: ask the database once (concurrent misses for one hash share the query).
   * Resolves undefined for an unknown or revoked key, and when too many miss queries are already running.
   */
  lookupMiss(hash: string): Promise<Tenant | undefined> {
    const cached = this.lookup(hash)
    if (cached !== undefined) return Promise.resolve(cached)
    if (this.#unknown.has(hash)) return Promise.resolve(undefined)
    const pending = this.#pending.get(hash)
    if (pending !== undefined) return pending
    if (this.#pending.size >= this.#maxMissQueries) return Promise.resolve(undefined)
    const p = (async () => {
      try {
        const rows = await this.#pg.query<KeyRow>('key_lookup', 'SELECT plan FROM keys WHERE hash = $1 AND revoked_at IS NULL', [hash])
        const plan = rows[0] === undefined ? undefined : asPlan(rows[0].plan)
        if (plan === undefined) {
          this.#unknown.set(hash, true)
          return undefined
        }
        const tenant = { id: tenantIdFor(hash), plan }
        this.#found.set(hash, tenant)
        return tenant
      } finally {
        this.#pending.delete(hash)
      }
    })()
    this.#pending.set(hash, p)
    return p
  }
}

function asPlan(v: unknown): Plan | undefined {
  return typeof v === 'string' && (PLANS as readonly string[]).includes(v) ? (v as Plan) : undefined
}

function toRecord(r: KeyRow): KeyRecord {
  const plan = asPlan(r.plan)
  if (plan === undefined) throw new Error(`corrupt key record ${r.id}: plan ${String(r.plan)}`)
  return {
    id: r.id,
    hash: r.hash,
    plan,
    createdAt: ms(r.created_at),
    ...(r.revoked_at !== null ? { revokedAt: ms(r.revoked_at) } : {}),
    ...(r.label !== null ? { label: r.label } : {}),
  }
}
