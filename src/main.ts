/**
 * The composition root: the only module that wires adapters together and the only reader of `process.env`
 * (through `startFromEnv`). Everything else receives what it needs as arguments.
 */
import { once } from 'node:events'
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import type { AddressInfo } from 'node:net'
import { AuthFailureLimiter } from './auth/auth-failure-limiter.js'
import { Authenticator } from './auth/authenticator.js'
import { RateLimiter, type Limiter } from './auth/rate-limiter.js'
import { SharedRateLimiter } from './auth/shared-rate-limiter.js'
import { chatHandler } from './chat/handler.js'
import { Planner } from './chat/planner.js'
import { isClusterWorker, superviseWorkers } from './cluster.js'
import { clusterRender, joinClusterMetrics, serveClusterMetrics } from './cluster-metrics.js'
import { ConfigError, envWithDotenv, loadConfig, type Config } from './config.js'
import { TokenCounter } from './context/tokenizer.js'
import { createHttpServer, type RouteDef } from './http/server.js'
import { createLogger, logRequest, type Logger } from './log.js'
import { createMetrics, OTHER, type Metrics } from './metrics.js'
import { LocalEmbedder, type Embedder } from './retrieval/embedder.js'
import { OpenAICompatibleEmbedder } from './retrieval/openai-embedder.js'
import { KnowledgeBase } from './knowledge/knowledge-base.js'
import { Quotas } from './quotas/quotas.js'
import { SessionRecall, type RecallTuning } from './recall/session-recall.js'
import { fileRoutes } from './routes/files.js'
import { healthHandler } from './routes/health.js'
import { readinessHandler, type ReadinessCheck } from './routes/ready.js'
import { metricsHandler } from './routes/metrics.js'
import { modelHandler, modelsHandler } from './routes/models.js'
import { embeddingsHandler } from './routes/embeddings.js'
import { sessionRoutes } from './routes/sessions.js'
import { conversationRoutes } from './routes/conversations.js'
import { responseRoutes } from './routes/responses.js'
import { responsesHandler } from './responses/handler.js'
import { ChainCache } from './responses/state.js'
import { TraceRecorder } from './traces/trace-recorder.js'
import { requestDone } from './observe/request-done.js'
import { requestRoutes } from './routes/requests.js'
import { consoleRoutes } from './routes/console.js'
import { usageHandler } from './routes/usage.js'
import { adminKeyRoutes } from './routes/admin-keys.js'
import { openApiHandler } from './routes/openapi-document.js'
import { UsageRecorder } from './usage/usage-recorder.js'
import type { KeyStore } from './storage/interface.js'
import { openStores, type Stores } from './storage/open-stores.js'
import { openRedis, type RedisStore } from './storage/redis.js'
import { openStore, type Store } from './storage/store.js'
import { StoreCapacity } from './storage/capacity.js'
import { STREAM_FAILURE_REASONS, systemClock, type Clock } from './types.js'
import { UpstreamClient } from './upstream/client.js'
import { ModelCatalog } from './upstream/model-catalog.js'

export interface GatewayOptions {
  /** Where log lines go (tests capture them); default stdout. */
  logDestination?: NodeJS.WritableStream
  /** Monotonic ms clock for the rate limiter and timings. */
  clock?: Clock
  /** Wall clock (epoch ms) for stored timestamps. */
  now?: () => number
  /** Called with the one-time bootstrap key line when a first start creates a key. */
  onBootstrapKey?: (key: string) => void
  /** Recall's ranking internals, for bench/memory-eval.ts to sweep; the defaults are what it measured best. */
  recallTuning?: Partial<RecallTuning>
}

export interface Gateway {
  readonly url: string
  readonly port: number
  readonly config: Config
  readonly logger: Logger
  readonly metrics: Metrics
  readonly store: Store
  readonly keys: KeyStore
  readonly counter: TokenCounter
  /** Every route the server registered (method, template, whether it needs a service key or the admin key): the OpenAPI test reads it. */
  readonly routes: readonly { readonly method: string; readonly path: string; readonly auth: boolean; readonly admin: boolean }[]
  /** Graceful stop: refuse new requests, let in-flight ones finish within the grace period, flush, close. */
  close(): Promise<void>
}

