/**
 * Who may come in, and how often: the presented service key's tenant (failed keys limited per client address), then
 * the tenant's rate-limit bucket. The policy lives here; http/server.ts only calls `admit` for routes that need a key
 * and sets the headers it returns.
 *
 * Synchronous whenever it can be (an inline or locally known key, the embedded limiter): a promise only when a caching
 * key store asks its database or the limiter is shared (Redis), so the usual path costs no extra turn of the loop.
 */
import type { IncomingHttpHeaders } from 'node:http'
import type { GatewayError } from '../errors.js'
import type { Tenant } from '../types.js'
import type { AuthFailureLimiter } from './auth-failure-limiter.js'
import type { Authenticator } from './authenticator.js'
import { enforceDecision, type Limiter, type RateDecision } from './rate-limiter.js'

export interface AdmissionOptions {
  authenticator: Authenticator
  /** Failed authentications per client address (429 past the budget); none: not limited. */
  authFailures?: AuthFailureLimiter | undefined
  limiter: Limiter
  /** A request refused for its tenant's rate (the metrics count it by plan). */
  onRateLimited?: (plan: string) => void
}

export interface Admission {
  /** The tenant of the presented service key; throws the registry's 401 (or 429 for an address past its failures). */
  authenticate(headers: IncomingHttpHeaders, address: string | undefined, connection?: object): Tenant | Promise<Tenant>
  /** The tenant's rate-limit headers for the response; throws the registry's 429 past its plan's rate. */
  limit(tenant: Tenant): Record<string, string> | Promise<Record<string, string>>
}

export function admission(o: AdmissionOptions): Admission {
  const refused = (address: string | undefined, err: unknown): unknown => o.authFailures?.refuse(address, err) ?? err
  const decided = (tenant: Tenant, d: RateDecision): Record<string, string> => {
    try {
      return enforceDecision(d, tenant.plan)
    } catch (err) {
      if ((err as GatewayError).code === 'rate_limit_exceeded') o.onRateLimited?.(tenant.plan)
      throw err
    }
  }
  return {
    authenticate(headers, address, connection) {
      let who: Tenant | Promise<Tenant>
      const failures = o.authFailures
      try {
        // The address's failures are looked up only when the database would be asked (an unknown key): not per request.
        who = o.authenticator.authenticate(headers, { connection, cacheOnly: failures && (() => failures.limited(address)) })
      } catch (err) {
        // Only a failure costs anything here: a bucket lookup per failed key (an LRU get and some arithmetic).
        throw refused(address, err)
      }
      return who instanceof Promise ? who.catch((err: unknown) => Promise.reject(refused(address, err))) : who
    },
    limit(tenant) {
      const d = o.limiter.check(tenant.id, tenant.plan)
      return d instanceof Promise ? d.then((x) => decided(tenant, x)) : decided(tenant, d)
    },
  }
}
