/**
 * The gateway's Prometheus metrics (prom-client), on a Registry of their own so that each gateway instance — and
 * each test — has independent counters instead of sharing prom-client's global default.
 *
 * Label cardinality is bounded: every time series costs memory here and in Prometheus, and two of our labels come
 * from callers (the model name, and the route if a router ever passed a raw path). Each such label keeps the first
 * `max` distinct values it sees and folds the rest into `other`. Callers should pass the model the upstream answered
 * with (or the request's model only when the upstream accepted it), so junk model names in rejected requests do not
 * use up the slots. Plans, methods and statuses are closed sets.
 *
 * The metric list with meanings is documented in docs/operations.md; keep both in step.
 */
import { collectDefaultMetrics, Counter, Gauge, Registry, type Metric } from 'prom-client'
import { PLANS, STREAM_FAILURE_REASONS, type Ms, type StreamFailureReason } from './types.js'

export interface Metrics {
  readonly registry: Registry
  /** Once per finished request. `route` is the route template ('/api/v1/sessions/:id'), never a raw path. */
  observeRequest(o: { route: string; method: string; status: number; plan: string; durationMs: Ms }): void
  /** Once per upstream call; each timing is observed only when known. `overheadMs` is the gateway's own time:
   * the request's total minus the time spent on the upstream. */
  observeUpstream(o: { model: string; headersMs?: Ms; ttftMs?: Ms; overheadMs?: Ms }): void
  /** `cached`: prompt tokens the provider served from its prompt cache (`usage.prompt_tokens_details.cached_tokens`). */
  tokens(o: { model: string; prompt: number; completion: number; cached?: number }): void
  /** One request the upstream accepted, counted toward its tenant's usage (GET /api/v1/usage); no tenant label. */
  usageRequest(model: string): void
  rateLimited(plan: string): void
  /** A streamed reply that began (200 sent) and did not complete, by why (types.ts STREAM_FAILURE_REASONS). */
  streamFailed(reason: StreamFailureReason): void
  /** An upstream request sent once more after the upstream closed a kept-alive connection under it (upstream/client.ts). */
  upstreamRetried(): void
  /** One call to a store (`redis`, `postgres`): its latency and whether it failed. `op` is a closed set per store. */
  storeOp(o: { store: StoreName; op: string; ms: Ms; ok: boolean }): void
  /** A rate check decided without the shared store (it was failing), by what was decided. */
  rateLimitFallback(outcome: 'allowed' | 'limited' | 'denied'): void
  /** Gauges collected on scrape from callbacks (memory/KB sizes, token-count correction per model). */
  setCollectors(c: {
    sizes?: () => { sessions: number; messages: number; files: number; chunks: number }
    corrections?: () => ReadonlyMap<string, number>
    /** LMDB's pages in use and its ceiling (LMDB_MAP_SIZE), in bytes. */
    lmdbSpace?: () => { usedBytes: number; mapSize: number; fileBytes: number }
  }): void
  render(): Promise<{ contentType: string; body: string }>
}

export interface MetricsOptions {
  /** Also export prom-client's process metrics (rss, heap, CPU, event loop lag, GC). Default true. */
  collectDefault?: boolean
  /** Distinct model label values kept; later ones are counted as `other`. Default 200. */
  maxModels?: number
  /** Distinct route label values kept; later ones are counted as `other`. Default 64. */
  maxRoutes?: number
}

export type StoreName = 'redis' | 'postgres' | 'lmdb'

export const OTHER = 'other'
/** Longer label values are cut: a label is an identifier, and the text format repeats it on every bucket line. */
const MAX_LABEL_LENGTH = 120

/**
 * Buckets in seconds. The gateway's own overhead is expected well under a millisecond on the hot path (auth, bucket,
 * packing a short prompt), so its buckets start at 50 µs; upstream waits are model latencies, seconds to minutes.
 */
export const BUCKETS = {
  overhead: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  request: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
  store: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  upstream: [0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13, 20, 30, 60, 120],
} as const

