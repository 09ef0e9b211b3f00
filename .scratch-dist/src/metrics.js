/**
 * The gateway's Prometheus metrics (prom-client), on a Registry of their own so that each gateway instance — and
 * each test — has independent counters instead of sharing prom-client's global default.
 *
 * Label cardinality is bounded: every time series costs memory here and in Prometheus, and two of our labels come
 * from callers (the model name, and the route if a router ever passed a raw path). Each such label keeps the first
 * `max` distinct values it sees and folds the rest into `other`. Callers should pass the model the upstream answered
 * with (or the request's model only when the upstream accepted it), so junk model names in rejected requests do not
 * use up the slots. Plans, methods and statuses are closed sets.
 *
 * The metric list with meanings is documented in docs/operations.md; keep both in step.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { PLANS } from './types.js';
export const OTHER = 'other';
/** Longer label values are cut: a label is an identifier, and the text format repeats it on every bucket line. */
const MAX_LABEL_LENGTH = 120;
/**
 * Buckets in seconds. The gateway's own overhead is expected well under a millisecond on the hot path (auth, bucket,
 * packing a short prompt), so its buckets start at 50 µs; upstream waits are model latencies, seconds to minutes.
 */
export const BUCKETS = {
    overhead: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    request: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    upstream: [0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13, 20, 30, 60, 120],
};
/** Keeps the first `max` distinct values; everything after is `other`. */
class BoundedLabel {
    max;
    seen = new Set();
    constructor(max) {
        this.max = max;
    }
    of(raw) {
        const value = raw.length > MAX_LABEL_LENGTH ? raw.slice(0, MAX_LABEL_LENGTH) : raw;
        if (this.seen.has(value))
            return value;
        if (this.seen.size >= this.max)
            return OTHER;
        this.seen.add(value);
        return value;
    }
    /** Like `of`, but `undefined` instead of `other` once full: for gauges, where an `other` value would mean nothing. */
    exact(raw) {
        const value = this.of(raw);
        return value === OTHER && raw !== OTHER ? undefined : value;
    }
}
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const planLabel = (plan) => (PLANS.includes(plan) ? plan : 'none');
const methodLabel = (method) => (METHODS.has(method) ? method : 'OTHER');
const statusLabel = (status) => Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : '0';
const statusClass = (status) => Number.isInteger(status) && status >= 100 && status <= 599 ? `${Math.floor(status / 100)}xx` : 'unknown';
const seconds = (ms) => Math.max(0, ms) / 1000;
const usable = (n) => n !== undefined && Number.isFinite(n) && n >= 0;
export function createMetrics(o = {}) {
    const registry = new Registry();
    const registers = [registry];
    const models = new BoundedLabel(o.maxModels ?? 200);
    const routes = new BoundedLabel(o.maxRoutes ?? 64);
    const requests = new Counter({
        name: 'recallgate_http_requests_total',
        help: 'Finished HTTP requests by route template, method, status and plan (plan "none" before authentication).',
        labelNames: ['route', 'method', 'status', 'plan'],
        registers,
    });
    const requestDuration = new Histogram({
        name: 'recallgate_http_request_duration_seconds',
        help: 'Whole request time, first byte in to last byte out, by route template, method and status class.',
        labelNames: ['route', 'method', 'status_class'],
        buckets: [...BUCKETS.request],
        registers,
    });
    const upstreamHeaders = new Histogram({
        name: 'recallgate_upstream_headers_seconds',
        help: 'Time from sending the upstream request to receiving its response headers, by model.',
        labelNames: ['model'],
        buckets: [...BUCKETS.upstream],
        registers,
    });
    const upstreamTtft = new Histogram({
        name: 'recallgate_upstream_ttft_seconds',
        help: 'Time from sending the upstream request to its first content token (streaming), by model.',
        labelNames: ['model'],
        buckets: [...BUCKETS.upstream],
        registers,
    });
    const overhead = new Histogram({
        name: 'recallgate_gateway_overhead_seconds',
        help: "The gateway's own time per proxied request: total request time minus time spent on the upstream.",
        buckets: [...BUCKETS.overhead],
        registers,
    });
    const tokenCounter = new Counter({
        name: 'recallgate_tokens_total',
        help: 'Tokens by model and type (prompt = sent upstream, completion = generated), as reported by the upstream.',
        labelNames: ['model', 'type'],
        registers,
    });
    const rateLimitedCounter = new Counter({
        name: 'recallgate_rate_limited_total',
        help: 'Requests rejected with 429 by the per-key rate limiter, by plan.',
        labelNames: ['plan'],
        registers,
    });
    let sizes;
    let corrections;
    // A throwing callback must not fail the whole scrape (every other metric would vanish with it): the gauge is
    // reset, the failure is counted in collectorErrors so it is visible, and the scrape goes on.
    new Gauge({
        name: 'recallgate_stored_records',
        help: 'Records held: memory sessions and messages, knowledge-base files and chunks, across all tenants.',
        labelNames: ['kind'],
        registers,
        collect() {
            this.reset();
            if (sizes === undefined)
                return;
            try {
                const s = sizes();
                this.set({ kind: 'sessions' }, s.sessions);
                this.set({ kind: 'messages' }, s.messages);
                this.set({ kind: 'files' }, s.files);
                this.set({ kind: 'chunks' }, s.chunks);
            }
            catch {
                this.reset();
                collectorErrors.inc({ collector: 'sizes' });
            }
        },
    });
    new Gauge({
        name: 'recallgate_token_count_correction',
        help: 'Learned ratio of upstream-reported prompt tokens to the local count, by model (1 = exact).',
        labelNames: ['model'],
        registers,
        collect() {
            this.reset();
            if (corrections === undefined)
                return;
            try {
                for (const [model, ratio] of corrections()) {
                    // A gauge for "other" would be whichever model came last: meaningless, so models past the cap are left out.
                    const label = models.exact(model);
                    if (label !== undefined && Number.isFinite(ratio))
                        this.set({ model: label }, ratio);
                }
            }
            catch {
                this.reset();
                collectorErrors.inc({ collector: 'corrections' });
            }
        },
    });
    // Registered after the gauges on purpose: a scrape reads metrics in registration order, and each gauge's collect()
    // runs synchronously when read, so a failure is already counted in the same scrape that suffered it.
    const collectorErrors = new Counter({
        name: 'recallgate_metrics_collector_errors_total',
        help: 'Scrapes on which a size or correction callback threw (the gauge is left empty for that scrape).',
        labelNames: ['collector'],
        registers,
    });
    if (o.collectDefault ?? true)
        collectDefaultMetrics({ register: registry });
    return {
        registry,
        observeRequest(r) {
            const route = routes.of(r.route);
            const method = methodLabel(r.method);
            requests.inc({ route, method, status: statusLabel(r.status), plan: planLabel(r.plan) });
            if (usable(r.durationMs))
                requestDuration.observe({ route, method, status_class: statusClass(r.status) }, seconds(r.durationMs));
        },
        observeUpstream(u) {
            const model = models.of(u.model);
            if (usable(u.headersMs))
                upstreamHeaders.observe({ model }, seconds(u.headersMs));
            if (usable(u.ttftMs))
                upstreamTtft.observe({ model }, seconds(u.ttftMs));
            // Clock jitter can make total − upstream slightly negative; that is zero overhead, not a dropped sample.
            if (u.overheadMs !== undefined && Number.isFinite(u.overheadMs))
                overhead.observe(seconds(u.overheadMs));
        },
        tokens(t) {
            const model = models.of(t.model);
            if (usable(t.prompt) && t.prompt > 0)
                tokenCounter.inc({ model, type: 'prompt' }, t.prompt);
            if (usable(t.completion) && t.completion > 0)
                tokenCounter.inc({ model, type: 'completion' }, t.completion);
        },
        rateLimited(plan) {
            rateLimitedCounter.inc({ plan: planLabel(plan) });
        },
        setCollectors(c) {
            if (c.sizes !== undefined)
                sizes = c.sizes;
            if (c.corrections !== undefined)
                corrections = c.corrections;
        },
        async render() {
            return { contentType: registry.contentType, body: await registry.metrics() };
        },
    };
}
//# sourceMappingURL=metrics.js.map