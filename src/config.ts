/**
 * The one configuration module. `loadConfig(env)` turns environment variables into a validated, typed `Config`;
 * nothing else in `src/` reads `process.env` (the composition root passes it in). Every variable, its default and its
 * edge cases are listed in `DEFAULTS`/`VARIABLES` below and in the README's configuration table.
 * An invalid value throws `ConfigError` whose message is one line naming the variable.
 */
import { readFileSync } from 'node:fs'
import { parseEnv } from 'node:util'
import { GENERATED_KEY_BITS, secretBits } from './auth/service-keys.js'
import { PLANS, type Bytes, type Ms, type Plan, type PlanQuotas, type Tokens } from './types.js'

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable}: ${problem}`)
    this.name = 'ConfigError'
  }
}

export type EmbeddingsMode = 'local' | 'openai-compatible'

export interface Config {
  port: number
  host: string
  upstreamBaseUrl: string
  dataDir: string
  /** Inline keys from SERVICE_KEYS: raw key → plan. */
  serviceKeys: Map<string, Plan>
  /** Opens /api/v1/admin/* (`Authorization: Bearer …`); none = those routes answer 404. Never a service key. */
  adminKey: string | undefined
  /** Requests per minute per plan; `unlimited` is always Infinity. */
  rateLimits: Record<Plan, number>
  /** Max distinct keys whose buckets are kept in memory (least recently used evicted). */
  rateLimitMaxKeys: number
  /** What each plan's tenants may keep (src/quotas/); `unlimited` has none. */
  quotas: Record<Plan, PlanQuotas>
  /** Failed authentications per minute per client address before they are answered 429; 0 = no limit. */
  authFailuresPerMinute: number
  /** Client addresses whose failures are counted at once (least recently used forgotten). */
  authFailureMaxAddresses: number
  /** Bearer token GET /metrics requires (METRICS_TOKEN); none = open, for a port only the deployment reaches. */
  metricsToken: string | undefined

  logLevel: string
  /** Optional OpenRouter attribution headers. */
  httpReferer: string | undefined
  xTitle: string | undefined

  /** Request body limit for JSON endpoints. */
  maxBodyBytes: Bytes
  /** Upload limit for POST /api/v1/files. */
  maxFileBytes: Bytes
  maxHeaderBytes: Bytes
  /** Most bytes of a refused request's body read and discarded after the answer, so the client sees it (http/drain.ts). */
  maxDrainBytes: Bytes
  maxMessages: number
  maxSessionIdLength: number
  maxChunksPerFile: number
  /**
   * Vectors of one tenant's knowledge base searched exactly while they wait for the HNSW graph (INDEX_FRESH_MAX): an
   * upload answers before its graph insertions, which run in the background (retrieval/fresh-vectors.ts).
   */
  indexFreshMax: number
  /** Time a client has to send its headers / whole body. */
  requestTimeout: Ms
  headersTimeout: Ms

  upstreamConnectTimeout: Ms
  upstreamHeadersTimeout: Ms
  /** Max silence between two body chunks of an upstream response (stream idle timeout). */
  upstreamBodyTimeout: Ms
  upstreamConnections: number
  modelsCacheTtl: Ms
  /** /readyz also requires the upstream to answer GET /models at UPSTREAM_BASE_URL (READY_CHECK_UPSTREAM=1). */
  readyCheckUpstream: boolean
  /** /readyz answers 503 until the start's preload of tenants' indexes has finished (READY_AFTER_WARMUP=1). */
  readyAfterWarmup: boolean
  /** Origins whose browser pages may call the API (CORS_ORIGINS): `['*']` for any, empty for none (no CORS headers). */
  corsOrigins: string[]

  /** Window used for models the upstream's list does not know. */
  defaultContextLength: Tokens
  /** Reply reserve when the request has no max_completion_tokens or max_tokens. */
  defaultMaxTokens: Tokens
  /** Tokens counted for an image whose size cannot be read without a download (a remote URL), and per file part. */
  mediaTokens: { image: Tokens; file: Tokens }
  /** Extra share of the window kept free for non-OpenAI vendors, by vendor prefix (`anthropic` → 0.1). */
  tokenMargins: Record<string, number>
  maxHistoryMessages: number
  /** The kept history's start moves in steps of this many messages when it does not fit (context/packer.ts). */
  historyStep: number
  /** `auto`: cache breakpoints for providers that need them (Anthropic); `off`: never touch cache_control. */
  promptCache: 'auto' | 'off'
  /** Messages kept per session; older ones are pruned on save. */
  maxSessionMessages: number

  /** Share of the window retrieved file context may take, and its top-k. */
  ragBudgetShare: number
  ragMaxTokens: Tokens
  ragTopK: number
  /** Relevance gate (knowledge/relevance.ts): below min nothing is retrieved, below full only the best chunk. */
  ragMinRelevance: number
  ragFullRelevance: number
  /** Above RAG_FULL_RELEVANCE, each chunk's own relevance must reach this to go in (knowledge/relevance.ts hitFloor). */
  ragChunkMinRelevance: number
  /** Above RAG_FULL_RELEVANCE, a chunk's BM25 score must reach this share of the best one's (knowledge/relevance.ts scoreRatio). */
  ragScoreRatio: number
  /**
   * `/files/search`'s default `min_relevance`: a search the caller asked for, not the prompt's token bill, so looser than
   * the chat gate's RAG_MIN_RELEVANCE (a 60-character slice of an upload scores ~0.31: its cut words are in no file).
   */
  ragSearchMinRelevance: number
  /** Below RAG_FULL_RELEVANCE, at most this many chunks (the best, then those within RAG_SCORE_RATIO of it; relevance.ts marginalHits). */
  ragMarginalHits: number
  /** Sentences kept either side of a focused excerpt's best one; -1: excerpts are never cut (relevance.ts focusNeighbours). */
  ragFocusNeighbours: number
  /** Weight of the query's word pairs found side by side in a chunk's relevance; 0: its terms alone (Bm25Index.relevance). */
  ragPhraseWeight: number
  chunkTokens: Tokens
  chunkOverlap: Tokens

  /** Share of the history budget kept for the newest turns when recall is on (the rest goes to recalled turns). */
  recallRecentShare: number
  recallEnabled: boolean
  /** Most tokens the block of recalled older turns may take (framing included). */
  recallMaxTokens: Tokens
  /** Most turns each ranking (BM25, vectors) offers recall per request (fewer when the block's room is small). */
  recallTopK: number
  /** The previous recall block is sent again while it holds this many of the query's best hits (0: never). */
  recallKeepTop: number
  /** Sessions whose recall indexes stay loaded in memory (least recently used evicted). */
  recallLoadedSessions: number
  /** Request traces kept per tenant (the console's requests view, /api/v1/requests); 0 records none. */
  requestTraces: number

  embeddings: EmbeddingsMode
  embeddingsBaseUrl: string | undefined
  embeddingsModel: string | undefined
  embeddingsApiKey: string | undefined

  shutdownGrace: Ms

  /** Shared rate limits (`redis://` or `rediss://`); none = each process limits on its own. */
  redisUrl: string | undefined
  /** Longest wait for one Redis command (and for connecting) before the check counts as a store error. */
  redisTimeout: Ms
  /** After a Redis error, how long checks go straight to the fallback before Redis is tried again. */
  redisRetry: Ms
  /** Prefix of every key recallgate writes to Redis (several deployments can share one Redis). */
  redisKeyPrefix: string
  /** What a rate check does when the shared store cannot answer: the local limiter decides, or 503. */
  rateLimitOnStoreError: 'allow' | 'deny'
  /** Processes `recallgate serve` runs on the one port (node:cluster). More than 1 needs REDIS_URL. */
  workers: number
  /** The most the LMDB environment may hold; writes but deletes are refused (507) at it. */
  lmdbMapSize: Bytes
  /** Bytes kept free on DATA_DIR's disk: uploads that would go below are refused (507) before they start. 0: off. */
  minFreeDisk: Bytes
  /** Bounds on reading one uploaded file (knowledge/prepare-pool.ts, ingest/pdf-streams.ts). */
  extract: {
    /** Extractions at once (worker threads). */
    concurrency: number
    timeout: Ms
    /** Each extraction thread's V8 heap ceiling. */
    workerMemoryMb: number
    /** What a PDF's compressed streams may decode to, in all. */
    maxDecodedBytes: Bytes
    /** Characters of text one file may yield. */
    maxTextChars: number
  }

  /**
   * PostgreSQL (`postgres://` or `postgresql://`) as the store of keys, sessions, stored responses and conversations,
   * shared by every replica; none = the embedded LMDB store in DATA_DIR (storage/open-stores.ts picks).
   */
  databaseUrl: string | undefined
  /** Connections each process keeps to PostgreSQL at most. */
  databasePoolSize: number
  /** Longest wait for one PostgreSQL statement, and for a free connection; past it the request gets a 503. */
  databaseStatementTimeout: Ms
}

