import t from 'tap'
import { createMetrics, OTHER } from '../src/metrics.js'

interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}
interface Exposition {
  types: Map<string, string>
  samples: Sample[]
}

/**
 * A strict reader of the Prometheus text format (0.0.4): every line must be a HELP/TYPE comment or a sample whose
 * family was declared, with well-formed labels and a number. Throws on anything else.
 */
function parseExposition(text: string): Exposition {
  const types = new Map<string, string>()
  const samples: Sample[] = []
  const name = '[a-zA-Z_:][a-zA-Z0-9_:]*'
  const sampleRe = new RegExp(`^(${name})(?:\\{(.*)\\})? (\\S+)(?: (-?\\d+))?$`)
  const labelRe = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/y
  if (!text.endsWith('\n')) throw new Error('exposition must end with a newline')
  for (const line of text.slice(0, -1).split('\n')) {
    if (line === '') continue
    if (line.startsWith('#')) {
      const m = new RegExp(`^# (HELP|TYPE) (${name}) (.*)$`).exec(line)
      if (!m) throw new Error(`bad comment line: ${line}`)
      if (m[1] === 'TYPE') {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(m[3] ?? '')) throw new Error(line)
        types.set(m[2] ?? '', m[3] ?? '')
      }
      continue
    }
    const m = sampleRe.exec(line)
    if (!m) throw new Error(`bad sample line: ${line}`)
    const labels: Record<string, string> = {}
    const body = m[2] ?? ''
    labelRe.lastIndex = 0
    while (labelRe.lastIndex < body.length) {
      const l = labelRe.exec(body)
      if (!l) throw new Error(`bad labels: ${line}`)
      labels[l[1] ?? ''] = (l[2] ?? '').replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c))
    }
    const raw = m[3] ?? ''
    // Like Prometheus (Go's ParseFloat), special values are matched ignoring case: prom-client writes "Nan".
    const special: Record<string, number> = { '+inf': Infinity, inf: Infinity, '-inf': -Infinity, nan: NaN }
    const value = special[raw.toLowerCase()] ?? Number(raw)
    if (Number.isNaN(value) && raw.toLowerCase() !== 'nan') throw new Error(`bad value: ${line}`)
    const sampleName = m[1] ?? ''
    const family = [sampleName, sampleName.replace(/_(bucket|sum|count|created)$/, '')].find((n) => types.has(n))
    if (family === undefined) throw new Error(`sample without TYPE: ${line}`)
    samples.push({ name: sampleName, labels, value })
  }
  return { types, samples }
}

function find(e: Exposition, name: string, labels: Record<string, string> = {}): Sample[] {
  return e.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
}
function value(e: Exposition, name: string, labels: Record<string, string> = {}): number | undefined {
  const found = find(e, name, labels)
  return found.length === 1 ? found[0]?.value : undefined
}

