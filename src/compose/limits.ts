/**
 * The limits part of the gateway: who is calling (the authenticator), how often a client address may fail a key,
 * and how often a key may call (in this process, or shared by replicas through Redis, with its readiness entry).
 */
import { AuthFailureLimiter } from '../auth/auth-failure-limiter.js'
import { Authenticator } from '../auth/authenticator.js'
import { RateLimiter, type Limiter } from '../auth/rate-limiter.js'
import { SharedRateLimiter } from '../auth/shared-rate-limiter.js'
import type { Config } from '../config.js'
import type { Logger } from '../log.js'
import type { Metrics } from '../metrics.js'
import type { ReadinessCheck } from '../routes/ready.js'
import type { KeyStore } from '../storage/interface.js'
import type { RedisStore } from '../storage/redis.js'
import type { Clock } from '../types.js'
import type { Closers } from './closers.js'

export interface Limits {
  readonly authenticator: Authenticator
  /** Absent with AUTH_FAILURES_PER_MINUTE=0. */
  readonly authFailures: AuthFailureLimiter | undefined
  readonly limiter: Limiter
  /** Redis's entry when REDIS_URL is set. */
  readonly readiness: ReadinessCheck[]
}

export async function openLimits(opts: {
  config: Config
  keys: KeyStore
  clock: Clock
  logger: Logger
  metrics: Metrics
  closers: Closers
}): Promise<Limits> {
  const { config, clock, logger, metrics } = opts
  const authenticator = new Authenticator({ inlineKeys: config.serviceKeys, stored: opts.keys })
  const authFailures =
    config.authFailuresPerMinute > 0
      ? new AuthFailureLimiter({ perMinute: config.authFailuresPerMinute, maxAddresses: config.authFailureMaxAddresses, clock })
      : undefined
  const local = new RateLimiter({ limits: config.rateLimits, maxKeys: config.rateLimitMaxKeys, clock })
  if (config.redisUrl === undefined) return { authenticator, authFailures, limiter: local, readiness: [] }

  // ioredis is imported only when REDIS_URL is set: an idle gateway that had imported it and pg (open-stores.ts) without
  // using either was 10–20 MB larger (docs/benchmarks.md, "Idle RSS").
  const { openRedis } = await import('../storage/redis.js')
  const redis = await openRedis({
    url: config.redisUrl,
    timeout: config.redisTimeout,
    keyPrefix: config.redisKeyPrefix,
    onConnectionChange: (up, err) =>
      up ? logger.info({ store: 'redis' }, 'redis connected') : logger.warn({ store: 'redis', err }, 'redis connection lost'),
  })
  opts.closers.add(() => redis.close())
  const limiter = new SharedRateLimiter({
    buckets: redis,
    local,
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
  // Required only with RATE_LIMIT_ON_STORE_ERROR=deny: with `allow` requests are still served on the local limiter.
  const readiness: ReadinessCheck = {
    name: 'redis',
    required: config.rateLimitOnStoreError === 'deny',
    check: () => pingRedis(redis, clock, metrics),
  }
  return { authenticator, authFailures, limiter, readiness: [readiness] }
}

async function pingRedis(redis: RedisStore, clock: Clock, metrics: Metrics): Promise<void> {
  const started = clock()
  try {
    await redis.ping()
    metrics.storeOp({ store: 'redis', op: 'ping', ms: clock() - started, ok: true })
  } catch (err) {
    metrics.storeOp({ store: 'redis', op: 'ping', ms: clock() - started, ok: false })
    throw err
  }
}
