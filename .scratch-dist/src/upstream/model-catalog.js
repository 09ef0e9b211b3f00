/**
 * The upstream's model list, cached: the source of each model's `context_length` for packing and the body of
 * GET /api/v1/models. Stale-while-revalidate: once a list is cached, a stale entry is served immediately and refreshed
 * in the background, so the chat hot path never waits on /models after the first fetch; concurrent misses share one
 * fetch. A failed fetch is not fatal for chat: packing falls back to DEFAULT_CONTEXT_LENGTH.
 */
import { gatewayError } from '../errors.js';
import { readUpstreamBody } from './client.js';
import { upstreamHttpError } from './errors.js';
const MAX_MODELS_BODY = 32 * 1024 * 1024;
export class ModelCatalog {
    #upstream;
    #ttl;
    #clock;
    #cached;
    #inflight;
    constructor(opts) {
        this.#upstream = opts.upstream;
        this.#ttl = opts.ttl;
        this.#clock = opts.clock;
    }
    /** The raw list body for GET /api/v1/models. */
    async list(authorization) {
        return (await this.#get(authorization)).body;
    }
    /** The model's window if the upstream lists it; undefined if unknown or the list cannot be had. */
    async contextLength(model, authorization) {
        try {
            return (await this.#get(authorization)).windows.get(model);
        }
        catch {
            // Deliberately ignored: a chat must not fail because /models is down; the caller uses the default window.
            return undefined;
        }
    }
    async #get(authorization) {
        const c = this.#cached;
        if (c !== undefined) {
            if (this.#clock() - c.fetchedAt >= this.#ttl && this.#inflight === undefined) {
                // Background refresh; a failure keeps serving the previous list until the next attempt.
                this.#refresh(authorization).catch(() => undefined);
            }
            return c;
        }
        return this.#refresh(authorization);
    }
    #refresh(authorization) {
        this.#inflight ??= this.#fetch(authorization).finally(() => {
            this.#inflight = undefined;
        });
        return this.#inflight;
    }
    async #fetch(authorization) {
        const res = await this.#upstream.get('/models', { authorization });
        const text = await readUpstreamBody(res.body, MAX_MODELS_BODY);
        if (res.status < 200 || res.status > 299)
            throw upstreamHttpError(res.status, text);
        const windows = new Map();
        try {
            const parsed = JSON.parse(text);
            for (const m of parsed.data ?? []) {
                if (typeof m.id === 'string' && typeof m.context_length === 'number' && m.context_length > 0) {
                    windows.set(m.id, m.context_length);
                }
            }
        }
        catch (err) {
            throw gatewayError('upstream_invalid_response', { message: 'The upstream model list is not valid JSON', cause: err });
        }
        const cached = { body: text, windows, fetchedAt: this.#clock() };
        this.#cached = cached;
        return cached;
    }
}
//# sourceMappingURL=model-catalog.js.map