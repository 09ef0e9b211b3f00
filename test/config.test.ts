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
  const one = 'rg_Q2hvb3NlIGEgcmFuZG9tIGtleSBwbGVhc2U'
  const two = '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822c'
  const c = loadConfig({ SERVICE_KEYS: `${one}:pro, ${two}:free`, RATE_LIMITS: 'free:3,pro:7' })
  t.same([...c.serviceKeys], [[one, 'pro'], [two, 'free']], 'a generated-style key and 48 hex characters pass')
  t.equal(c.rateLimits.free, 3)
  t.equal(c.rateLimits.premium, 500, 'unset plans keep their defaults')
})

t.test('quotas: each plan has its defaults, a variable naming one plan keeps the others, none lifts one', async (t) => {
  const d = loadConfig({}).quotas
  t.same(d.free, { storedBytes: 10 * 1024 ** 2, files: 100, sessions: 100, messagesPerSession: 1000 })
  t.same(d.enterprise, { storedBytes: 10 * 1024 ** 3, files: 100_000, sessions: 1_000_000, messagesPerSession: 10_000 })
  t.same(d.unlimited, { storedBytes: Infinity, files: Infinity, sessions: Infinity, messagesPerSession: Infinity })
  const c = loadConfig({ QUOTA_FILES: 'free:3', QUOTA_STORED_BYTES: 'pro:none' }).quotas
  t.equal(c.free.files, 3)
  t.equal(c.pro.files, 1000, 'pro keeps its default files')
  t.equal(c.pro.storedBytes, Infinity)
  t.equal(c.free.storedBytes, 10 * 1024 ** 2)
})

const invalid: Array<[Record<string, string>, RegExp]> = [
  [{ PORT: 'eighty' }, /^PORT: /],
  [{ PORT: '70000' }, /^PORT: /],
  [{ UPSTREAM_BASE_URL: 'ftp://x' }, /^UPSTREAM_BASE_URL: /],
  [{ SERVICE_KEYS: 'rg_Q2hvb3NlIGEgcmFuZG9tIGtleSBwbGVhc2U:gold' }, /^SERVICE_KEYS: .*gold/],
  // Shorter than a generated key, or long but patterned: refused, named by position and never quoted.
  [{ SERVICE_KEYS: 'rg_Q2hvb3NlIGEgcmFuZG9tIGtleSBwbGVhc2U:pro,sk-test-tenant-a-0001:pro' }, /^SERVICE_KEYS: key 2 is weaker than a generated key: use at least 192 random bits/],
  [{ SERVICE_KEYS: `${'ab'.repeat(40)}:pro` }, /^SERVICE_KEYS: key 1 is weaker/],
  [{ SERVICE_KEYS: `${'a1b2c3d4e5'.repeat(3)}:pro` }, /^SERVICE_KEYS: key 1 is weaker/],
  [{ METRICS_TOKEN: 'metrics-secret' }, /^METRICS_TOKEN: the token is weaker than a generated key/],
  [{ QUOTA_FILES: 'free:ten' }, /^QUOTA_FILES: free must be a whole number of files ≥ 1 or none/],
  [{ QUOTA_SESSIONS: 'unlimited:5' }, /^QUOTA_SESSIONS: the unlimited plan has no limit to set/],
  [{ AUTH_FAILURE_LIMIT: '-1' }, /^AUTH_FAILURE_LIMIT: /],
  [{ RATE_LIMITS: 'free:ten' }, /^RATE_LIMITS: /],
  [{ EMBEDDINGS: 'magic' }, /^EMBEDDINGS: /],
  [{ EMBEDDINGS: 'openai-compatible' }, /^EMBEDDINGS_BASE_URL: /],
  [{ CHUNK_TOKENS: '100', CHUNK_OVERLAP: '100' }, /^CHUNK_OVERLAP: /],
  [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL: /],
  [{ RAG_PHRASE_WEIGHT: '2' }, /^RAG_PHRASE_WEIGHT: must be a number from 0 to 1/],
  [{ REDIS_URL: 'http://localhost:6379' }, /^REDIS_URL: /],
  [{ RATE_LIMIT_ON_STORE_ERROR: 'maybe' }, /^RATE_LIMIT_ON_STORE_ERROR: /],
  [{ REDIS_TIMEOUT_MS: '0' }, /^REDIS_TIMEOUT_MS: /],
  [{ WORKERS: '2' }, /^WORKERS: .*REDIS_URL/],
  [{ DATABASE_URL: 'mysql://recallgate@db/recallgate' }, /^DATABASE_URL: must be a postgres:\/\/ or postgresql:\/\/ URL/],
  [{ CORS_ORIGINS: 'https://app.example, https://app.example/chat' }, /^CORS_ORIGINS: .*no path.*https:\/\/app\.example\/chat/],
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
