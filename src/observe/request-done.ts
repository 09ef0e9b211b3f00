/**
 * What happens once a response has finished: its request log line, the request, upstream and token metrics, its usage
 * row and its trace, all read from the server's RequestRecord and the handler's typed RequestFacts. Runs once per
 * request on the hot path, so it reads fields directly and builds each record once (no spreads of optional fields).
 */
import type { RequestRecord } from '../http/server.js'
import { logRequest, type Logger } from '../log.js'
import { OTHER, type Metrics } from '../metrics.js'
import type { TraceRecorder } from '../traces/trace-recorder.js'
import { requestTrace } from '../traces/trace-record.js'
import type { UsageRecorder } from '../usage/usage-recorder.js'

export interface RequestDoneOptions {
  logger: Logger
  metrics: Metrics
  usage: UsageRecorder
  recorder: TraceRecorder
  /** Wall clock, epoch ms (a trace's created_at). */
  now: () => number
}

/**
 * The records of the requests that finished in one turn of the event loop are handled together, at the end of the turn
 * (setImmediate), not each as its response finishes: the same work, run back to back, cost less (parallel A/B of
 * gateway CPU per plain relayed request, docs/benchmarks.md: 0.91–0.96×). Nothing is held past the turn in which its
 * response finished: a client that reads /metrics right after its answer sees its request counted.
 */
export function requestDone(o: RequestDoneOptions): (r: RequestRecord) => void {
  const one = recordRequest(o)
  let batch: RequestRecord[] = []
  const run = (): void => {
    const done = batch
    batch = []
    for (const r of done) {
      try {
        one(r)
      } catch (err) {
        // A fault in the bookkeeping of one request must not lose the others' lines and metrics: reported, and on.
        o.logger.error({ reqId: r.requestId, err }, 'request bookkeeping failed')
      }
    }
  }
  return (r) => {
    if (batch.push(r) === 1) setImmediate(run)
  }
}

function recordRequest(o: RequestDoneOptions): (r: RequestRecord) => void {
  const { logger, metrics, usage, recorder, now } = o
  return (r) => {
    const f = r.facts
    const failure = f.streamFailure
    if (failure !== undefined) metrics.streamFailed(failure.reason)
    metrics.observeRequest({ route: r.route, method: r.method, status: r.status, plan: r.tenant?.plan ?? 'none', durationMs: r.durationMs })
    const model = f.model
    // The upstream answered at all (its headers came): only then is there an upstream time, tokens and usage.
    if (model !== undefined && f.upstreamHeadersMs !== undefined) {
      // The model label takes only names the upstream accepted (not its error): a client sending made-up names to a
      // refusing upstream would otherwise fill the 200 slots and push every real model into `other` (issue 29).
      const accepted = r.error?.fromUpstream !== true
      metrics.observeUpstream({
        model: accepted ? model : OTHER,
        headersMs: f.upstreamHeadersMs,
        ttftMs: f.ttftMs,
        overheadMs: f.upstreamMs === undefined ? undefined : Math.max(0, r.durationMs - f.upstreamMs),
      })
      if (f.promptTokens !== undefined || f.completionTokens !== undefined)
        metrics.tokens({ model, prompt: f.promptTokens ?? 0, completion: f.completionTokens ?? 0, cached: f.cachedTokens ?? 0 })
      // Usage counts what the upstream accepted.
      if (r.tenant !== undefined && accepted) {
        usage.record({ tenant: r.tenant.id, model, inputTokens: f.promptTokens ?? 0, outputTokens: f.completionTokens ?? 0, cachedTokens: f.cachedTokens ?? 0 })
        metrics.usageRequest(model)
      }
    }
    logRequest(logger, {
      requestId: r.requestId,
      clientRequestId: r.clientRequestId,
      tenantId: r.tenant?.id ?? null,
      plan: r.tenant?.plan ?? null,
      method: r.method,
      route: r.route,
      status: r.status,
      durationMs: r.durationMs,
      model,
      stream: f.stream,
      ttftMs: f.ttftMs,
      upstreamMs: f.upstreamMs,
      promptTokens: f.promptTokens,
      completionTokens: f.completionTokens,
      cachedTokens: f.cachedTokens,
      streamFailure: failure?.reason,
      errorCode: r.error?.code ?? failure?.code,
      errorParam: r.error?.param || undefined,
      // Never the upstream's own text: it may quote the request.
      errorMessage: r.error ? (r.error.fromUpstream ? undefined : r.error.message) : failure?.message,
    })
    if (r.trace !== undefined && r.tenant !== undefined && recorder.enabled) {
      recorder.record(
        r.tenant.id,
        requestTrace(r.trace, {
          id: r.requestId,
          createdAt: now(),
          route: r.route,
          model: model ?? '',
          stream: f.stream === true,
          status: r.status,
          durationMs: r.durationMs,
          promptTokens: f.promptTokens ?? null,
          completionTokens: f.completionTokens ?? null,
          cachedTokens: f.cachedTokens ?? null,
          // A stream that failed after its 200 has no error response, but it did fail: traced as the request line logs it.
          error: r.error
            ? { code: r.error.code, message: r.error.fromUpstream ? 'the upstream reported an error' : r.error.message }
            : failure !== undefined
              ? { code: failure.code, message: failure.message ?? 'the upstream reported an error' }
              : null,
        }),
      )
    }
    if (r.error && r.error.status >= 500) logger.error({ reqId: r.requestId, err: r.error.cause ?? r.error }, 'request failed')
  }
}