/** Defaults in one object (pino style). */
export const DEFAULTS = {
  PORT: '8080',
  HOST: '127.0.0.1',
  UPSTREAM_BASE_URL: 'https://openrouter.ai/api/v1',
  DATA_DIR: './data',
  SERVICE_KEYS: '',
  ADMIN_KEY: '',
  RATE_LIMITS: 'free:10,pro:100,premium:500,enterprise:1000',
  RATE_LIMIT_MAX_KEYS: '10000',
  QUOTA_STORED_BYTES: `free:${10 * 1024 ** 2},pro:${100 * 1024 ** 2},premium:${1024 ** 3},enterprise:${10 * 1024 ** 3}`,
  QUOTA_FILES: 'free:100,pro:1000,premium:10000,enterprise:100000',
  QUOTA_SESSIONS: 'free:100,pro:10000,premium:100000,enterprise:1000000',
  QUOTA_SESSION_MESSAGES: 'free:1000,pro:10000,premium:10000,enterprise:10000',
  AUTH_FAILURE_LIMIT: '30',
  AUTH_FAILURE_MAX_ADDRESSES: '10000',
  METRICS_TOKEN: '',
  LOG_LEVEL: 'info',
  HTTP_REFERER: '',
  X_TITLE: '',
  MAX_BODY_BYTES: String(4 * 1024 * 1024),
  MAX_FILE_BYTES: String(20 * 1024 * 1024),
  MAX_HEADER_BYTES: String(16 * 1024),
  MAX_DRAIN_BYTES: String(64 * 1024 * 1024),
  MAX_MESSAGES: '1000',
  MAX_SESSION_ID_LENGTH: '256',
  MAX_CHUNKS_PER_FILE: '20000',
  INDEX_FRESH_MAX: '20000',
  REQUEST_TIMEOUT_MS: '30000',
  HEADERS_TIMEOUT_MS: '10000',
  UPSTREAM_CONNECT_TIMEOUT_MS: '10000',
  UPSTREAM_HEADERS_TIMEOUT_MS: '120000',
  UPSTREAM_BODY_TIMEOUT_MS: '120000',
  UPSTREAM_CONNECTIONS: '1024',
  MODELS_CACHE_TTL_MS: '300000',
  READY_CHECK_UPSTREAM: '0',
  READY_AFTER_WARMUP: '0',
  CORS_ORIGINS: '',
  DEFAULT_CONTEXT_LENGTH: '8192',
  DEFAULT_MAX_TOKENS: '1024',
  IMAGE_TOKENS_ESTIMATE: '765',
  FILE_TOKENS_ESTIMATE: '1000',
  TOKEN_MARGINS: 'openai:0,anthropic:0.15,google:0.15,meta-llama:0.1,mistralai:0.15,*:0.1',
  MAX_HISTORY_MESSAGES: '400',
  HISTORY_STEP: '64',
  PROMPT_CACHE: 'auto',
  MAX_SESSION_MESSAGES: '10000',
  RAG_BUDGET_SHARE: '0.25',
  RAG_MAX_TOKENS: '1000',
  RAG_TOP_K: '8',
  RAG_MIN_RELEVANCE: '0.25',
  RAG_FULL_RELEVANCE: '0.3',
  RAG_CHUNK_MIN_RELEVANCE: '0.2',
  RAG_SCORE_RATIO: '0.5',
  RAG_MARGINAL_HITS: '2',
  RAG_SEARCH_MIN_RELEVANCE: '0.2',
  RAG_FOCUS_NEIGHBOURS: '1',
  RAG_PHRASE_WEIGHT: '0.5',
  CHUNK_TOKENS: '192',
  CHUNK_OVERLAP: '80',
  RECALL: 'on',
  RECALL_RECENT_SHARE: '0.2',
  RECALL_MAX_TOKENS: '2400',
  RECALL_TOP_K: '100',
  RECALL_KEEP_TOP: '0',
  RECALL_LOADED_SESSIONS: '64',
  REQUEST_TRACES: '100',
  EMBEDDINGS: 'local',
  EMBEDDINGS_BASE_URL: '',
  EMBEDDINGS_MODEL: '',
  EMBEDDINGS_API_KEY: '',
  SHUTDOWN_GRACE_MS: '10000',
  REDIS_URL: '',
  REDIS_TIMEOUT_MS: '100',
  REDIS_RETRY_MS: '1000',
  REDIS_KEY_PREFIX: 'recallgate:',
  RATE_LIMIT_ON_STORE_ERROR: 'allow',
  WORKERS: '1',
  LMDB_MAP_SIZE: String(32 * 1024 ** 3),
  MIN_FREE_DISK: String(256 * 1024 ** 2),
  EXTRACT_CONCURRENCY: '2',
  EXTRACT_TIMEOUT_MS: '60000',
  EXTRACT_WORKER_MEMORY_MB: '1024',
  EXTRACT_MAX_DECODED_BYTES: String(128 * 1024 ** 2),
  EXTRACT_MAX_TEXT_CHARS: String(32 * 1024 ** 2),
  DATABASE_URL: '',
  DATABASE_POOL_SIZE: '10',
  DATABASE_STATEMENT_TIMEOUT_MS: '5000',
} as const