t.test('render() is valid Prometheus text holding every observation', async (t) => {
  const m = createMetrics({ collectDefault: false })
  m.observeRequest({ route: '/api/v1/chat/completions', method: 'POST', status: 200, plan: 'pro', durationMs: 812 })
  m.observeRequest({ route: '/api/v1/chat/completions', method: 'POST', status: 200, plan: 'pro', durationMs: 40 })
  m.observeRequest({ route: '/api/v1/sessions/:id', method: 'GET', status: 404, plan: 'free', durationMs: 0.3 })
  m.observeRequest({ route: '/api/v1/sessions', method: 'GET', status: 401, plan: '', durationMs: 0.1 })
  m.observeUpstream({ model: 'openai/gpt-4o-mini', headersMs: 350, ttftMs: 420, overheadMs: 0.4 })
  m.observeUpstream({ model: 'openai/gpt-4o-mini', headersMs: 90, overheadMs: -0.01 })
  m.tokens({ model: 'openai/gpt-4o-mini', prompt: 812, completion: 64 })
  m.tokens({ model: 'openai/gpt-4o-mini', prompt: 100, completion: 0 })
  m.rateLimited('free')
  m.rateLimited('free')
  m.setCollectors({
    sizes: () => ({ sessions: 3, messages: 42, files: 2, chunks: 17 }),
    corrections: () => new Map([['anthropic/claude-3.5-sonnet', 1.07]]),
  })

  const { contentType, body } = await m.render()
  t.match(contentType, /^text\/plain; version=0\.0\.4/)
  const e = parseExposition(body)

  t.equal(e.types.get('recallgate_http_requests_total'), 'counter')
  t.equal(value(e, 'recallgate_http_requests_total', { route: '/api/v1/chat/completions', method: 'POST', status: '200', plan: 'pro' }), 2)
  t.equal(value(e, 'recallgate_http_requests_total', { route: '/api/v1/sessions/:id', status: '404', plan: 'free' }), 1)
  t.equal(value(e, 'recallgate_http_requests_total', { status: '401', plan: 'none' }), 1, 'no plan before auth')

  t.equal(e.types.get('recallgate_http_request_duration_seconds'), 'histogram')
  const chat = { route: '/api/v1/chat/completions', method: 'POST', status_class: '2xx' }
  t.equal(value(e, 'recallgate_http_request_duration_seconds_count', chat), 2)
  t.ok(Math.abs((value(e, 'recallgate_http_request_duration_seconds_sum', chat) ?? 0) - 0.852) < 1e-9, 'sum in seconds')
  t.equal(value(e, 'recallgate_http_request_duration_seconds_bucket', { ...chat, le: '0.05' }), 1, '40 ms ≤ 50 ms')
  t.equal(value(e, 'recallgate_http_request_duration_seconds_bucket', { ...chat, le: '1' }), 2)
  t.equal(value(e, 'recallgate_http_request_duration_seconds_bucket', { ...chat, le: '+Inf' }), 2)

  const model = { model: 'openai/gpt-4o-mini' }
  t.equal(value(e, 'recallgate_upstream_headers_seconds_count', model), 2)
  t.equal(value(e, 'recallgate_upstream_headers_seconds_bucket', { ...model, le: '0.1' }), 1, '90 ms ≤ 100 ms')
  t.equal(value(e, 'recallgate_upstream_ttft_seconds_count', model), 1)
  t.equal(value(e, 'recallgate_upstream_ttft_seconds_sum', model), 0.42)
  t.equal(value(e, 'recallgate_gateway_overhead_seconds_count'), 2, 'negative jitter counts as zero overhead')
  t.equal(value(e, 'recallgate_gateway_overhead_seconds_bucket', { le: '0.0005' }), 2, 'sub-millisecond buckets')
  t.equal(value(e, 'recallgate_gateway_overhead_seconds_bucket', { le: '0.0001' }), 1)

  t.equal(value(e, 'recallgate_tokens_total', { ...model, type: 'prompt' }), 912)
  t.equal(value(e, 'recallgate_tokens_total', { ...model, type: 'completion' }), 64)
  t.equal(value(e, 'recallgate_rate_limited_total', { plan: 'free' }), 2)

  t.equal(value(e, 'recallgate_stored_records', { kind: 'sessions' }), 3)
  t.equal(value(e, 'recallgate_stored_records', { kind: 'messages' }), 42)
  t.equal(value(e, 'recallgate_stored_records', { kind: 'files' }), 2)
  t.equal(value(e, 'recallgate_stored_records', { kind: 'chunks' }), 17)
  t.equal(value(e, 'recallgate_token_count_correction', { model: 'anthropic/claude-3.5-sonnet' }), 1.07)
  t.notOk(body.includes('process_resident_memory_bytes'), 'no process metrics unless asked')
})

t.test('collectors are read on every scrape', async (t) => {
  const m = createMetrics({ collectDefault: false })
  let sessions = 1
  m.setCollectors({ sizes: () => ({ sessions, messages: 0, files: 0, chunks: 0 }) })
  t.equal(value(parseExposition((await m.render()).body), 'recallgate_stored_records', { kind: 'sessions' }), 1)
  sessions = 5
  t.equal(value(parseExposition((await m.render()).body), 'recallgate_stored_records', { kind: 'sessions' }), 5)
})

