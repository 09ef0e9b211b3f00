/**
 * The composition root: the only module that wires adapters together and the only reader of `process.env`
 * (through `startFromEnv`). Everything else receives what it needs as arguments.
 */
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { isClusterWorker, superviseWorkers } from './cluster.js'
import { joinClusterMetrics, serveClusterMetrics } from './cluster-metrics.js'
import { Closers } from './compose/closers.js'
import { openIndexes } from './compose/indexes.js'
import { openLimits } from './compose/limits.js'
import { createPlanning } from './compose/planning.js'
import { createRecorders } from './compose/recorders.js'
import { routeTable } from './compose/routes.js'
import { ensureFirstKeyOnce, openGatewayStores } from './compose/stores.js'
import { openUpstream } from './compose/upstream.js'
import { ConfigError, envWithDotenv, loadConfig, type Config } from './config.js'
import type { TokenCounter } from './context/tokenizer.js'
import { Cors } from './http/cors.js'
import { admission } from './auth/admission.js'
import { createHttpServer } from './http/server.js'
import { createLogger, type Logger } from './log.js'
import { createMetrics, type Metrics } from './metrics.js'
import { requestDone } from './observe/request-done.js'
import type { RecallTuning } from './recall/session-recall.js'
import type { KeyStore } from './storage/interface.js'
import type { Store } from './storage/store.js'
import { systemClock, type Clock } from './types.js'

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

/**
 * Opens the parts in order (stores, limits, upstream, indexes, planner, recorders, routes), then listens. A start that
 * fails at any step, listening included (a port already taken), closes whatever it had opened and rejects.
 */
export async function startGateway(config: Config, opts: GatewayOptions = {}): Promise<Gateway> {
  const clock = opts.clock ?? systemClock
  const now = opts.now ?? Date.now
  const logger = createLogger({ level: config.logLevel, ...(opts.logDestination ? { destination: opts.logDestination } : {}) })
  const metrics = createMetrics()
  const closers = new Closers()
  try {
    const stores = await openGatewayStores({ config, clock, now, logger, metrics, closers, onBootstrapKey: opts.onBootstrapKey })
    const limits = await openLimits({ config, keys: stores.stores.keys, clock, logger, metrics, closers })
    const upstream = openUpstream({ config, clock, closers, metrics })
    const indexes = openIndexes({
      config,
      stores: stores.stores,
      counter: stores.counter,
      now,
      logger,
      closers,
      recallTuning: opts.recallTuning,
      cacheRoom: (bytes) => stores.capacity.roomForCache(bytes),
    })
    const { planner, quotas } = createPlanning({ config, counter: stores.counter, sessions: stores.stores.sessions, indexes, catalog: upstream.catalog })
    const recorders = createRecorders({ config, stores: stores.stores, now, logger, closers })
    const readiness = [...stores.readiness, ...limits.readiness, ...upstream.readiness, ...indexes.readiness]
    const routes = routeTable({ config, clock, now, metrics, stores, upstream, indexes, planner, quotas, recorders, readiness })
    const http = createHttpServer({
      routes,
      admission: admission({
        authenticator: limits.authenticator,
        authFailures: limits.authFailures,
        limiter: limits.limiter,
        onRateLimited: (plan) => metrics.rateLimited(plan),
      }),
      clock,
      headersTimeout: config.headersTimeout,
      requestTimeout: config.requestTimeout,
      maxHeaderBytes: config.maxHeaderBytes,
      // The time bound is the one every request has to send its body in.
      drain: { maxBytes: config.maxDrainBytes, timeout: config.requestTimeout },
      // Each request reads what any process committed before it arrived (read-your-writes across `--workers` and
      // processes sharing DATA_DIR): LMDB's shared read transaction is otherwise renewed only on a timer.
      onRequestStart: () => stores.store.freshReads(),
      ...(config.corsOrigins.length === 0 ? {} : { cors: new Cors(config.corsOrigins) }),
      onRequestDone: requestDone({ logger, metrics, usage: recorders.usage, recorder: recorders.traces, now }),
    })

    http.server.listen(config.port, config.host)
    // Rejects with the server's 'error' (EADDRINUSE, EACCES) instead of listening.
    await once(http.server, 'listening')
    const port = (http.server.address() as AddressInfo).port
    const host = config.host.includes(':') ? `[${config.host}]` : config.host
    const url = `http://${host}:${port}`
    logger.info({ url, upstream: config.upstreamBaseUrl, dataDir: config.dataDir }, 'recallgate listening')
    indexes.warm()

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
        // The bookkeeping of the last requests runs at the end of the turn they finished in (observe/request-done.ts):
        // one more turn, so their usage rows and traces are recorded before the recorders are flushed and closed.
        await new Promise<void>((resolve) => setImmediate(resolve))
        await closers.closeAll()
        logger.flush()
      })()
      return closing
    }

    const table = routes.map((r) => Object.freeze({ method: r.method, path: r.path, auth: r.auth, admin: r.admin === true }))
    const { store, counter } = stores
    return { url, port, config, logger, metrics, store, keys: stores.stores.keys, counter, routes: table, close }
  } catch (err) {
    // The start's own error is the one worth reporting; a failure while closing after it is only logged.
    await closers.closeAll().catch((closeErr: unknown) => logger.warn({ err: closeErr }, 'could not close everything after a failed start'))
    logger.flush()
    throw err
  }
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
    await ensureFirstKeyOnce(config)
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