/** Keeps the first `max` distinct values; everything after is `other`. */
class BoundedLabel {
  private readonly seen = new Set<string>()
  constructor(private readonly max: number) {}

  of(raw: string): string {
    const value = raw.length > MAX_LABEL_LENGTH ? raw.slice(0, MAX_LABEL_LENGTH) : raw
    if (this.seen.has(value)) return value
    if (this.seen.size >= this.max) return OTHER
    this.seen.add(value)
    return value
  }

  /** Like `of`, but `undefined` instead of `other` once full: for gauges, where an `other` value would mean nothing. */
  exact(raw: string): string | undefined {
    const value = this.of(raw)
    return value === OTHER && raw !== OTHER ? undefined : value
  }
}

/**
 * The metrics observed on every request keep one cell per label set, found by a key the caller builds, instead of
 * going through prom-client's `inc`/`observe` (label validation, label hashing and a closure per call): those were
 * 44 of the 1,090 µs a request cost the gateway at 32 connections, profiled on the plain relay (bench/relay.ts), for
 * six updates a request. They register with the same Registry and hand it the values prom-client's Counter and
 * Histogram would (same order, same labels, same `_bucket`/`_sum`/`_count` series), so the exposition is unchanged.
 */
type Labels = Record<string, string>
interface Sample {
  labels: Record<string, string | number>
  value: number
  metricName?: string
  sharedLabels?: Labels
  exemplar?: null
}

abstract class CellMetric<C extends { labels: Labels }> {
  abstract readonly type: 'counter' | 'histogram'
  readonly aggregator = 'sum'
  protected cells = new Map<string, C>()

  constructor(
    readonly name: string,
    readonly help: string,
    registry: Registry,
  ) {
    // The registry takes any object with a name, `get()` and `reset()`; prom-client's type names its own classes.
    registry.registerMetric(this as unknown as Metric)
  }

  /** The cell of one label set; `labels` is called only the first time `key` is seen. */
  cell(key: string, labels: () => Labels): C {
    let c = this.cells.get(key)
    if (c === undefined) {
      c = this.create(labels())
      this.cells.set(key, c)
    }
    return c
  }

  protected abstract create(labels: Labels): C
  protected abstract samples(): Sample[]

  async getForPromString(): Promise<{ name: string; help: string; type: string; values: Sample[]; aggregator: string }> {
    const { name, help, type, aggregator } = this
    // Key order as prom-client's (the counter's starts with help): JSON consumers see the same text.
    return type === 'counter' ? { help, name, type, values: this.samples(), aggregator } : { name, help, type, values: this.samples(), aggregator }
  }

  /** JSON form (`registry.getMetricsAsJSON()`): shared labels folded into each sample's labels, as prom-client does. */
  async get(): Promise<{ name: string; help: string; type: string; values: Sample[]; aggregator: string }> {
    const m = await this.getForPromString()
    m.values = m.values.map(({ sharedLabels, labels, ...rest }) => ({ ...rest, labels: { ...labels, ...sharedLabels } }))
    return m
  }

  reset(): void {
    this.cells.clear()
  }
}

class CellCounter extends CellMetric<{ labels: Labels; value: number }> {
  readonly type = 'counter'
  protected create(labels: Labels): { labels: Labels; value: number } {
    return { labels, value: 0 }
  }
  protected samples(): Sample[] {
    return [...this.cells.values()].map((c) => ({ value: c.value, labels: c.labels }))
  }
}

interface HistogramCell {
  labels: Labels
  /** Observations per bucket, not cumulative; the last slot is past the highest bound (+Inf only). */
  counts: number[]
  sum: number
  count: number
}

