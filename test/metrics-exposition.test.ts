/**
 * The per-request metrics keep their own cells instead of going through prom-client's Counter and Histogram
 * (src/metrics.ts, `CellCounter`/`CellHistogram`): what a scrape shows must be what prom-client's own classes would
 * show for the same observations, series for series, in the same order.
 */
import t from 'tap'
import { Counter, Histogram, Registry } from 'prom-client'
import { BUCKETS, createMetrics } from '../src/metrics.js'

const REQUESTS: Array<{ route: string; method: string; status: number; plan: string; durationMs: number }> = [
  { route: '/api/v1/chat/completions', method: 'POST', status: 200, plan: 'pro', durationMs: 812 },
  { route: '/api/v1/chat/completions', method: 'POST', status: 200, plan: 'pro', durationMs: 40 },
  { route: '/healthz', method: 'GET', status: 200, plan: 'none', durationMs: 0.2 },
  { route: '/api/v1/chat/completions', method: 'POST', status: 429, plan: 'free', durationMs: 0.9 },
  { route: '/api/v1/chat/completions', method: 'POST', status: 502, plan: 'pro', durationMs: 30_000 },
  { route: '/api/v1/chat/completions', method: 'POST', status: 200, plan: 'pro', durationMs: 0.5 },
]
const UPSTREAM = [
  { model: 'openai/gpt-4o', headersMs: 90, ttftMs: 420, overheadMs: 0.05 },
  { model: 'anthropic/claude-3.5-sonnet', headersMs: 1_500, overheadMs: 0.31 },
  { model: 'openai/gpt-4o', headersMs: 100, overheadMs: 2 },
]

/** Sample lines (no HELP/TYPE) of the families named. */
function series(text: string, names: string[]): string[] {
  return text.split('\n').filter((l) => l !== '' && !l.startsWith('#') && names.some((n) => l.startsWith(`${n}{`) || l.startsWith(`${n}_`) || l.startsWith(`${n} `)))
}

t.test('requests, durations, upstream timings and tokens: the series prom-client would write', async (t) => {
  const m = createMetrics({ collectDefault: false })
  const registry = new Registry()
  const registers = [registry]
  const requests = new Counter({ name: 'recallgate_http_requests_total', help: '-', labelNames: ['route', 'method', 'status', 'plan'], registers })
  const duration = new Histogram({ name: 'recallgate_http_request_duration_seconds', help: '-', labelNames: ['route', 'method', 'status_class'], buckets: [...BUCKETS.request], registers })
  const headers = new Histogram({ name: 'recallgate_upstream_headers_seconds', help: '-', labelNames: ['model'], buckets: [...BUCKETS.upstream], registers })
  const ttft = new Histogram({ name: 'recallgate_upstream_ttft_seconds', help: '-', labelNames: ['model'], buckets: [...BUCKETS.upstream], registers })
  const overhead = new Histogram({ name: 'recallgate_gateway_overhead_seconds', help: '-', buckets: [...BUCKETS.overhead], registers })
  const tokens = new Counter({ name: 'recallgate_tokens_total', help: '-', labelNames: ['model', 'type'], registers })

  const names = ['recallgate_http_requests_total', 'recallgate_http_request_duration_seconds', 'recallgate_upstream_headers_seconds', 'recallgate_upstream_ttft_seconds', 'recallgate_gateway_overhead_seconds', 'recallgate_tokens_total']
  t.same(series((await m.render()).body, names), series(await registry.metrics(), names), 'before any observation (the unlabelled histogram exports zeros)')

  for (const r of REQUESTS) {
    m.observeRequest(r)
    requests.inc({ route: r.route, method: r.method, status: String(r.status), plan: r.plan })
    duration.observe({ route: r.route, method: r.method, status_class: `${Math.floor(r.status / 100)}xx` }, r.durationMs / 1000)
  }
  for (const u of UPSTREAM) {
    m.observeUpstream(u)
    headers.observe({ model: u.model }, u.headersMs / 1000)
    if (u.ttftMs !== undefined) ttft.observe({ model: u.model }, u.ttftMs / 1000)
    overhead.observe(u.overheadMs / 1000)
    m.tokens({ model: u.model, prompt: 120, completion: 35 })
    tokens.inc({ model: u.model, type: 'prompt' }, 120)
    tokens.inc({ model: u.model, type: 'completion' }, 35)
  }
  const ours = series((await m.render()).body, names)
  t.ok(ours.length > 100, 'every bucket of every label set')
  t.same(ours, series(await registry.metrics(), names))

  m.registry.resetMetrics()
  registry.resetMetrics()
  m.observeUpstream({ model: 'openai/gpt-4o', overheadMs: 0.2 })
  overhead.observe(0.0002)
  t.same(series((await m.render()).body, names), series(await registry.metrics(), names), 'after a reset')
})
