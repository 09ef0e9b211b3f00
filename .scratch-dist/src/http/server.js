/**
 * The node:http front: request id, routing (404/405), authentication and rate limiting for /api/v1/*, error → wire
 * conversion, and a per-request completion record for logs and metrics. Handlers get a small context and an
 * AbortSignal that fires when the client goes away, so work they started upstream is cancelled at once.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { asGatewayError, gatewayError } from '../errors.js';
import { sendError } from './respond.js';
import { Router } from './router.js';
export function createHttpServer(opts) {
    const router = new Router();
    for (const r of opts.routes)
        router.add(r.method, r.path, r);
    let inFlight = 0;
    let draining = false;
    const server = createServer({
        headersTimeout: opts.headersTimeout,
        requestTimeout: opts.requestTimeout,
        maxHeaderSize: opts.maxHeaderBytes,
        // Each SSE event must leave as soon as it is written: no Nagle batching.
        noDelay: true,
        keepAliveTimeout: 5_000,
    }, (req, res) => {
        inFlight++;
        res.once('close', () => inFlight--);
        void handle(req, res);
    });
    async function handle(req, res) {
        const started = opts.clock();
        const incomingId = req.headers['x-request-id'];
        const requestId = typeof incomingId === 'string' && /^[\w.:-]{1,128}$/.test(incomingId) ? incomingId : `req_${randomUUID()}`;
        res.setHeader('x-request-id', requestId);
        if (draining)
            res.setHeader('connection', 'close');
        const ac = new AbortController();
        res.once('close', () => {
            if (!res.writableFinished)
                ac.abort();
        });
        const ctx = {
            req,
            res,
            requestId,
            params: {},
            query: new URLSearchParams(),
            tenant: undefined,
            signal: ac.signal,
            annotations: {},
        };
        let route = 'unmatched';
        let failure;
        try {
            const q = req.url?.indexOf('?') ?? -1;
            const pathname = q === -1 ? (req.url ?? '/') : (req.url ?? '/').slice(0, q);
            if (q !== -1)
                ctx.query = new URLSearchParams((req.url ?? '').slice(q + 1));
            const found = router.find(req.method ?? 'GET', pathname);
            if (found.kind === 'not-found') {
                throw gatewayError('not_found', { message: `No route for ${req.method} ${pathname}` });
            }
            if (found.kind === 'method-not-allowed') {
                route = found.template;
                throw gatewayError('method_not_allowed', {
                    message: `${req.method} is not allowed on ${pathname}; use ${found.allow.join(', ')}`,
                    headers: { allow: found.allow.join(', ') },
                });
            }
            const def = found.match.handler;
            route = def.path;
            ctx.params = found.match.params;
            if (draining)
                throw gatewayError('shutting_down');
            if (def.auth) {
                ctx.tenant = opts.authenticator.authenticate(req.headers);
                try {
                    const headers = opts.limiter.enforce(ctx.tenant.id, ctx.tenant.plan);
                    for (const [k, v] of Object.entries(headers))
                        res.setHeader(k, v);
                }
                catch (err) {
                    opts.onRateLimited?.(ctx.tenant.plan);
                    throw err;
                }
            }
            await def.handler(ctx);
        }
        catch (err) {
            failure = asGatewayError(err);
            if (!res.headersSent) {
                // The body may be partly unread (e.g. refused for size or auth); close the connection rather than drain an
                // arbitrarily large upload.
                if (!req.complete)
                    res.setHeader('connection', 'close');
                sendError(res, failure);
            }
            else if (!res.writableEnded) {
                // Headers are out (a stream was under way) and the handler could not finish it: cut the connection so the
                // client sees a truncated response instead of a hang.
                res.destroy();
            }
        }
        finally {
            const done = () => opts.onRequestDone?.({
                requestId,
                method: req.method ?? 'GET',
                route,
                status: res.statusCode,
                tenant: ctx.tenant,
                durationMs: opts.clock() - started,
                error: failure,
                annotations: ctx.annotations,
            });
            if (res.writableFinished || res.destroyed)
                done();
            else
                res.once('close', done);
        }
    }
    return {
        server,
        inFlight: () => inFlight,
        drain: () => {
            draining = true;
            server.closeIdleConnections();
        },
    };
}
//# sourceMappingURL=server.js.map