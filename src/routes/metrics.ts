/**
 * GET /metrics: Prometheus text format. No service key: scraped from inside the deployment's network. Under
 * `--workers` the text is the whole cluster's (cluster-metrics.ts), whichever worker answers.
 */
import type { Handler } from '../http/server.js'
import type { Metrics } from '../metrics.js'

export function metricsHandler(metrics: Pick<Metrics, 'render'>): Handler {
  return async (ctx) => {
    const { contentType, body } = await metrics.render()
    ctx.res.statusCode = 200
    ctx.res.setHeader('content-type', contentType)
    ctx.res.end(body)
  }
}
