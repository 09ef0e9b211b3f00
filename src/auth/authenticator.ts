/**
 * Resolves a presented service key to its tenant: inline keys from SERVICE_KEYS first (held as hashes in memory),
 * then the key store. Raw keys are hashed immediately and never kept.
 */
import type { IncomingHttpHeaders } from 'node:http'
import { gatewayError } from '../errors.js'
import type { KeyLookupResult, Plan, Tenant } from '../types.js'
import { timingSafeEqual } from 'node:crypto'
import { hashKey, tenantIdFor } from './service-keys.js'

export interface KeyLookup {
  lookup(hash: string): KeyLookupResult
  /** A store that caches (PostgreSQL) asks its database about a hash the cache does not know. */
  lookupMiss?(hash: string): Promise<KeyLookupResult>
}

export class Authenticator {
  /** Inline keys' hashes as bytes, decoded once rather than on every comparison. */
  readonly #inline: Array<{ hash: Buffer; plan: Plan }> = []
  readonly #stored: KeyLookup
  /**
   * The key each keep-alive connection last presented, its hash, and its tenant when it is an inline key: a client
   * sends the same key on every request of a connection, and hashing it again (SHA-256, hex, hex → bytes) and matching
   * the inline keys cost 7-11 µs of a serial request on a cold core (perf, docs/benchmarks.md "Thirteenth round").
   * Held by the connection (a WeakMap entry, gone with the socket), so a presented key stays in memory no longer than
   * the connection that carries it does. Stored keys are still looked up on every request: a revocation takes effect
   * at once, as key-repo.ts promises. Inline keys cannot change while the process runs.
   */
  readonly #connections = new WeakMap<object, { key: string; hash: string; inline: Tenant | undefined }>()

  constructor(opts: { inlineKeys: ReadonlyMap<string, Plan>; stored: KeyLookup }) {
    for (const [key, plan] of opts.inlineKeys) this.#inline.push({ hash: Buffer.from(hashKey(key), 'hex'), plan })
    this.#stored = opts.stored
  }

  /** Header names are case-insensitive (node lower-cases them): `serviceKey`, alias `x-service-key`. */
  static presentedKey(headers: IncomingHttpHeaders): string | undefined {
    const v = headers['servicekey'] ?? headers['x-service-key']
    const key = Array.isArray(v) ? v[0] : v
    return key === undefined || key === '' ? undefined : key
  }

  /**
   * The caller's tenant. Synchronous whenever the answer is known here (inline keys, the key store's own answer);
   * a promise only when a caching store has to ask its database about a hash it has not seen (server.ts awaits it).
   */
  authenticate(headers: IncomingHttpHeaders, opts: AuthenticateOptions = {}): Tenant | Promise<Tenant> {
    const key = Authenticator.presentedKey(headers)
    if (key === undefined) throw gatewayError('missing_service_key')
    const connection = opts.connection
    let known = connection === undefined ? undefined : this.#connections.get(connection)
    if (known === undefined || !sameText(known.key, key)) {
      const hash = hashKey(key)
      known = { key, hash, inline: undefined }
      const bytes = Buffer.from(hash, 'hex')
      let inlinePlan: Plan | undefined
      for (const k of this.#inline) {
        // Every inline hash is compared in constant time and the loop never stops early, so the time taken does not
        // depend on which key (if any) matched.
        if (timingSafeEqual(k.hash, bytes)) inlinePlan = k.plan
      }
      if (inlinePlan !== undefined) known.inline = Object.freeze({ id: tenantIdFor(hash), plan: inlinePlan })
      if (connection !== undefined) this.#connections.set(connection, known)
    }
    if (known.inline !== undefined) return known.inline
    const hash = known.hash
    const found = this.#stored.lookup(hash)
    if (found !== undefined) return knownTenant(found)
    if (this.#stored.lookupMiss === undefined || opts.cacheOnly?.() === true) throw gatewayError('invalid_service_key')
    return this.#stored.lookupMiss(hash).then((missed) => {
      if (missed === undefined) throw gatewayError('invalid_service_key')
      return knownTenant(missed)
    })
  }
}

export interface AuthenticateOptions {
  /**
   * Asked only before the database would be asked about an unknown hash: true to refuse instead (a client address
   * past its failed-authentication budget).
   */
  cacheOnly?: () => boolean
  /** The request's connection (its socket): the key it presented last is not hashed again (see #connections). */
  connection?: object
}

/**
 * Equality of a presented key with the one the connection presented before, in time that depends on the length only
 * (a shared proxy's connection can carry several clients' keys).
 */
function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return diff === 0
}

/** A revoked key is told so (its holder learns to ask for the replacement instead of retrying a typo). */
function knownTenant(found: Tenant | 'revoked'): Tenant {
  if (found === 'revoked') throw gatewayError('key_revoked')
  return found
}
