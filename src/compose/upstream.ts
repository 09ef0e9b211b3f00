/** The upstream part of the gateway: the provider's connection pool and the cached model list read through it. */
import type { Config } from '../config.js'
import type { ReadinessCheck } from '../routes/ready.js'
import type { Metrics } from '../metrics.js'
import type { Clock } from '../types.js'
import { UpstreamClient } from '../upstream/client.js'
import { ModelCatalog } from '../upstream/model-catalog.js'
import type { Closers } from './closers.js'

export interface Upstream {
  readonly upstream: UpstreamClient
  readonly catalog: ModelCatalog
  /** The upstream's entry with READY_CHECK_UPSTREAM on. */
  readonly readiness: ReadinessCheck[]
}

export function openUpstream(opts: { config: Config; clock: Clock; closers: Closers; metrics: Pick<Metrics, 'upstreamRetried'> }): Upstream {
  const { config } = opts
  const upstream = new UpstreamClient({
    baseUrl: config.upstreamBaseUrl,
    connectTimeout: config.upstreamConnectTimeout,
    headersTimeout: config.upstreamHeadersTimeout,
    bodyTimeout: config.upstreamBodyTimeout,
    connections: config.upstreamConnections,
    httpReferer: config.httpReferer,
    xTitle: config.xTitle,
    onRetry: () => opts.metrics.upstreamRetried(),
  })
  opts.closers.add(() => upstream.close())
  const catalog = new ModelCatalog({ upstream, ttl: config.modelsCacheTtl, clock: opts.clock })
  // Off by default: an upstream outage would take every replica out of the balancer at once, which helps no one; on, it
  // catches a wrong UPSTREAM_BASE_URL before traffic does (issue 27).
  const readiness: ReadinessCheck[] = config.readyCheckUpstream ? [{ name: 'upstream', required: true, check: () => catalog.check() }] : []
  return { upstream, catalog, readiness }
}
