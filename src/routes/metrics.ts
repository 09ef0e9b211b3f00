/**
 * GET /metrics: Prometheus text format. No service key: scraped from inside the deployment's network. With
 * METRICS_TOKEN set, the scraper must send `Authorization: Bearer <token>` (Prometheus' `authorization` scrape
 * setting), for deployments whose port is reachable from outside.
 */
import { hash, timingSafeEqual } from 'node:crypto'
import { gatewayError } from '../errors.js'
import type { Handler } from '../http/server.js'
import type { Metrics } from '../metrics.js'

export function metricsHandler(metrics: Metrics, token?: string): Handler {
  // Compared as SHA-256 digests: equal lengths for timingSafeEqual, and no timing that depends on the token.
  const expected = token === undefined ? undefined : digest(`Bearer ${token}`)
  return async (ctx) => {
    if (expected !== undefined) {
      const given = ctx.req.headers.authorization
      if (given === undefined || !timingSafeEqual(digest(given.trim()), expected)) throw gatewayError('invalid_metrics_token')
    }
    const { contentType, body } = await metrics.render()
    ctx.res.statusCode = 200
    ctx.res.setHeader('content-type', contentType)
    ctx.res.end(body)
  }
}

function digest(s: string): Buffer {
  return hash('sha256', s, 'buffer')
}
