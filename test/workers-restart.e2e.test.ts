/**
 * A worker that crashes under `serve --workers 2` (README, Scaling: the primary restarts a worker that dies): kill -9
 * one worker; the primary forks another, requests on the shared port keep being answered (by the survivor meanwhile,
 * then by both), what was saved before the crash is still there, and SIGINT to the primary drains both and exits 0.
 * `--workers` above 1 needs REDIS_URL (shared limits): test/helpers/services.ts provides a Redis.
 */
import { request } from 'node:http'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import t from 'tap'
import { startMockUpstream } from '../src/mock-upstream.js'
import { spawnGateway, type ChildGateway } from './helpers/child-gateway.js'
import { sharedRedisUrl, skipWithout } from './helpers/services.js'
import { until } from './helpers/until.js'

const KEY = 'sk-workers-restart-0001-Vq8Zr3Lw5Ym2'

/** A request on a connection of its own, so node:cluster's round-robin spreads them over the workers. */
function fresh(url: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { agent: false, headers: { serviceKey: KEY } }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', reject)
    req.end()
  })
}

interface LogLine {
  msg?: string
  pid?: number
  route?: string
}

function logLines(gw: ChildGateway): LogLine[] {
  return gw
    .stdout()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine)
}

/** Workers that logged "recallgate listening", in order (the primary never listens itself). */
const listeningPids = (gw: ChildGateway): number[] => logLines(gw).flatMap((l) => (l.msg === 'recallgate listening' && l.pid !== undefined ? [l.pid] : []))
/** Workers that answered GET /api/v1/sessions/:id so far. */
const answeredBy = (gw: ChildGateway): Set<number> =>
  new Set(logLines(gw).flatMap((l) => (l.route === '/api/v1/sessions/:id' && l.pid !== undefined ? [l.pid] : [])))

t.test('serve --workers 2: a worker killed with -9 is replaced and requests keep being answered', { skip: skipWithout('redis') }, async (t) => {
  const redisUrl = await sharedRedisUrl(t)
  const mock = await startMockUpstream({})
  const dataDir = mkdtempSync(join(tmpdir(), 'recallgate-workers-restart-'))
  t.teardown(async () => {
    await mock.close()
    rmSync(dataDir, { recursive: true, force: true })
  })
  const gw = await spawnGateway(
    { DATA_DIR: dataDir, UPSTREAM_BASE_URL: mock.url, SERVICE_KEYS: `${KEY}:unlimited`, REDIS_URL: redisUrl, REDIS_TIMEOUT_MS: '10000' },
    { args: ['--workers', '2'] },
  )
  t.teardown(() => gw.stop())
  await until(() => listeningPids(gw).length >= 2, 'both workers of serve --workers 2 to log "recallgate listening"')
  const [victim, survivor] = listeningPids(gw) as [number, number]

  const client = new OpenAI({ baseURL: `${gw.url}/api/v1`, apiKey: 'sk-or-workers-provider', defaultHeaders: { serviceKey: KEY }, maxRetries: 0 })
  await client.chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Remember the number 42.' }], ...({ sessionId: 'kept', useRAG: false } as object) })

  process.kill(victim, 'SIGKILL')
  await until(() => logLines(gw).some((l) => l.msg === 'worker exited; starting another'), 'the primary to see the worker exit')
  // Until its replacement listens, the survivor takes every connection.
  for (let i = 0; i < 4; i++) t.equal(await fresh(gw.url, '/api/v1/sessions/kept'), 200, 'answered while a worker is down')

  await until(() => listeningPids(gw).length >= 3, 'the primary to fork a replacement that listens')
  const replacement = listeningPids(gw)[2] as number
  t.not(replacement, victim, 'a new process')
  t.not(replacement, survivor)
  const statuses: number[] = []
  await until(
    async () => {
      statuses.push(await fresh(gw.url, '/api/v1/sessions/kept'))
      return answeredBy(gw).has(replacement)
    },
    'the replacement worker to answer a request',
  )
  t.ok(statuses.every((s) => s === 200), `all ${statuses.length} requests after the restart answered 200`)
  const reply = await client.chat.completions.create({
    model: 'openai/gpt-4o',
    messages: [{ role: 'user', content: 'What number?' }],
    ...({ sessionId: 'kept', useRAG: false } as object),
  })
  t.equal((reply as unknown as { _metadata: { memory: { historyMessages: number } } })._metadata.memory.historyMessages, 2, 'the exchange saved before the crash is in the history')

  gw.proc.kill('SIGINT')
  t.same(await gw.exited, { code: 0, signal: null }, 'SIGINT to the primary drains the workers and exits 0')
})
