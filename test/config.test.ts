import t from 'tap'
import { readdirSync } from 'node:fs'
import { ConfigError, envWithDotenv, loadConfig } from '../src/config.js'
import { spawnGateway } from './helpers/child-gateway.js'

t.test('defaults match the contract', async (t) => {
  const c = loadConfig({})
  t.equal(c.port, 8080)
  t.equal(c.host, '127.0.0.1')
  t.equal(c.upstreamBaseUrl, 'https://openrouter.ai/api/v1')
  t.equal(c.dataDir, './data')
  t.equal(c.embeddings, 'local')
  t.same(c.rateLimits, { free: 10, pro: 100, premium: 500, enterprise: 1000, unlimited: Infinity })
})

t.test('SERVICE_KEYS and RATE_LIMITS parse', async (t) => {
  const c = loadConfig({ SERVICE_KEYS: 'key-one-123:pro, key-two-456:free', RATE_LIMITS: 'free:3,pro:7' })
  t.same([...c.serviceKeys], [['key-one-123', 'pro'], ['key-two-456', 'free']])
  t.equal(c.rateLimits.free, 3)
  t.equal(c.rateLimits.premium, 500, 'unset plans keep their defaults')
})

const invalid: Array<[Record<string, string>, RegExp]> = [
  [{ PORT: 'eighty' }, /^PORT: /],
  [{ PORT: '70000' }, /^PORT: /],
  [{ UPSTREAM_BASE_URL: 'ftp://x' }, /^UPSTREAM_BASE_URL: /],
  [{ SERVICE_KEYS: 'abcdefgh:gold' }, /^SERVICE_KEYS: .*gold/],
  [{ RATE_LIMITS: 'free:ten' }, /^RATE_LIMITS: /],
  [{ EMBEDDINGS: 'magic' }, /^EMBEDDINGS: /],
  [{ EMBEDDINGS: 'openai-compatible' }, /^EMBEDDINGS_BASE_URL: /],
  [{ CHUNK_TOKENS: '100', CHUNK_OVERLAP: '100' }, /^CHUNK_OVERLAP: /],
  [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL: /],
  [{ REDIS_URL: 'http://localhost:6379' }, /^REDIS_URL: /],
  [{ RATE_LIMIT_ON_STORE_ERROR: 'maybe' }, /^RATE_LIMIT_ON_STORE_ERROR: /],
  [{ REDIS_TIMEOUT_MS: '0' }, /^REDIS_TIMEOUT_MS: /],
  [{ WORKERS: '2' }, /^WORKERS: .*REDIS_URL/],
  [{ DATABASE_URL: 'mysql://recallgate@db/recallgate' }, /^DATABASE_URL: must be a postgres:\/\/ or postgresql:\/\/ URL/],
]
for (const [env, re] of invalid) {
  t.test(`invalid ${Object.keys(env).join('+')} names the variable in one line`, async (t) => {
    let caught: unknown
    try {
      loadConfig(env)
    } catch (err) {
      caught = err
    }
    t.type(caught, ConfigError)
    t.match((caught as Error).message, re)
    t.notMatch((caught as Error).message, /\n/, 'one line')
  })
}

t.test('.env is read and real variables win', async (t) => {
  const dir = t.testdir({ '.env': 'PORT=9999\nHOST=0.0.0.0\n' })
  const env = envWithDotenv({ HOST: '127.0.0.2' }, dir)
  const c = loadConfig(env)
  t.equal(c.port, 9999)
  t.equal(c.host, '127.0.0.2')
  t.same(envWithDotenv({ A: '1' }, t.testdir({})), { A: '1' }, 'no .env is fine')
})

t.test('recallgate serve with a DATABASE_URL that is not PostgreSQL refuses to start, with one line naming it', async (t) => {
  const dataDir = t.testdir({})
  // It exits long before this bound; the bound is for a loaded machine, where starting from source takes a while.
  const env = { DATA_DIR: dataDir, DATABASE_URL: 'mysql://recallgate@db/recallgate' }
  const err = await spawnGateway(env, { readyTimeoutMs: 240_000 }).then(
    async (gw) => {
      await gw.stop()
      return undefined
    },
    (e: unknown) => e as Error,
  )
  t.ok(err, 'the gateway did not start listening')
  t.match(err?.message, /gateway exited before listening \(code 2,/, 'it exited with status 2, as for any invalid configuration')
  const stderr = (err?.message ?? '').split('\nstderr: ')[1] ?? ''
  t.match(stderr, /^recallgate: invalid configuration: DATABASE_URL: must be a postgres:\/\/ or postgresql:\/\/ URL\n$/, 'stderr is the one line')
  t.equal(stderr.trimEnd().split('\n').length, 1, 'one line')
  t.same(readdirSync(dataDir), [], 'nothing was written to DATA_DIR')
})