/** Bounds on what we accept from the upstream. */
const MAX_UPSTREAM_BODY = 32 * 1024 * 1024
const MAX_SSE_EVENT = 1024 * 1024
/** Ancestors a `previous_response_id` chain is walked through; older turns count as history that did not fit. */
const MAX_CHAIN_TURNS = 1_000
/** Messages the cache of walked chains holds in all (responses/state.ts ChainCache): about 20 MB of chat messages. */
const CHAIN_CACHE_MESSAGES = 20_000
/** Longest a readiness probe waits on one store (balancers usually time a probe out after 1–5 s). */
const READINESS_TIMEOUT = 1_000

export async function startGateway(config: Config, opts: GatewayOptions = {}): Promise<Gateway> {
  const clock = opts.clock ?? systemClock
  const now = opts.now ?? Date.now
  const logger = createLogger({ level: config.logLevel, ...(opts.logDestination ? { destination: opts.logDestination } : {}) })
  const metrics = createMetrics()

  // openStore creates a missing DATA_DIR: said once, since a wrong working directory otherwise passes unnoticed.
  if (!existsSync(config.dataDir)) logger.warn({ dataDir: resolve(config.dataDir) }, 'DATA_DIR did not exist: created it empty')
  const store = openStore({
    dir: config.dataDir,
    mapSize: config.lmdbMapSize,
    clock,
    onDurable: (ms, ok) => metrics.storeOp({ store: 'lmdb', op: 'commit', ms, ok }),
  })
  const capacity = new StoreCapacity({ store, dir: config.dataDir, minFreeDisk: config.minFreeDisk, clock })
  const counter = new TokenCounter({ margins: config.tokenMargins, media: config.mediaTokens })
  let stores: Stores
  try {
    stores = await openStores({
      ...databaseOptions(config),
      lmdb: store,
      checkLmdbRoom: (bytes) => capacity.check(bytes),
      maxMessagesPerSession: config.maxSessionMessages,
      now,
      counter,
      observe: (op, ms, ok) => metrics.storeOp({ store: 'postgres', op, ms, ok }),
      log: (level, msg, fields) => logger[level](fields ?? {}, msg),
    })
  } catch (err) {
    await store.close()
    throw err
  }
  const keys = stores.keys
  await ensureFirstKey(config, keys, opts.onBootstrapKey)
  const authenticator = new Authenticator({ inlineKeys: config.serviceKeys, stored: keys })
  const authFailures =
    config.authFailuresPerMinute > 0
      ? new AuthFailureLimiter({ perMinute: config.authFailuresPerMinute, maxAddresses: config.authFailureMaxAddresses, clock })
      : undefined
  const localLimiter = new RateLimiter({ limits: config.rateLimits, maxKeys: config.rateLimitMaxKeys, clock })
  // Every store requests depend on is required: without it they fail. DATA_DIR's LMDB is also not ready when it has
  // no room (MIN_FREE_DISK, LMDB_MAP_SIZE) or its last write failed.
  const readiness: ReadinessCheck[] = [
    { name: 'lmdb', required: true, check: () => lmdbReady(store, capacity, now) },
    ...stores.readiness.filter((r) => r.name !== 'lmdb').map((r) => ({ name: r.name, required: true, check: () => r.check() })),
  ]
  let redis: RedisStore | undefined
  let limiter: Limiter = localLimiter
  if (config.redisUrl !== undefined) {
    redis = await openRedis({
      url: config.redisUrl,
      timeout: config.redisTimeout,
      keyPrefix: config.redisKeyPrefix,
      onConnectionChange: (up, err) =>
        up ? logger.info({ store: 'redis' }, 'redis connected') : logger.warn({ store: 'redis', err }, 'redis connection lost'),
    })
    const r = redis
    limiter = new SharedRateLimiter({
      buckets: r,
      local: localLimiter,
      onStoreError: config.rateLimitOnStoreError,
      retryAfter: config.redisRetry,
      clock,
      observe: (ms, ok) => metrics.storeOp({ store: 'redis', op: 'rate_check', ms, ok }),
      onOutage: (err) =>
        logger.warn(
          { store: 'redis', err, onStoreError: config.rateLimitOnStoreError },
          config.rateLimitOnStoreError === 'allow'
            ? 'rate-limit store failing: each process limits on its own until it is back'
            : 'rate-limit store failing: limited requests are refused with 503 until it is back',
        ),
      onRecovery: () => logger.info({ store: 'redis' }, 'rate-limit store answering again: limits are shared again'),
      onFallback: (outcome) => metrics.rateLimitFallback(outcome),
    })
    readiness.push({
      name: 'redis',
      required: config.rateLimitOnStoreError === 'deny',
      check: async () => {
        const started = clock()
        try {
          await r.ping()
          metrics.storeOp({ store: 'redis', op: 'ping', ms: clock() - started, ok: true })
        } catch (err) {
          metrics.storeOp({ store: 'redis', op: 'ping', ms: clock() - started, ok: false })
          throw err
        }
      },
    })
  }

  const upstream = new UpstreamClient({
    baseUrl: config.upstreamBaseUrl,
    connectTimeout: config.upstreamConnectTimeout,
    headersTimeout: config.upstreamHeadersTimeout,
    bodyTimeout: config.upstreamBodyTimeout,
    connections: config.upstreamConnections,
    httpReferer: config.httpReferer,
    xTitle: config.xTitle,
  })
  const catalog = new ModelCatalog({ upstream, ttl: config.modelsCacheTtl, clock })
  // Off by default: an upstream outage would take every replica out of the balancer at once, which helps no one; on, it
  // catches a wrong UPSTREAM_BASE_URL before traffic does (issue 27).
  if (config.readyCheckUpstream) readiness.push({ name: 'upstream', required: true, check: () => catalog.check() })

  const sessions = stores.sessions
  const embedder = createEmbedder(config)
  const knowledge = new KnowledgeBase({
    files: stores.files,
    dataDir: config.dataDir,
    embedder,
    chunkTokens: config.chunkTokens,
    chunkOverlap: config.chunkOverlap,
    maxChunksPerFile: config.maxChunksPerFile,
    clock: now,
    ...(stores.checkFileRoom ? { checkRoom: stores.checkFileRoom } : {}),
    extract: {
      concurrency: config.extract.concurrency,
      timeoutMs: config.extract.timeout,
      maxHeapMb: config.extract.workerMemoryMb,
      maxDecodedBytes: config.extract.maxDecodedBytes,
      maxTextChars: config.extract.maxTextChars,
    },
    // Graph files are a cache of the store: a failed save is worth a warning (the next start rebuilds), not a failed request.
    onIndexSaveError: (err, file) => logger.warn({ err, file }, 'could not save an index file'),
  })
  // Off means neither indexing nor searching: turns saved meanwhile are not recallable after turning it back on.
  // Recall indexes saved turns in the save's own transaction, through the store's hooks (storage/open-stores.ts).
  const recall = config.recallEnabled
    ? new SessionRecall({
        records: stores.recall,
        embedder,
        counter,
        dataDir: config.dataDir,
        maxTokens: config.recallMaxTokens,
        maxMessagesPerSession: config.maxSessionMessages,
        maxLoadedSessions: config.recallLoadedSessions,
        tuning: { candidates: config.recallTopK, ...opts.recallTuning },
        onError: (err, what) => logger.warn({ err }, what),
      })
    : undefined

  const quotas = new Quotas({ plans: config.quotas, files: knowledge, sessions })
  const planner = new Planner({
    quotas,
    counter,
    sessions,
    knowledge,
    catalog,
    defaultContextLength: config.defaultContextLength,
    defaultMaxTokens: config.defaultMaxTokens,
    maxHistoryMessages: config.maxHistoryMessages,
    historyStep: config.historyStep,
    promptCache: config.promptCache,
    ragBudgetShare: config.ragBudgetShare,
    ragMaxTokens: config.ragMaxTokens,
    ragTopK: config.ragTopK,
    relevanceGate: { minRelevance: config.ragMinRelevance, fullRelevance: config.ragFullRelevance, hitFloor: config.ragChunkMinRelevance },
    ...(recall ? { recall: { service: recall, recentShare: config.recallRecentShare } } : {}),
  })
  metrics.setCollectors({ corrections: () => counter.corrections(), sizes: () => store.sizes(), lmdbSpace: () => store.space() })

  const responses = stores.responses
  const conversations = stores.conversations
  const traces = stores.traces
  const recorder = new TraceRecorder({
    store: traces,
    keep: config.requestTraces,
    onError: (err) => logger.warn({ err }, 'could not write request traces'),
  })
  const usage = new UsageRecorder({
    store: stores.usage,
    now,
    onError: (err, lost) => logger.warn({ err, lost }, 'could not write usage: these rows are not counted'),
  })
  // A session's traces go with it (they hold its messages as they were sent).
  const onSessionDeleted = async (tenant: string, sessionId: string): Promise<void> => {
    await recorder.flush()
    await traces.deleteSession(tenant, sessionId)
  }
  const s = sessionRoutes(sessions, { maxSessionIdLength: config.maxSessionIdLength, onDeleted: onSessionDeleted })
  const rq = requestRoutes(traces, recorder)
  const ui = consoleRoutes()
  const rs = responseRoutes(responses)
  const cv = conversationRoutes(sessions, conversations, {
    maxBodyBytes: config.maxBodyBytes,
    maxSessionIdLength: config.maxSessionIdLength,
    now,
    onDeleted: onSessionDeleted,
    quotas,
  })
  const f = fileRoutes(knowledge, {
    maxFileBytes: config.maxFileBytes,
    maxBodyBytes: config.maxBodyBytes,
    ragTopK: config.ragTopK,
    minRelevance: config.ragMinRelevance,
    checkRoom: () => capacity.check(),
    quotas,
  })
  const admin = adminKeyRoutes(keys, { adminKey: config.adminKey, maxBodyBytes: config.maxBodyBytes })
  const routes: RouteDef[] = [
    { method: 'GET', path: '/healthz', auth: false, handler: healthHandler() },
    { method: 'GET', path: '/readyz', auth: false, handler: readinessHandler(readiness, READINESS_TIMEOUT) },
    {
      method: 'GET',
      path: '/metrics',
      auth: false,
      handler: metricsHandler(isClusterWorker() ? { render: clusterRender(metrics.registry) } : metrics, config.metricsToken),
    },
    { method: 'GET', path: '/openapi.json', auth: false, handler: openApiHandler() },
    { method: 'GET', path: '/console', auth: false, handler: ui.page },
    { method: 'GET', path: '/console/app.js', auth: false, handler: ui.script },
    { method: 'GET', path: '/console/app.css', auth: false, handler: ui.style },
    {
      method: 'POST',
      path: '/api/v1/chat/completions',
      auth: true,
      handler: chatHandler({
        upstream,
        planner,
        clock,
        alwaysRequestUsage: true,
        limits: {
          maxMessages: config.maxMessages,
          maxSessionIdLength: config.maxSessionIdLength,
          maxBodyBytes: config.maxBodyBytes,
          maxUpstreamBodyBytes: MAX_UPSTREAM_BODY,
          maxEventBytes: MAX_SSE_EVENT,
        },
      }),
    },
    {
      method: 'POST',
      path: '/api/v1/responses',
      auth: true,
      handler: responsesHandler({
        upstream,
        planner,
        responses,
        conversations,
        sessions,
        chains: new ChainCache(CHAIN_CACHE_MESSAGES),
        countStored: (m) => counter.storedContentTokens(m),
        clock,
        now,
        limits: {
          maxBodyBytes: config.maxBodyBytes,
          maxUpstreamBodyBytes: MAX_UPSTREAM_BODY,
          maxEventBytes: MAX_SSE_EVENT,
          maxInputItems: config.maxMessages,
          maxSessionIdLength: config.maxSessionIdLength,
          maxChainTurns: MAX_CHAIN_TURNS,
        },
      }),
    },
    { method: 'GET', path: '/api/v1/responses/:id', auth: true, handler: rs.get },
    { method: 'DELETE', path: '/api/v1/responses/:id', auth: true, handler: rs.del },
    { method: 'GET', path: '/api/v1/responses/:id/input_items', auth: true, handler: rs.inputItems },
    { method: 'POST', path: '/api/v1/responses/:id/cancel', auth: true, handler: rs.cancel },
    { method: 'POST', path: '/api/v1/conversations', auth: true, handler: cv.create },
    { method: 'GET', path: '/api/v1/conversations/:id', auth: true, handler: cv.get },
    { method: 'POST', path: '/api/v1/conversations/:id', auth: true, handler: cv.update },
    { method: 'DELETE', path: '/api/v1/conversations/:id', auth: true, handler: cv.del },
    { method: 'GET', path: '/api/v1/conversations/:id/items', auth: true, handler: cv.listItems },
    { method: 'POST', path: '/api/v1/conversations/:id/items', auth: true, handler: cv.addItems },
    { method: 'GET', path: '/api/v1/conversations/:id/items/:item', auth: true, handler: cv.getItem },
    { method: 'DELETE', path: '/api/v1/conversations/:id/items/:item', auth: true, handler: cv.deleteItem },
    { method: 'GET', path: '/api/v1/requests', auth: true, handler: rq.list },
    { method: 'GET', path: '/api/v1/requests/:id', auth: true, handler: rq.get },
    { method: 'GET', path: '/api/v1/usage', auth: true, handler: usageHandler(stores.usage, usage, quotas) },
    { method: 'GET', path: '/api/v1/models', auth: true, handler: modelsHandler(catalog) },
    { method: 'GET', path: '/api/v1/models/:id', auth: true, handler: modelHandler(catalog) },
    {
      method: 'POST',
      path: '/api/v1/embeddings',
      auth: true,
      handler: embeddingsHandler({ upstream, clock, maxBodyBytes: config.maxBodyBytes, maxUpstreamBodyBytes: MAX_UPSTREAM_BODY }),
    },
    { method: 'GET', path: '/api/v1/sessions', auth: true, handler: s.list },
    { method: 'GET', path: '/api/v1/sessions/:id', auth: true, handler: s.get },
    { method: 'DELETE', path: '/api/v1/sessions/:id', auth: true, handler: s.del },
    { method: 'POST', path: '/api/v1/files', auth: true, handler: f.upload },
    { method: 'GET', path: '/api/v1/files', auth: true, handler: f.list },
    // Registered before /files/:id so that `search` is never read as an id.
    { method: 'POST', path: '/api/v1/files/search', auth: true, handler: f.search },
    { method: 'GET', path: '/api/v1/files/:id', auth: true, handler: f.get },
    { method: 'DELETE', path: '/api/v1/files/:id', auth: true, handler: f.del },
    { method: 'GET', path: '/api/v1/admin/keys', auth: false, admin: true, handler: admin.list },
    { method: 'POST', path: '/api/v1/admin/keys', auth: false, admin: true, handler: admin.create },
    { method: 'GET', path: '/api/v1/admin/keys/:id', auth: false, admin: true, handler: admin.get },
    { method: 'POST', path: '/api/v1/admin/keys/:id', auth: false, admin: true, handler: admin.update },
    { method: 'DELETE', path: '/api/v1/admin/keys/:id', auth: false, admin: true, handler: admin.revoke },
    { method: 'POST', path: '/api/v1/admin/keys/:id/rotate', auth: false, admin: true, handler: admin.rotate },
  ]

  const http = createHttpServer({
    routes,
    authenticator,
    ...(authFailures ? { authFailures } : {}),
    limiter,
    clock,
    headersTimeout: config.headersTimeout,
    requestTimeout: config.requestTimeout,
    maxHeaderBytes: config.maxHeaderBytes,
    // The time bound is the one every request has to send its body in.
    drain: { maxBytes: config.maxDrainBytes, timeout: config.requestTimeout },
    onRateLimited: (plan) => metrics.rateLimited(plan),
    onRequestDone: requestDone({ logger, metrics, usage, recorder, now }),
  })

  http.server.listen(config.port, config.host)
  await once(http.server, 'listening')
  const port = (http.server.address() as AddressInfo).port
  const host = config.host.includes(':') ? `[${config.host}]` : config.host
  const url = `http://${host}:${port}`
  logger.info({ url, upstream: config.upstreamBaseUrl, dataDir: config.dataDir }, 'recallgate listening')
  // Serve at once; tenants' indexes load in the background (and a tenant's first search loads its own). Issue 18: with
  // 100k chunks stored, awaiting this before listening took ≈ 5–8 s.
  const warming = knowledge.init().catch((err: unknown) => logger.warn({ err }, 'could not preload the knowledge base indexes'))

  let closing: Promise<void> | undefined
  const close = (): Promise<void> => {
    closing ??= (async () => {
      http.drain()
      const closed = new Promise<void>((resolve) => http.server.close(() => resolve()))
      const deadline = clock() + config.shutdownGrace
      while (http.inFlight() > 0 && clock() < deadline) await new Promise((r) => setTimeout(r, 20))
      // Whatever is still running after the grace period is cut off.
      http.server.closeAllConnections()
      await closed
      await recorder.flush()
      await usage.flush()
      await knowledge.close()
      await warming
      await recall?.close()
      await upstream.close()
      await redis?.close()
      await stores.close()
      await store.close()
      logger.flush()
    })()
    return closing
  }

  const table = routes.map((r) => Object.freeze({ method: r.method, path: r.path, auth: r.auth, admin: r.admin === true }))
  return { url, port, config, logger, metrics, store, keys, counter, routes: table, close }
}