t.test('a throwing collector empties its gauge and is counted; the scrape still succeeds', async (t) => {
  const m = createMetrics({ collectDefault: false })
  m.observeRequest({ route: '/healthz', method: 'GET', status: 200, plan: 'none', durationMs: 0.1 })
  m.setCollectors({
    sizes: () => {
      throw new Error('store closed')
    },
    corrections: () => new Map([['openai/gpt-4o', 1]]),
  })
  const e = parseExposition((await m.render()).body)
  t.same(find(e, 'recallgate_stored_records'), [])
  t.equal(value(e, 'recallgate_metrics_collector_errors_total', { collector: 'sizes' }), 1)
  t.equal(value(e, 'recallgate_token_count_correction', { model: 'openai/gpt-4o' }), 1)
  t.equal(value(e, 'recallgate_http_requests_total', { route: '/healthz' }), 1)
})

t.test('model and route labels are capped; the overflow is counted as other', async (t) => {
  const m = createMetrics({ collectDefault: false, maxModels: 3, maxRoutes: 2 })
  for (let i = 0; i < 10; i++) m.tokens({ model: `vendor/model-${i}`, prompt: 1, completion: 1 })
  m.tokens({ model: 'vendor/model-0', prompt: 5, completion: 0 })
  for (const route of ['/a', '/b', '/c', '/d']) m.observeRequest({ route, method: 'BREW', status: 999, plan: 'pro', durationMs: 1 })
  m.setCollectors({ corrections: () => new Map([['vendor/model-1', 1.1], ['vendor/model-9', 1.2]]) })

  const e = parseExposition((await m.render()).body)
  const models = new Set(find(e, 'recallgate_tokens_total').map((s) => s.labels.model))
  t.same([...models].sort(), [OTHER, 'vendor/model-0', 'vendor/model-1', 'vendor/model-2'])
  t.equal(value(e, 'recallgate_tokens_total', { model: OTHER, type: 'prompt' }), 7)
  t.equal(value(e, 'recallgate_tokens_total', { model: 'vendor/model-0', type: 'prompt' }), 6, 'a known model keeps its slot')
  const routes = find(e, 'recallgate_http_requests_total')
  t.same(routes.map((s) => [s.labels.route, s.labels.method, s.labels.status, s.value]), [
    ['/a', 'OTHER', '0', 1],
    ['/b', 'OTHER', '0', 1],
    [OTHER, 'OTHER', '0', 2],
  ])
  t.same(
    find(e, 'recallgate_token_count_correction').map((s) => s.labels.model),
    ['vendor/model-1'],
    'a gauge has no "other" series: models past the cap are left out',
  )
  // Huge label values are cut so one request cannot bloat every scrape.
  const m2 = createMetrics({ collectDefault: false })
  m2.tokens({ model: 'x'.repeat(10_000), prompt: 1, completion: 0 })
  const [long] = find(parseExposition((await m2.render()).body), 'recallgate_tokens_total')
  t.equal(long?.labels.model, 'x'.repeat(120))
})

t.test('process metrics on request, and registries are independent', async (t) => {
  const a = createMetrics({ collectDefault: true })
  const b = createMetrics({ collectDefault: true })
  a.rateLimited('pro')
  const ea = parseExposition((await a.render()).body)
  const eb = parseExposition((await b.render()).body)
  t.ok(value(ea, 'process_resident_memory_bytes'), 'rss')
  t.ok(ea.types.has('nodejs_eventloop_lag_seconds'), 'event loop lag')
  t.equal(value(ea, 'recallgate_rate_limited_total', { plan: 'pro' }), 1)
  t.same(find(eb, 'recallgate_rate_limited_total'), [], 'b did not see a’s observation')
})
