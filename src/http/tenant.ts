/** The tenant of an authenticated request: the one helper every `/api/v1` handler uses to read it. */
import { gatewayError } from '../errors.js'
import type { Tenant } from '../types.js'
import type { RequestContext } from './server.js'

/** Routes registered with `auth: true` always have one; a handler reached without it answers 401, never guesses. */
export function tenantOf(ctx: RequestContext): Tenant {
  if (ctx.tenant === undefined) throw gatewayError('missing_service_key')
  return ctx.tenant
}