/**
 * The store is ready when it reads, has room (above MIN_FREE_DISK, under LMDB_MAP_SIZE) and its last write did not
 * fail. After a failed write, readiness tries a one-record write itself: space freed outside the gateway (a bigger
 * volume, files removed) makes it ready again without waiting for a client's write to succeed first.
 */
async function lmdbReady(store: Store, capacity: StoreCapacity, now: () => number): Promise<void> {
  void store.meta.get('schemaVersion')
  await capacity.check()
  const failure = store.writeFailure()
  if (failure === undefined) return
  // A one-record write nearly always fits in the pages a full store still has, so it proves little: probe only once
  // at least RECOVERED_ROOM more is free than when the write failed (the disk's free space was ~0 then).
  const room = await capacity.room({ fresh: true })
  if (room.diskBytes + capacity.minFreeDisk < failure.freeInFileAtFailure + RECOVERED_ROOM) throw failure
  await store.durable(() => store.meta.put('readyProbe', now()))
}

/** Space that must have been freed since a failed write before readiness tries writing again. */
const RECOVERED_ROOM = 1024 * 1024

/** On a first start with no keys at all, create one (plan pro) and print it once. */
async function ensureFirstKey(config: Config, keys: KeyStore, onBootstrapKey?: (line: string) => void): Promise<void> {
  if (config.serviceKeys.size > 0 || (await keys.countActive()) > 0) return
  const { key, record } = await keys.create('pro', 'bootstrap')
  const line = `recallgate: created the first service key (${record.id}, plan pro). It is shown only once: ${key}`
  ;(onBootstrapKey ?? ((l: string) => process.stderr.write(`${l}\n`)))(line)
}