class CellHistogram extends CellMetric<HistogramCell> {
  readonly type = 'histogram'
  constructor(
    name: string,
    help: string,
    registry: Registry,
    readonly bounds: readonly number[],
    unlabelled = false,
  ) {
    super(name, help, registry)
    // Like prom-client, a histogram without labels exports its zero series from the start.
    if (unlabelled) this.cell('', () => ({}))
  }
  protected create(labels: Labels): HistogramCell {
    return { labels, counts: new Array<number>(this.bounds.length + 1).fill(0), sum: 0, count: 0 }
  }
  observe(c: HistogramCell, value: number): void {
    let i = 0
    while (i < this.bounds.length && value > (this.bounds[i] as number)) i++
    c.counts[i] = (c.counts[i] ?? 0) + 1
    c.sum += value
    c.count += 1
  }
  protected samples(): Sample[] {
    const out: Sample[] = []
    const bucket = `${this.name}_bucket`
    for (const c of this.cells.values()) {
      let acc = 0
      this.bounds.forEach((le, i) => {
        acc += c.counts[i] ?? 0
        out.push({ labels: { le }, value: acc, metricName: bucket, sharedLabels: c.labels, exemplar: null })
      })
      out.push({ labels: { le: '+Inf' }, value: c.count, metricName: bucket, sharedLabels: c.labels, exemplar: null })
      out.push({ labels: {}, value: c.sum, metricName: `${this.name}_sum`, sharedLabels: c.labels })
      out.push({ labels: {}, value: c.count, metricName: `${this.name}_count`, sharedLabels: c.labels })
    }
    return out
  }
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])
const planLabel = (plan: string): string => ((PLANS as readonly string[]).includes(plan) ? plan : 'none')
const methodLabel = (method: string): string => (METHODS.has(method) ? method : 'OTHER')
const statusLabel = (status: number): string =>
  Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : '0'
const statusClass = (status: number): string =>
  Number.isInteger(status) && status >= 100 && status <= 599 ? `${Math.floor(status / 100)}xx` : 'unknown'
const seconds = (ms: Ms): number => Math.max(0, ms) / 1000
const usable = (n: number | undefined): n is number => n !== undefined && Number.isFinite(n) && n >= 0

