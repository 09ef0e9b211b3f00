/**
 * The route table: every endpoint the gateway serves, with its method, path template, whether it needs a service key
 * or the admin key, and its handler built from the other parts. GET /openapi.json describes the same routes by hand,
 * and test/openapi.e2e.test.ts compares the two.
 */
import { chatHandler } from '../chat/handler.js'
import type { Planner } from '../chat/planner.js'
import { isClusterWorker } from '../cluster.js'
import { clusterRender } from '../cluster-metrics.js'
import type { Config } from '../config.js'
import type { RouteDef } from '../http/server.js'
import type { Metrics } from '../metrics.js'
import type { Quotas } from '../quotas/quotas.js'
import { responsesHandler } from '../responses/handler.js'
import { inputTokensHandler } from '../responses/input-tokens.js'
import { ChainCache } from '../responses/state.js'
import { adminKeyRoutes } from '../routes/admin-keys.js'
import { consoleRoutes } from '../routes/console.js'
import { conversationRoutes } from '../routes/conversations.js'
import { embeddingsHandler } from '../routes/embeddings.js'
import { fileRoutes } from '../routes/files.js'
import { healthHandler } from '../routes/health.js'
import { metricsHandler } from '../routes/metrics.js'
import { modelHandler, modelsHandler } from '../routes/models.js'
import { openApiHandler } from '../routes/openapi-document.js'
import { readinessHandler, type ReadinessCheck } from '../routes/ready.js'
import { requestRoutes } from '../routes/requests.js'
import { responseRoutes } from '../routes/responses.js'
import { sessionRoutes } from '../routes/sessions.js'
import { usageHandler } from '../routes/usage.js'
import type { Cancel } from '../retrieval/embedder.js'
import type { Clock } from '../types.js'
import type { GatewayStores } from './stores.js'
import type { Indexes } from './indexes.js'
import type { Recorders } from './recorders.js'
import type { Upstream } from './upstream.js'

/** Bounds on what we accept from the upstream. */
const MAX_UPSTREAM_BODY = 32 * 1024 * 1024
const MAX_SSE_EVENT = 1024 * 1024
/** Ancestors a `previous_response_id` chain is walked through; older turns count as history that did not fit. */
const MAX_CHAIN_TURNS = 1_000
/** Messages the cache of walked chains holds in all (responses/state.ts ChainCache): about 20 MB of chat messages. */
const CHAIN_CACHE_MESSAGES = 20_000
/** Longest a readiness probe waits on one store (balancers usually time a probe out after 1–5 s). */
const READINESS_TIMEOUT = 1_000

export function routeTable(parts: {
  config: Config
  clock: Clock
  now: () => number
  metrics: Metrics
  stores: GatewayStores
  upstream: Upstream
  indexes: Indexes
  planner: Planner
  quotas: Quotas
  recorders: Recorders
  readiness: readonly ReadinessCheck[]
}): RouteDef[] {
  const { config, clock, now, metrics, planner, quotas, recorders } = parts
  const { stores, counter, capacity } = parts.stores
  const { upstream, catalog } = parts.upstream
  const { sessions, responses, conversations } = stores
  const s = sessionRoutes(sessions, { maxSessionIdLength: config.maxSessionIdLength, onDeleted: recorders.onSessionDeleted })
  const rq = requestRoutes(stores.traces, recorders.traces)
  const ui = consoleRoutes()
  const rs = responseRoutes(responses)
  const cv = conversationRoutes(sessions, conversations, {
    maxBodyBytes: config.maxBodyBytes,
    maxSessionIdLength: config.maxSessionIdLength,
    now,
    onDeleted: recorders.onSessionDeleted,
    quotas,
    files: {
      texts: parts.indexes.knowledge,
      window: async (authorization, cancel) => (await catalog.largestContextLength(authorization, cancel)) ?? config.defaultContextLength,
    },
  })
  const f = fileRoutes(parts.indexes.knowledge, {
    maxFileBytes: config.maxFileBytes,
    maxBodyBytes: config.maxBodyBytes,
    ragTopK: config.ragTopK,
    minRelevance: config.ragSearchMinRelevance,
    checkRoom: () => capacity.check(),
    quotas,
  })
  const admin = adminKeyRoutes(stores.keys, { adminKey: config.adminKey, maxBodyBytes: config.maxBodyBytes })
  // A message part naming one of the caller's files by id: its text, as long as the model's window can hold it.
  const files = {
    texts: parts.indexes.knowledge,
    window: async (model: string, authorization: string, cancel: Cancel) =>
      (await catalog.contextLength(model, authorization, cancel)) ?? config.defaultContextLength,
  }
  // What /responses and /responses/input_tokens both prepare a turn with: one cache of walked chains for the two.
  const turns = {
    planner,
    responses,
    conversations,
    sessions,
    files,
    chains: new ChainCache(CHAIN_CACHE_MESSAGES),
    limits: {
      maxBodyBytes: config.maxBodyBytes,
      maxInputItems: config.maxMessages,
      maxSessionIdLength: config.maxSessionIdLength,
      maxChainTurns: MAX_CHAIN_TURNS,
    },
  }
  return [
    { method: 'GET', path: '/healthz', auth: false, handler: healthHandler() },
    { method: 'GET', path: '/readyz', auth: false, handler: readinessHandler(parts.readiness, READINESS_TIMEOUT) },
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
        files,
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
        ...turns,
        upstream,
        countStored: (m) => counter.storedContentTokens(m),
        clock,
        now,
        limits: { ...turns.limits, maxUpstreamBodyBytes: MAX_UPSTREAM_BODY, maxEventBytes: MAX_SSE_EVENT },
      }),
    },
    // The path has `/responses/:id`'s shape, but a static path is its route's alone (http/router.ts): a GET here is a
    // 405, not a lookup of a response named input_tokens.
    { method: 'POST', path: '/api/v1/responses/input_tokens', auth: true, handler: inputTokensHandler(turns) },
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
    { method: 'GET', path: '/api/v1/usage', auth: true, handler: usageHandler(stores.usage, recorders.usage, quotas) },
    { method: 'GET', path: '/api/v1/models', auth: true, handler: modelsHandler(catalog) },
    { method: 'GET', path: '/api/v1/models/:id', auth: true, handler: modelHandler(catalog) },
    { method: 'GET', path: '/api/v1/models/:vendor/:name', auth: true, handler: modelHandler(catalog) },
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
    { method: 'GET', path: '/api/v1/files/:id/content', auth: true, handler: f.content },
    { method: 'DELETE', path: '/api/v1/files/:id', auth: true, handler: f.del },
    { method: 'GET', path: '/api/v1/admin/keys', auth: false, admin: true, handler: admin.list },
    { method: 'POST', path: '/api/v1/admin/keys', auth: false, admin: true, handler: admin.create },
    { method: 'GET', path: '/api/v1/admin/keys/:id', auth: false, admin: true, handler: admin.get },
    { method: 'POST', path: '/api/v1/admin/keys/:id', auth: false, admin: true, handler: admin.update },
    { method: 'DELETE', path: '/api/v1/admin/keys/:id', auth: false, admin: true, handler: admin.revoke },
    { method: 'POST', path: '/api/v1/admin/keys/:id/rotate', auth: false, admin: true, handler: admin.rotate },
  ]
}
