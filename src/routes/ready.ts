/**
 * GET /readyz: readiness, distinct from liveness (/healthz). Checks every store this process depends on, each bounded
 * by its own timeout, in parallel, and answers 503 when a required one cannot answer, so a load balancer stops
 * sending requests to a replica that would fail them, without an orchestrator restarting it (which would not help).
 *
 * A store is `required` when requests fail without it. Redis is required only with RATE_LIMIT_ON_STORE_ERROR=deny:
 * with `allow` the gateway keeps serving on its local limiter, and failing readiness then would take every replica
 * out of the balancer at once over a degraded rate limit. Its state is reported either way.
 */
import type { Handler } from '../http/server.js'
import { sendJson } from '../http/respond.js'

export interface ReadinessCheck {
  name: string
  required: boolean
  /** Resolves when the store answers; rejects (or is cut off by the caller's timeout) when it cannot. */
  check(): Promise<void>
  /** What the answer says of it when the check fails; default `unavailable`. */
  failedAs?: string
}

export function readinessHandler(checks: readonly ReadinessCheck[], timeoutMs: number): Handler {
  return async (ctx) => {
    const results = await Promise.all(
      checks.map(async (c) => {
        let timer: NodeJS.Timeout | undefined
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('timed out')), timeoutMs)
        })
        try {
          await Promise.race([c.check(), timeout])
          return { name: c.name, required: c.required, ok: true, failedAs: c.failedAs }
        } catch {
          // Deliberately not logged per probe (a balancer probes every few seconds); the stores' own metrics count it.
          return { name: c.name, required: c.required, ok: false, failedAs: c.failedAs }
        } finally {
          clearTimeout(timer)
        }
      }),
    )
    const ready = results.every((r) => r.ok || !r.required)
    const stores: Record<string, string> = {}
    for (const r of results) stores[r.name] = r.ok ? 'ok' : (r.failedAs ?? 'unavailable')
    sendJson(ctx.res, ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready', stores }, { 'cache-control': 'no-store' })
  }
}
