import { once } from 'node:events'
import { createServer, request, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { PassThrough } from 'node:stream'
import t from 'tap'
import { createLogger, logRequest, REDACTED, requestLogFields } from '../src/log.js'

const PROVIDER_KEY = 'sk-or-v1-provider-secret-0123456789'
const SERVICE_KEY = 'rg_service_secret_abcdef'
const ALIAS_KEY = 'rg_alias_secret_987654'

function capture(level = 'info') {
  const stream = new PassThrough()
  let text = ''
  stream.on('data', (b: Buffer) => (text += b.toString('utf8')))
  const logger = createLogger({ level, destination: stream })
  return {
    logger,
    text: () => text,
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  }
}

t.test('a real request logged with its headers keeps no secret', async (t) => {
  const log = capture()
  const server = createServer((req, res) => {
    log.logger.info({ req }, 'incoming')
    res.end('ok')
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => server.close())
  const { port } = server.address() as AddressInfo

  const req = request({
    host: '127.0.0.1',
    port,
    path: '/api/v1/chat/completions',
    headers: { Authorization: `Bearer ${PROVIDER_KEY}`, serviceKey: SERVICE_KEY, 'X-Service-Key': ALIAS_KEY },
  })
  req.end()
  const [res] = (await once(req, 'response')) as [IncomingMessage]
  res.resume()
  await once(res, 'end')

  const text = log.text()
  for (const secret of [PROVIDER_KEY, SERVICE_KEY, ALIAS_KEY]) t.notOk(text.includes(secret), `log omits ${secret}`)
  const [line] = log.lines()
  const headers = (line?.req as { headers: Record<string, string> }).headers
  t.equal(headers.authorization, REDACTED)
  t.equal(headers.servicekey, REDACTED)
  t.equal(headers['x-service-key'], REDACTED)
  // The useful parts of the request survive redaction.
  t.equal((line?.req as { url: string }).url, '/api/v1/chat/completions')
  t.equal(headers.host, `127.0.0.1:${port}`)
})

t.test('hand-built records, nested keys and child loggers are redacted', async (t) => {
  const log = capture()
  log.logger.info(
    {
      headers: { Authorization: `Bearer ${PROVIDER_KEY}`, serviceKey: SERVICE_KEY },
      upstream: { url: 'https://openrouter.ai/api/v1', apiKey: PROVIDER_KEY },
      config: { serviceKey: SERVICE_KEY, embeddingsApiKey: PROVIDER_KEY },
      authorization: `Bearer ${PROVIDER_KEY}`,
    },
    'built by hand',
  )
  log.logger.child({ tenant: 't-1' }).warn({ auth: { serviceKey: ALIAS_KEY } }, 'child')
  const text = log.text()
  for (const secret of [PROVIDER_KEY, SERVICE_KEY, ALIAS_KEY]) t.notOk(text.includes(secret), `log omits ${secret}`)
  const [first, second] = log.lines()
  t.equal((first?.upstream as { url: string }).url, 'https://openrouter.ai/api/v1', 'non-secret siblings kept')
  t.equal(second?.tenant, 't-1')
  t.equal(second?.level, 'warn', 'levels are written as names')
  t.match(String(first?.time), /^\d{4}-\d\d-\d\dT/, 'ISO timestamps')
})

t.test('one line per request: tenant id, timings, overhead; no key field at all', async (t) => {
  const log = capture()
  logRequest(log.logger, {
    requestId: 'req-1',
    tenantId: 'tn_4f2a',
    plan: 'pro',
    method: 'POST',
    route: '/api/v1/chat/completions',
    status: 200,
    model: 'openai/gpt-4o-mini',
    stream: true,
    durationMs: 812.123456,
    upstreamMs: 800.5,
    ttftMs: 210.25,
    promptTokens: 812,
    completionTokens: 64,
  })
  logRequest(log.logger, {
    requestId: 'req-2',
    tenantId: null,
    plan: null,
    method: 'GET',
    route: '/api/v1/sessions',
    status: 401,
    durationMs: 0.4,
    errorCode: 'missing_service_key',
  })
  logRequest(log.logger, {
    requestId: 'req-3',
    tenantId: 'tn_4f2a',
    plan: 'pro',
    method: 'POST',
    route: '/api/v1/chat/completions',
    status: 502,
    durationMs: 3,
  })
  const [ok, unauthorized, failed] = log.lines()
  t.match(ok, {
    msg: 'request',
    level: 'info',
    reqId: 'req-1',
    tenant: 'tn_4f2a',
    plan: 'pro',
    status: 200,
    model: 'openai/gpt-4o-mini',
    stream: true,
    durationMs: 812.123,
    upstreamMs: 800.5,
    overheadMs: 11.623,
    ttftMs: 210.25,
    promptTokens: 812,
    completionTokens: 64,
  })
  t.match(unauthorized, { level: 'info', tenant: null, status: 401, errorCode: 'missing_service_key' })
  t.notOk('upstreamMs' in (unauthorized ?? {}), 'absent timings are omitted, not null')
  t.equal(failed?.level, 'error', '5xx logs at error')
  t.same(Object.keys(requestLogFields({ requestId: 'r', tenantId: 't', plan: 'free', method: 'GET', route: '/', status: 200, durationMs: 1 })).sort(), [
    'durationMs',
    'method',
    'plan',
    'reqId',
    'route',
    'status',
    'tenant',
  ])
})

t.test('the level filters lines', async (t) => {
  const log = capture('warn')
  log.logger.info('hidden')
  log.logger.warn('shown')
  t.same(
    log.lines().map((l) => l.msg),
    ['shown'],
  )
})