export function createMetrics(o: MetricsOptions = {}): Metrics {
  const registry = new Registry()
  const registers = [registry]
  const models = new BoundedLabel(o.maxModels ?? 200)
  const routes = new BoundedLabel(o.maxRoutes ?? 64)

  const requests = new CellCounter(
    'recallgate_http_requests_total',
    'Finished HTTP requests by route template, method, status and plan (plan "none" before authentication).',
    registry,
  )
  const requestDuration = new CellHistogram(
    'recallgate_http_request_duration_seconds',
    'Whole request time, first byte in to last byte out, by route template, method and status class.',
    registry,
    BUCKETS.request,
  )
  const upstreamHeaders = new CellHistogram(
    'recallgate_upstream_headers_seconds',
    'Time from sending the upstream request to receiving its response headers, by model.',
    registry,
    BUCKETS.upstream,
  )
  const upstreamTtft = new CellHistogram(
    'recallgate_upstream_ttft_seconds',
    'Time from sending the upstream request to its first content token (streaming), by model.',
    registry,
    BUCKETS.upstream,
  )
  const overhead = new CellHistogram(
    'recallgate_gateway_overhead_seconds',
    "The gateway's own time per proxied request: total request time minus time spent on the upstream.",
    registry,
    BUCKETS.overhead,
    true,
  )
  const tokenCounter = new CellCounter(
    'recallgate_tokens_total',
    'Tokens by model and type (prompt = sent upstream, prompt_cached = the part of it the provider served from its ' +
      'prompt cache, completion = generated), as reported by the upstream.',
    registry,
  )
  const usageRequests = new CellCounter(
    'recallgate_usage_requests_total',
    'Requests the upstream accepted, by model: the sum over tenants of GET /api/v1/usage `requests` (its tokens are ' +
      'recallgate_tokens_total).',
    registry,
  )
  const rateLimitedCounter = new Counter({
    name: 'recallgate_rate_limited_total',
    help: 'Requests rejected with 429 by the per-key rate limiter, by plan.',
    labelNames: ['plan'] as const,
    registers,
  })
  // A rare event, so prom-client's own counter (the cells above are for the per-request hot path). Every reason is
  // exported from the start at 0, so a rate() or an alert on one has a series before its first failure.
  const streamFailures = new Counter({
    name: 'recallgate_stream_failures_total',
    help:
      'Streamed replies that began (status 200 sent) and did not complete, by reason: upstream_reset, ' +
      'upstream_timeout, upstream_invalid, upstream_error (the upstream reported a failure: an error event, or choice 0 ' +
      'failing, also in a chat JSON reply relayed with its 200), client_gone, internal.',
    labelNames: ['reason'] as const,
    registers,
  })
  for (const reason of STREAM_FAILURE_REASONS) streamFailures.inc({ reason }, 0)
  // Rare too; no labels, so it is exported at 0 from the start.
  const upstreamRetries = new Counter({
    name: 'recallgate_upstream_retries_total',
    help: 'Upstream requests sent once more because the upstream closed a kept-alive connection before answering them.',
    registers,
  })

  const storeDuration = new CellHistogram(
    'recallgate_store_operation_seconds',
    'Calls to a store (redis, lmdb) by store and operation, failed ones included.',
    registry,
    BUCKETS.store,
  )
  const storeErrors = new CellCounter(
    'recallgate_store_errors_total',
    'Calls to a store that failed (unreachable, timed out, refused, a failed commit), by store and operation.',
    registry,
  )
  const fallbackCounter = new CellCounter(
    'recallgate_rate_limit_fallback_total',
    'Rate checks decided without the shared store because it was failing (RATE_LIMIT_ON_STORE_ERROR), by outcome.',
    registry,
  )
  const ops = new BoundedLabel(32)

  let sizes: (() => { sessions: number; messages: number; files: number; chunks: number }) | undefined
  let corrections: (() => ReadonlyMap<string, number>) | undefined
  let lmdbSpace: (() => { usedBytes: number; mapSize: number; fileBytes: number }) | undefined

  // A throwing callback must not fail the whole scrape (every other metric would vanish with it): the gauge is
  // reset, the failure is counted in collectorErrors so it is visible, and the scrape goes on.
  new Gauge({
    name: 'recallgate_stored_records',
    help: 'Records held: memory sessions and messages, knowledge-base files and chunks, across all tenants.',
    labelNames: ['kind'] as const,
    registers,
    // Under --workers every worker reads the one DATA_DIR: the cluster's figure is theirs, not their sum.
    aggregator: 'max',
    collect() {
      this.reset()
      if (sizes === undefined) return
      try {
        const s = sizes()
        this.set({ kind: 'sessions' }, s.sessions)
        this.set({ kind: 'messages' }, s.messages)
        this.set({ kind: 'files' }, s.files)
        this.set({ kind: 'chunks' }, s.chunks)
      } catch {
        this.reset()
        collectorErrors.inc({ collector: 'sizes' })
      }
    },
  })
  new Gauge({
    name: 'recallgate_lmdb_bytes',
    aggregator: 'max',
    help: 'LMDB space in bytes: kind="used" (pages the databases hold), "file" (the data file on disk), "map_size" (LMDB_MAP_SIZE). used / map_size is how full the store is.',
    labelNames: ['kind'] as const,
    registers,
    collect() {
      this.reset()
      if (lmdbSpace === undefined) return
      try {
        const s = lmdbSpace()
        this.set({ kind: 'used' }, s.usedBytes)
        this.set({ kind: 'file' }, s.fileBytes)
        this.set({ kind: 'map_size' }, s.mapSize)
      } catch {
        this.reset()
        collectorErrors.inc({ collector: 'lmdb_space' })
      }
    },
  })
  new Gauge({
    name: 'recallgate_token_count_correction',
    help: 'Learned ratio of upstream-reported prompt tokens to the local count, by model (1 = exact).',
    labelNames: ['model'] as const,
    registers,
    // Each worker learns its own ratio: a cluster's is their mean.
    aggregator: 'average',
    collect() {
      this.reset()
      if (corrections === undefined) return
      try {
        for (const [model, ratio] of corrections()) {
          // A gauge for "other" would be whichever model came last: meaningless, so models past the cap are left out.
          const label = models.exact(model)
          if (label !== undefined && Number.isFinite(ratio)) this.set({ model: label }, ratio)
        }
      } catch {
        this.reset()
        collectorErrors.inc({ collector: 'corrections' })
      }
    },
  })

  // Registered after the gauges on purpose: a scrape reads metrics in registration order, and each gauge's collect()
  // runs synchronously when read, so a failure is already counted in the same scrape that suffered it.
  const collectorErrors: Counter<'collector'> = new Counter({
    name: 'recallgate_metrics_collector_errors_total',
    help: 'Scrapes on which a size or correction callback threw (the gauge is left empty for that scrape).',
    labelNames: ['collector'] as const,
    registers,
  })

  if (o.collectDefault ?? true) collectDefaultMetrics({ register: registry })

  return {
    registry,
    observeRequest(r) {
      const route = routes.of(r.route)
      const method = methodLabel(r.method)
      const status = statusLabel(r.status)
      const plan = planLabel(r.plan)
      requests.cell(`${route}\0${method}\0${status}\0${plan}`, () => ({ route, method, status, plan })).value += 1
      if (usable(r.durationMs)) {
        const sc = statusClass(r.status)
        requestDuration.observe(requestDuration.cell(`${route}\0${method}\0${sc}`, () => ({ route, method, status_class: sc })), seconds(r.durationMs))
      }
    },
    observeUpstream(u) {
      const model = models.of(u.model)
      const byModel = (): Labels => ({ model })
      if (usable(u.headersMs)) upstreamHeaders.observe(upstreamHeaders.cell(model, byModel), seconds(u.headersMs))
      if (usable(u.ttftMs)) upstreamTtft.observe(upstreamTtft.cell(model, byModel), seconds(u.ttftMs))
      // Clock jitter can make total − upstream slightly negative; that is zero overhead, not a dropped sample.
      if (u.overheadMs !== undefined && Number.isFinite(u.overheadMs)) overhead.observe(overhead.cell('', () => ({})), seconds(u.overheadMs))
    },
    tokens(t) {
      const model = models.of(t.model)
      if (usable(t.prompt) && t.prompt > 0) tokenCounter.cell(`${model}\0prompt`, () => ({ model, type: 'prompt' })).value += t.prompt
      if (usable(t.completion) && t.completion > 0)
        tokenCounter.cell(`${model}\0completion`, () => ({ model, type: 'completion' })).value += t.completion
      const cached = t.cached ?? 0
      if (usable(cached) && cached > 0)
        tokenCounter.cell(`${model}\0prompt_cached`, () => ({ model, type: 'prompt_cached' })).value += cached
    },
    usageRequest(m) {
      const model = models.of(m)
      usageRequests.cell(model, () => ({ model })).value++
    },
    rateLimited(plan) {
      rateLimitedCounter.inc({ plan: planLabel(plan) })
    },
    streamFailed(reason) {
      streamFailures.inc({ reason })
    },
    upstreamRetried() {
      upstreamRetries.inc()
    },
    storeOp(o) {
      const op = ops.of(o.op)
      const key = `${o.store}\0${op}`
      const labels = (): Labels => ({ store: o.store, op })
      if (usable(o.ms)) storeDuration.observe(storeDuration.cell(key, labels), seconds(o.ms))
      if (!o.ok) storeErrors.cell(key, labels).value += 1
    },
    rateLimitFallback(outcome) {
      fallbackCounter.cell(outcome, () => ({ outcome })).value += 1
    },
    setCollectors(c) {
      if (c.sizes !== undefined) sizes = c.sizes
      if (c.corrections !== undefined) corrections = c.corrections
      if (c.lmdbSpace !== undefined) lmdbSpace = c.lmdbSpace
    },
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() }
    },
  }
}
