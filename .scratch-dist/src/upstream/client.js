/**
 * The one HTTP client to the model-routing provider: an undici Pool with keep-alive to UPSTREAM_BASE_URL's origin.
 * Timeouts are set on purpose: undici's 300 s default body timeout would cut a long stream, while no timeout at all
 * would let a hung upstream hold a client forever. `bodyTimeout` is the idle gap allowed between two body chunks,
 * so a stream that keeps sending (tokens or keep-alive comments) lives as long as it needs to.
 * Note undici's timers are coarse (a 500 ms timeout fires near 800 ms).
 */
import { Pool } from 'undici';
import { transportError } from './errors.js';
export class UpstreamClient {
    #pool;
    #basePath;
    #extraHeaders;
    constructor(opts) {
        const url = new URL(opts.baseUrl);
        this.#basePath = url.pathname.replace(/\/+$/, '');
        this.#pool = new Pool(url.origin, {
            connections: opts.connections,
            connectTimeout: opts.connectTimeout,
            headersTimeout: opts.headersTimeout,
            bodyTimeout: opts.bodyTimeout,
            keepAliveTimeout: 30_000,
            // Pipelining stays at 1: a slow stream must not hold up the requests queued behind it on the same socket.
            pipelining: 1,
        });
        this.#extraHeaders = {};
        if (opts.httpReferer)
            this.#extraHeaders['http-referer'] = opts.httpReferer;
        if (opts.xTitle)
            this.#extraHeaders['x-title'] = opts.xTitle;
    }
    /** POST /chat/completions. `authorization` is forwarded exactly as the client sent it. */
    async chat(body, opts) {
        return this.#request('POST', '/chat/completions', {
            signal: opts.signal,
            body,
            headers: {
                ...this.#extraHeaders,
                authorization: opts.authorization,
                'content-type': 'application/json',
                accept: opts.stream ? 'text/event-stream' : 'application/json',
            },
        });
    }
    async get(path, opts) {
        const headers = { ...this.#extraHeaders, accept: 'application/json' };
        if (opts.authorization)
            headers.authorization = opts.authorization;
        return this.#request('GET', path, { headers, signal: opts.signal });
    }
    async #request(method, path, o) {
        try {
            const res = await this.#pool.request({
                method,
                path: this.#basePath + path,
                headers: o.headers,
                body: o.body,
                signal: o.signal,
            });
            return { status: res.statusCode, headers: res.headers, body: res.body };
        }
        catch (err) {
            throw transportError(err);
        }
    }
    close() {
        return this.#pool.close();
    }
    destroy() {
        return this.#pool.destroy();
    }
}
/** Read a whole upstream body, bounded: beyond `limit` bytes the response is treated as invalid. */
export async function readUpstreamBody(body, limit) {
    const parts = [];
    let size = 0;
    try {
        for await (const chunk of body) {
            const buf = chunk;
            size += buf.length;
            if (size > limit) {
                body.destroy();
                throw Object.assign(new Error(`upstream body larger than ${limit} bytes`), { code: 'RG_UPSTREAM_TOO_LARGE' });
            }
            parts.push(buf);
        }
    }
    catch (err) {
        throw transportError(err);
    }
    return Buffer.concat(parts, size).toString('utf8');
}
//# sourceMappingURL=client.js.map