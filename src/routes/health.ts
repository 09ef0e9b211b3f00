/** GET /healthz: liveness only (no key, no upstream call), so an orchestrator never restarts us for a provider outage. */
import type { Handler } from '../http/server.js'
import { sendJson } from '../http/respond.js'

export function healthHandler(): Handler {
  return async (ctx) => {
    sendJson(ctx.res, 200, { status: 'ok' })
  }
}