/** The store engine settings (storage/open-stores.ts chooses LMDB or PostgreSQL from them). */
function databaseOptions(config: Config): Pick<Parameters<typeof openStores>[0], 'databaseUrl' | 'databasePoolSize' | 'databaseStatementTimeout'> {
  return {
    databaseUrl: config.databaseUrl,
    databasePoolSize: config.databasePoolSize,
    databaseStatementTimeout: config.databaseStatementTimeout,
  }
}

function createEmbedder(config: Config): Embedder {
  if (config.embeddings === 'local') return new LocalEmbedder()
  return new OpenAICompatibleEmbedder({
    baseUrl: config.embeddingsBaseUrl ?? '',
    model: config.embeddingsModel ?? '',
    apiKey: config.embeddingsApiKey,
  })
}

/**
 * `recallgate serve` / `npm start`: config from the environment and `.env` (`overrides`, from flags, win), SIGTERM/SIGINT
 * for a graceful stop. With WORKERS > 1 this process becomes the cluster primary (cluster.ts) and never returns;
 * each worker comes back here and starts one gateway.
 */
export async function startFromEnv(overrides: Record<string, string> = {}): Promise<Gateway> {
  let config: Config
  try {
    config = loadConfig({ ...envWithDotenv(process.env, process.cwd()), ...overrides })
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`recallgate: invalid configuration: ${err.message}\n`)
      process.exit(2)
    }
    throw err
  }
  if (config.workers > 1 && !isClusterWorker()) {
    const logger = createLogger({ level: config.logLevel })
    const store = openStore({ dir: config.dataDir })
    try {
      const counter = new TokenCounter({ margins: config.tokenMargins, media: config.mediaTokens })
      const stores = await openStores({ ...databaseOptions(config), lmdb: store, maxMessagesPerSession: config.maxSessionMessages, now: Date.now, counter })
      try {
        await ensureFirstKey(config, stores.keys)
      } finally {
        await stores.close()
      }
    } finally {
      await store.close()
    }
    serveClusterMetrics()
    const code = await superviseWorkers({
      workers: config.workers,
      env: overrides,
      shutdownGrace: config.shutdownGrace,
      log: (level, msg, fields) => logger[level](fields ?? {}, msg),
    })
    logger.flush()
    process.exit(code)
  }
  // A worker answers the primary's metric collection from its first moment, so a scrape never waits on one starting.
  if (isClusterWorker()) joinClusterMetrics()
  const gateway = await startGateway(config)
  const stop = (signal: string): void => {
    gateway.logger.info({ signal }, 'shutting down')
    gateway.close().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`recallgate: error during shutdown: ${String(err)}\n`)
        process.exit(1)
      },
    )
  }
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))
  return gateway
}
