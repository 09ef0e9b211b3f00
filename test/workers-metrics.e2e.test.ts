/**
 * `serve --workers 2` and /metrics (issue 27, item 4): a scrape answers with the whole cluster's counters summed,
 * whichever worker takes it, and the primary's start line carries one `pid`.
 */
import { request } from 'node:http'
import t from 'tap'
import { startMockUpstream } from '../src/mock-upstream.js'
import { sharedRedisUrl, skipWithout } from './helpers/services.js'
import { until } from './helpers/until.js'
import { answeredBy, fresh, startWorkers } from './helpers/workers.js'

t.setTimeout(360_000)

/** The value of one series in Prometheus text, 0 when absent. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}

/** GET /metrics on a connection of its own, like the requests: each scrape may land on either worker. */
function scrape(url: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/metrics`, { agent: false }, (res) => {
      let text = ''
      res.setEncoding('utf8').on('data', (d: string) => (text += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on('error', reject)
    req.end()
  })
}

t.test('serve --workers 2: /metrics sums both workers, whichever answers', { skip: skipWithout('redis') }, async (t) => {
  const mock = await startMockUpstream({})
  t.teardown(() => mock.close())
  const gw = await startWorkers(t, { UPSTREAM_BASE_URL: mock.url, REDIS_URL: await sharedRedisUrl(t) })

  const n = 24
  for (let i = 0; i < n; i++) t.equal(await fresh(gw.url, '/healthz'), 200)
  // The request lines say which worker answered (they are batched for up to 100 ms).
  await until(() => answeredBy(gw, '/healthz').size === 2, 'both workers to log a /healthz request')

  const series = 'recallgate_http_requests_total{route="/healthz",method="GET",status="200",plan="none"}'
  for (let i = 0; i < 6; i++) {
    const { status, text } = await scrape(gw.url)
    t.equal(status, 200)
    t.equal(sample(text, series), n, `scrape ${i + 1}: all ${n} requests, from both workers`)
    t.match(text, /^# TYPE recallgate_stored_records gauge$/m, 'gauges are there too')
  }
  // Every scrape was answered by some worker; together they were answered by both (round-robin).
  await until(() => answeredBy(gw, '/metrics').size === 2, 'both workers to have answered a scrape')

  const primary = gw.stdout().split('\n').find((l) => l.includes('recallgate primary started')) ?? ''
  t.equal(primary.match(/"pid":/g)?.length, 1, "the primary's start line has one pid")
})