export type Variable = keyof typeof DEFAULTS
export type Env = Readonly<Record<string, string | undefined>>

/**
 * Read `.env` from `cwd` if it exists and overlay the real environment on it (real variables win, as with dotenv).
 * A missing file is the normal case and is not an error.
 */
export function envWithDotenv(env: Env, cwd: string): Env {
  let text: string
  try {
    text = readFileSync(`${cwd}/.env`, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return env
    throw new ConfigError('.env', `cannot be read: ${(err as Error).message}`)
  }
  return { ...parseEnv(text), ...env }
}

export function loadConfig(env: Env): Config {
  const get = (name: Variable): string => {
    const v = env[name]
    return v === undefined || v === '' ? DEFAULTS[name] : v.trim()
  }
  const optional = (name: Variable): string | undefined => get(name) || undefined

  const int = (name: Variable, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    const raw = get(name)
    if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`)
    const n = Number(raw)
    if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`)
    return n
  }
  const share = (name: Variable): number => {
    const raw = get(name)
    const n = Number(raw)
    if (raw === '' || !Number.isFinite(n) || n < 0 || n > 1)
      throw new ConfigError(name, `must be a number from 0 to 1, got "${raw}"`)
    return n
  }
  const url = (name: Variable): string => {
    const raw = get(name)
    let u: URL
    try {
      u = new URL(raw)
    } catch {
      throw new ConfigError(name, `must be an http(s) URL, got "${raw}"`)
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new ConfigError(name, `must be an http(s) URL, got "${raw}"`)
    return raw.replace(/\/+$/, '')
  }

  const rateLimits = parseRateLimits(get('RATE_LIMITS'))
  const serviceKeys = parseServiceKeys(get('SERVICE_KEYS'))
  const adminKey = optional('ADMIN_KEY')
  // It manages every tenant's keys: as strong as a generated key, and never one a tenant also holds.
  if (adminKey !== undefined && secretBits(adminKey) < GENERATED_KEY_BITS) throw new ConfigError('ADMIN_KEY', weakSecret('the admin key'))
  if (adminKey !== undefined && serviceKeys.has(adminKey)) throw new ConfigError('ADMIN_KEY', 'must not be one of the SERVICE_KEYS')
  const quotas = parseQuotas((name) => get(name))
  const metricsToken = optional('METRICS_TOKEN')
  if (metricsToken !== undefined && secretBits(metricsToken) < GENERATED_KEY_BITS)
    throw new ConfigError('METRICS_TOKEN', weakSecret('the token'))

  const embeddings = get('EMBEDDINGS')
  if (embeddings !== 'local' && embeddings !== 'openai-compatible')
    throw new ConfigError('EMBEDDINGS', `must be "local" or "openai-compatible", got "${embeddings}"`)
  if (embeddings === 'openai-compatible') {
    if (!optional('EMBEDDINGS_BASE_URL'))
      throw new ConfigError('EMBEDDINGS_BASE_URL', 'is required when EMBEDDINGS=openai-compatible')
    url('EMBEDDINGS_BASE_URL')
    if (!optional('EMBEDDINGS_MODEL'))
      throw new ConfigError('EMBEDDINGS_MODEL', 'is required when EMBEDDINGS=openai-compatible')
  }

  const onStoreError = get('RATE_LIMIT_ON_STORE_ERROR')
  if (onStoreError !== 'allow' && onStoreError !== 'deny')
    throw new ConfigError('RATE_LIMIT_ON_STORE_ERROR', `must be "allow" or "deny", got "${onStoreError}"`)
  const redisUrl = optional('REDIS_URL')
  if (redisUrl !== undefined && !/^rediss?:\/\/[^\s]+$/.test(redisUrl))
    throw new ConfigError('REDIS_URL', 'must be a redis:// or rediss:// URL')

  const workers = int('WORKERS', 1, 256)
  if (workers > 1 && redisUrl === undefined)
    throw new ConfigError(
      'WORKERS',
      `${workers} processes need REDIS_URL: without a shared store each would enforce the whole rate limit on its own`,
    )

  const readyCheckUpstream = get('READY_CHECK_UPSTREAM')
  if (readyCheckUpstream !== '0' && readyCheckUpstream !== '1')
    throw new ConfigError('READY_CHECK_UPSTREAM', `must be 0 or 1, got "${readyCheckUpstream}"`)
  const readyAfterWarmup = get('READY_AFTER_WARMUP')
  if (readyAfterWarmup !== '0' && readyAfterWarmup !== '1') throw new ConfigError('READY_AFTER_WARMUP', `must be 0 or 1, got "${readyAfterWarmup}"`)
  const corsOrigins = get('CORS_ORIGINS')
    .split(',')
    .map((o) => o.trim())
    .filter((o) => o !== '')
  for (const o of corsOrigins)
    if (o !== '*' && !/^https?:\/\/[^\s/?#]+$/.test(o))
      throw new ConfigError('CORS_ORIGINS', `each origin is scheme://host[:port] with no path (or * for any), got "${o}"`)
  // The PostgreSQL store: the one place its settings are read (storage/open-stores.ts chooses the engine from them).
  const databaseUrl = optional('DATABASE_URL')
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\/[^\s]+$/.test(databaseUrl))
    throw new ConfigError('DATABASE_URL', 'must be a postgres:// or postgresql:// URL')

  const recall = get('RECALL')
  if (recall !== 'on' && recall !== 'off') throw new ConfigError('RECALL', `must be "on" or "off", got "${recall}"`)
  const promptCache = get('PROMPT_CACHE')
  if (promptCache !== 'auto' && promptCache !== 'off')
    throw new ConfigError('PROMPT_CACHE', `must be "auto" or "off", got "${promptCache}"`)

  const requestTimeout = int('REQUEST_TIMEOUT_MS', 100)
  const headersTimeout = int('HEADERS_TIMEOUT_MS', 100)
  // node:http refuses (throws at startup) a headers timeout longer than the whole-request timeout.
  if (headersTimeout > requestTimeout)
    throw new ConfigError('HEADERS_TIMEOUT_MS', `must not exceed REQUEST_TIMEOUT_MS (${requestTimeout}), got ${headersTimeout}`)

  const chunkTokens = int('CHUNK_TOKENS', 16, 8192)
  const chunkOverlap = int('CHUNK_OVERLAP', 0, 4096)
  if (chunkOverlap >= chunkTokens)
    throw new ConfigError('CHUNK_OVERLAP', `must be smaller than CHUNK_TOKENS (${chunkTokens}), got ${chunkOverlap}`)

  return {
    port: int('PORT', 0, 65535),
    host: get('HOST'),
    upstreamBaseUrl: url('UPSTREAM_BASE_URL'),
    dataDir: get('DATA_DIR'),
    serviceKeys,
    adminKey,
    rateLimits,
    rateLimitMaxKeys: int('RATE_LIMIT_MAX_KEYS', 1),
    quotas,
    authFailuresPerMinute: int('AUTH_FAILURE_LIMIT', 0, 1_000_000),
    authFailureMaxAddresses: int('AUTH_FAILURE_MAX_ADDRESSES', 1),
    metricsToken,
    logLevel: parseLogLevel(get('LOG_LEVEL')),
    httpReferer: optional('HTTP_REFERER'),
    xTitle: optional('X_TITLE'),
    maxBodyBytes: int('MAX_BODY_BYTES', 1024),
    maxFileBytes: int('MAX_FILE_BYTES', 1024),
    maxHeaderBytes: int('MAX_HEADER_BYTES', 1024),
    maxDrainBytes: int('MAX_DRAIN_BYTES', 0),
    maxMessages: int('MAX_MESSAGES', 1),
    maxSessionIdLength: int('MAX_SESSION_ID_LENGTH', 1, 512),
    maxChunksPerFile: int('MAX_CHUNKS_PER_FILE', 1),
    indexFreshMax: int('INDEX_FRESH_MAX', 0, 1_000_000),
    requestTimeout,
    headersTimeout,
    upstreamConnectTimeout: int('UPSTREAM_CONNECT_TIMEOUT_MS', 10),
    upstreamHeadersTimeout: int('UPSTREAM_HEADERS_TIMEOUT_MS', 10),
    upstreamBodyTimeout: int('UPSTREAM_BODY_TIMEOUT_MS', 10),
    upstreamConnections: int('UPSTREAM_CONNECTIONS', 1, 65535),
    modelsCacheTtl: int('MODELS_CACHE_TTL_MS', 0),
    readyCheckUpstream: readyCheckUpstream === '1',
    readyAfterWarmup: readyAfterWarmup === '1',
    corsOrigins,
    defaultContextLength: int('DEFAULT_CONTEXT_LENGTH', 256),
    defaultMaxTokens: int('DEFAULT_MAX_TOKENS', 1),
    mediaTokens: { image: int('IMAGE_TOKENS_ESTIMATE', 0), file: int('FILE_TOKENS_ESTIMATE', 0) },
    tokenMargins: parseMargins(get('TOKEN_MARGINS')),
    maxHistoryMessages: int('MAX_HISTORY_MESSAGES', 0),
    historyStep: int('HISTORY_STEP', 1, 4096),
    promptCache,
    maxSessionMessages: int('MAX_SESSION_MESSAGES', 2),
    ragBudgetShare: share('RAG_BUDGET_SHARE'),
    ragMaxTokens: int('RAG_MAX_TOKENS', 0),
    ragTopK: int('RAG_TOP_K', 1, 100),
    ragMinRelevance: share('RAG_MIN_RELEVANCE'),
    ragFullRelevance: share('RAG_FULL_RELEVANCE'),
    ragChunkMinRelevance: share('RAG_CHUNK_MIN_RELEVANCE'),
    ragScoreRatio: share('RAG_SCORE_RATIO'),
    ragMarginalHits: int('RAG_MARGINAL_HITS', 1, 100),
    ragSearchMinRelevance: share('RAG_SEARCH_MIN_RELEVANCE'),
    ragFocusNeighbours: get('RAG_FOCUS_NEIGHBOURS') === '-1' ? -1 : int('RAG_FOCUS_NEIGHBOURS', 0, 20),
    ragPhraseWeight: share('RAG_PHRASE_WEIGHT'),
    chunkTokens,
    chunkOverlap,
    recallEnabled: recall === 'on',
    recallRecentShare: share('RECALL_RECENT_SHARE'),
    recallMaxTokens: int('RECALL_MAX_TOKENS', 0),
    recallTopK: int('RECALL_TOP_K', 1, 1000),
    recallKeepTop: int('RECALL_KEEP_TOP', 0, 1000),
    recallLoadedSessions: int('RECALL_LOADED_SESSIONS', 1),
    requestTraces: int('REQUEST_TRACES', 0, 10_000),
    embeddings,
    embeddingsBaseUrl: embeddings === 'openai-compatible' ? url('EMBEDDINGS_BASE_URL') : undefined,
    embeddingsModel: optional('EMBEDDINGS_MODEL'),
    embeddingsApiKey: optional('EMBEDDINGS_API_KEY'),
    shutdownGrace: int('SHUTDOWN_GRACE_MS', 0),
    redisUrl,
    redisTimeout: int('REDIS_TIMEOUT_MS', 1, 60_000),
    redisRetry: int('REDIS_RETRY_MS', 0, 600_000),
    redisKeyPrefix: get('REDIS_KEY_PREFIX'),
    rateLimitOnStoreError: onStoreError,
    workers,
    lmdbMapSize: int('LMDB_MAP_SIZE', 1024 * 1024),
    minFreeDisk: int('MIN_FREE_DISK', 0),
    extract: {
      concurrency: int('EXTRACT_CONCURRENCY', 1, 64),
      timeout: int('EXTRACT_TIMEOUT_MS', 100),
      workerMemoryMb: int('EXTRACT_WORKER_MEMORY_MB', 64, 65536),
      maxDecodedBytes: int('EXTRACT_MAX_DECODED_BYTES', 1024),
      maxTextChars: int('EXTRACT_MAX_TEXT_CHARS', 1024),
    },
    databaseUrl,
    databasePoolSize: int('DATABASE_POOL_SIZE', 1, 1000),
    databaseStatementTimeout: int('DATABASE_STATEMENT_TIMEOUT_MS', 10, 600_000),
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']
function parseLogLevel(raw: string): string {
  if (!LOG_LEVELS.includes(raw)) throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}, got "${raw}"`)
  return raw
}

function isPlan(s: string): s is Plan {
  return (PLANS as readonly string[]).includes(s)
}

export function parseRateLimits(raw: string): Record<Plan, number> {
  return parsePlanFigures('RATE_LIMITS', raw, { free: 10, pro: 100, premium: 500, enterprise: 1000 }, 'requests per minute')
}

/**
 * `plan:figure` pairs (`free:10,pro:100`) over `defaults`: plans left out keep theirs, `unlimited` is always Infinity
 * and cannot be set. With `none` allowed, `pro:none` lifts that plan's figure (Infinity).
 */
function parsePlanFigures(
  variable: Variable,
  raw: string,
  defaults: Record<Exclude<Plan, 'unlimited'>, number>,
  unit: string,
  opts: { none?: boolean } = {},
): Record<Plan, number> {
  const figures: Record<Plan, number> = { ...defaults, unlimited: Infinity }
  for (const part of raw.split(',').filter(Boolean)) {
    const [plan, value, extra] = part.split(':').map((s) => s.trim())
    if (plan === undefined || value === undefined || extra !== undefined || !isPlan(plan))
      throw new ConfigError(variable, `expected plan:${unit.replace(/ /g, '')} pairs of ${PLANS.join('/')}, got "${part}"`)
    if (plan === 'unlimited') throw new ConfigError(variable, 'the unlimited plan has no limit to set')
    if (opts.none === true && value === 'none') figures[plan] = Infinity
    else if (!/^\d+$/.test(value) || Number(value) < 1 || !Number.isSafeInteger(Number(value)))
      throw new ConfigError(variable, `${plan} must be a whole number of ${unit} ≥ 1${opts.none ? ' or none' : ''}, got "${value}"`)
    else figures[plan] = Number(value)
  }
  return figures
}

const QUOTA_VARIABLES = {
  storedBytes: ['QUOTA_STORED_BYTES', 'bytes'],
  files: ['QUOTA_FILES', 'files'],
  sessions: ['QUOTA_SESSIONS', 'sessions'],
  messagesPerSession: ['QUOTA_SESSION_MESSAGES', 'messages'],
} as const satisfies Record<keyof PlanQuotas, readonly [Variable, string]>

/**
 * Each quota's variable over its own defaults (DEFAULTS' string for it, so a variable naming one plan keeps the
 * others' defaults), turned around into one set of quotas per plan.
 */
function parseQuotas(get: (name: Variable) => string): Record<Plan, PlanQuotas> {
  const by = {} as Record<keyof PlanQuotas, Record<Plan, number>>
  for (const [field, [name, unit]] of Object.entries(QUOTA_VARIABLES) as [keyof PlanQuotas, readonly [Variable, string]][]) {
    const defaults = parsePlanFigures(name, DEFAULTS[name], { free: 1, pro: 1, premium: 1, enterprise: 1 }, unit)
    by[field] = parsePlanFigures(name, get(name), defaults, unit, { none: true })
  }
  const quotas = {} as Record<Plan, PlanQuotas>
  for (const plan of PLANS)
    quotas[plan] = { storedBytes: by.storedBytes[plan], files: by.files[plan], sessions: by.sessions[plan], messagesPerSession: by.messagesPerSession[plan] }
  return quotas
}

export function parseServiceKeys(raw: string): Map<string, Plan> {
  const keys = new Map<string, Plan>()
  for (const [i, part] of raw.split(',').filter((s) => s.trim() !== '').entries()) {
    const idx = part.lastIndexOf(':')
    const key = (idx === -1 ? part : part.slice(0, idx)).trim()
    const plan = (idx === -1 ? 'free' : part.slice(idx + 1)).trim()
    if (!isPlan(plan)) throw new ConfigError('SERVICE_KEYS', `unknown plan "${plan}" (use ${PLANS.join(', ')})`)
    // Named by position, never quoted: the key is a secret and this line goes to stderr.
    if (secretBits(key) < GENERATED_KEY_BITS) throw new ConfigError('SERVICE_KEYS', weakSecret(`key ${i + 1}`))
    keys.set(key, plan)
  }
  return keys
}

function weakSecret(what: string): string {
  return (
    `${what} is weaker than a generated key: use at least ${GENERATED_KEY_BITS} random bits, e.g. 32 base64url or 48 hex ` +
    'characters (`recallgate keys create`, `openssl rand -hex 24`)'
  )
}

function parseMargins(raw: string): Record<string, number> {
  const margins: Record<string, number> = {}
  for (const part of raw.split(',').filter(Boolean)) {
    const [prefix, value] = part.split(':').map((s) => s.trim())
    const n = Number(value)
    if (!prefix || value === undefined || !Number.isFinite(n) || n < 0 || n >= 1)
      throw new ConfigError('TOKEN_MARGINS', `expected vendor:share pairs with share in [0, 1), got "${part}"`)
    margins[prefix] = n
  }
  return margins
}
