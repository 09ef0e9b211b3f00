/**
 * Conversation memory: sessions and their messages in LMDB, scoped by tenant.
 *
 *   sessions  [tenant, sessionId]       → { createdAt, updatedAt, nextSeq, count }
 *   messages  [tenant, sessionId, seq]  → { role, content, tokens, createdAt }
 *
 * Seqs are assigned inside the write transaction from the session record, so concurrent appends to one session never
 * collide; they are contiguous (appends at the tail, pruning at the head), so a session's messages are exactly
 * seqs [nextSeq - count, nextSeq) and every read or delete is computed from the record, never a scan.
 *
 * Every write is one abortable (child) transaction: an exchange, its pruning and whatever the hooks index commit
 * together or not at all — also if a hook throws, and also under kill -9 (LMDB's copy-on-write commit).
 *
 * History reads are the hot path (every chat request with a session). Decoding 200 messages from LMDB measured
 * ~0.5 ms p50 here (1,000: ~2 ms), half the whole memory path's budget, so the newest messages of recently used
 * sessions are kept in a bounded LRU that writes patch after they commit. LMDB stays the source of truth: a cache
 * entry that cannot be patched exactly is dropped and read again.
 */
import { LRUCache } from 'lru-cache';
import { invalidParam } from '../errors.js';
/** lmdb-js's default maximum key size, in bytes. */
const MAX_KEY_BYTES = 1978;
/** Key bytes besides the two strings: separators, a number, slack for the escape byte. */
const KEY_FIXED_BYTES = 16;
const MESSAGE_FIXED_BYTES = 96;
/** Above any first byte ordered-binary writes for a string, so [tenant, HIGH] ends a tenant's range of ids. */
const HIGH = Uint8Array.of(0xff);
/**
 * ordered-binary writes long strings as raw UTF-8: a NUL would merge into its element separator and a lone
 * surrogate would become U+FFFD (two ids, one key), and control characters decode ambiguously. Such ids are refused
 * rather than silently aliased.
 */
const UNSAFE_ID = /[\u0000-\u001f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
export class SessionRepo {
    #store;
    #max;
    #clock;
    #counter;
    #cache;
    #cachePerSession;
    #appendHooks = [];
    #deleteHooks = [];
    constructor(store, opts) {
        if (!Number.isInteger(opts.maxMessagesPerSession) || opts.maxMessagesPerSession < 1)
            throw new RangeError(`maxMessagesPerSession must be a positive integer, got ${opts.maxMessagesPerSession}`);
        this.#store = store;
        this.#max = opts.maxMessagesPerSession;
        this.#clock = opts.clock;
        this.#counter = opts.counter;
        this.#cachePerSession = opts.cacheMessagesPerSession ?? 1000;
        const sessions = opts.cacheSessions ?? 1000;
        this.#cache =
            sessions > 0 && this.#cachePerSession > 0
                ? new LRUCache({
                    max: sessions,
                    maxSize: opts.cacheBytes ?? 64 * 1024 * 1024,
                    sizeCalculation: (e) => Math.max(1, e.bytes),
                })
                : undefined;
    }
    onAppend(fn) {
        this.#appendHooks.push(fn);
    }
    onDelete(fn) {
        this.#deleteHooks.push(fn);
    }
    /** The newest `limit` messages (default all), oldest first. */
    history(tenant, sessionId, limit = Infinity) {
        checkSessionId(tenant, sessionId);
        if (limit <= 0)
            return [];
        const key = cacheKey(tenant, sessionId);
        const hit = this.#cache?.get(key);
        if (hit !== undefined && (hit.complete || hit.messages.length >= limit))
            return tail(hit.messages, limit);
        const rec = this.#record(tenant, sessionId);
        if (rec === undefined)
            return [];
        // Read what this call needs, and at least what the cache keeps, in one range.
        const want = Math.min(rec.count, Math.max(limit, this.#cachePerSession));
        const messages = this.#readRange(tenant, sessionId, rec.nextSeq - want, rec.nextSeq);
        if (this.#cache !== undefined) {
            const kept = tail(messages, this.#cachePerSession);
            this.#cache.set(key, { messages: kept, complete: kept.length === rec.count, bytes: sizeOf(kept) });
        }
        return tail(messages, limit);
    }
    /**
     * Save one exchange (the request's non-system messages and the reply) in one transaction; resolves once it is
     * committed and flushed. Creates the session; prunes the oldest messages beyond the limit.
     */
    async appendExchange(tenant, sessionId, messages) {
        checkSessionId(tenant, sessionId);
        if (messages.length === 0)
            return [];
        const now = this.#clock();
        // Tokenize before the transaction: it holds the single write lock.
        const records = messages.map((m) => {
            if (m.role !== 'user' && m.role !== 'assistant')
                throw new TypeError(`only user and assistant messages are stored, got "${m.role}"`);
            return { role: m.role, content: m.content, tokens: this.#counter.textTokens(m.content), createdAt: now };
        });
        const { messages: db, sessions } = this.#store;
        const { saved, pruned } = await this.#store.root.childTransaction(() => {
            const rec = this.#record(tenant, sessionId) ?? { createdAt: now, updatedAt: now, nextSeq: 0, count: 0 };
            const saved = records.map((r, i) => stored(rec.nextSeq + i, r));
            for (const [i, r] of records.entries())
                db.put([tenant, sessionId, rec.nextSeq + i], r);
            rec.nextSeq += records.length;
            rec.count += records.length;
            rec.updatedAt = Math.max(rec.updatedAt, now);
            const pruned = [];
            for (let seq = rec.nextSeq - rec.count; rec.count > this.#max; seq++, rec.count--) {
                const old = db.get([tenant, sessionId, seq]);
                if (old !== undefined)
                    pruned.push(stored(seq, asMessageRecord(old)));
                db.remove([tenant, sessionId, seq]);
            }
            sessions.put([tenant, sessionId], rec);
            for (const hook of this.#appendHooks)
                hook(tenant, sessionId, saved, pruned);
            return { saved, pruned };
        });
        await this.#store.root.flushed;
        this.#patchCache(cacheKey(tenant, sessionId), saved, pruned);
        return saved;
    }
    get(tenant, sessionId) {
        checkSessionId(tenant, sessionId);
        const rec = this.#record(tenant, sessionId);
        return rec === undefined ? undefined : info(sessionId, rec);
    }
    /** A page of the tenant's sessions ordered by id (code point order); `after` is the previous page's last id. */
    list(tenant, opts) {
        const limit = Math.max(0, Math.floor(opts.limit));
        const data = [];
        let hasMore = false;
        const range = this.#store.sessions.getRange({
            start: opts.after === undefined ? [tenant] : [tenant, opts.after],
            end: [tenant, HIGH],
            // +1 to learn whether there is more, +1 because `start` includes `after` itself.
            limit: limit + 2,
        });
        for (const { key, value } of range) {
            const id = Array.isArray(key) ? key[1] : undefined;
            if (typeof id !== 'string' || id === opts.after)
                continue;
            if (data.length === limit) {
                hasMore = true;
                break;
            }
            data.push(info(id, asSessionRecord(value)));
        }
        return { data, hasMore };
    }
    /** Remove a session and all of its messages for good; false if it did not exist. */
    async delete(tenant, sessionId) {
        checkSessionId(tenant, sessionId);
        const { messages: db, sessions } = this.#store;
        const existed = await this.#store.root.childTransaction(() => {
            const rec = this.#record(tenant, sessionId);
            if (rec === undefined)
                return false;
            for (const hook of this.#deleteHooks)
                hook(tenant, sessionId);
            for (let seq = rec.nextSeq - rec.count; seq < rec.nextSeq; seq++)
                db.remove([tenant, sessionId, seq]);
            sessions.remove([tenant, sessionId]);
            return true;
        });
        await this.#store.root.flushed;
        this.#cache?.delete(cacheKey(tenant, sessionId));
        return existed;
    }
    #record(tenant, sessionId) {
        const v = this.#store.sessions.get([tenant, sessionId]);
        return v === undefined ? undefined : asSessionRecord(v);
    }
    #readRange(tenant, sessionId, fromSeq, toSeq) {
        const out = [];
        const range = this.#store.messages.getRange({ start: [tenant, sessionId, fromSeq], end: [tenant, sessionId, toSeq] });
        for (const { key, value } of range) {
            const seq = Array.isArray(key) ? key[2] : undefined;
            if (typeof seq !== 'number')
                throw new Error(`corrupt message key ${JSON.stringify(key)}`);
            out.push(stored(seq, asMessageRecord(value)));
        }
        return out;
    }
    /**
     * Apply a committed append to the cached entry. Commits resolve in order, but a history read may already have
     * cached the post-commit state (or an older one): patch only when the entry ends exactly where `saved` begins,
     * skip when it already has them, and otherwise drop it so the next read goes to LMDB.
     */
    #patchCache(key, saved, pruned) {
        const cache = this.#cache;
        const entry = cache?.get(key);
        const first = saved[0];
        const last = saved.at(-1);
        if (cache === undefined || entry === undefined || first === undefined || last === undefined)
            return;
        const lastCached = entry.messages.at(-1)?.seq ?? -1;
        if (lastCached >= last.seq)
            return;
        if (lastCached !== first.seq - 1 && entry.messages.length > 0) {
            cache.delete(key);
            return;
        }
        const cutoff = pruned.length > 0 ? (pruned.at(-1)?.seq ?? -1) : -1;
        let messages = entry.messages.filter((m) => m.seq > cutoff).concat(saved);
        let complete = entry.complete;
        if (messages.length > this.#cachePerSession) {
            messages = tail(messages, this.#cachePerSession);
            complete = false;
        }
        cache.set(key, { messages, complete, bytes: sizeOf(messages) });
    }
}
/** Refuse ids the key encoding cannot keep distinct, or too long for an LMDB key: a 400 naming `sessionId`. */
export function checkSessionId(tenant, sessionId) {
    if (sessionId.length === 0)
        throw invalidParam('sessionId', 'sessionId must be a non-empty string');
    if (UNSAFE_ID.test(sessionId))
        throw invalidParam('sessionId', 'sessionId must not contain control characters or unpaired surrogates');
    if (Buffer.byteLength(tenant) + Buffer.byteLength(sessionId) + KEY_FIXED_BYTES > MAX_KEY_BYTES)
        throw invalidParam('sessionId', 'sessionId is too long to store');
}
function cacheKey(tenant, sessionId) {
    // Session ids cannot contain NUL (checkSessionId), so this pairing is unambiguous.
    return `${tenant}\u0000${sessionId}`;
}
function tail(items, limit) {
    return limit >= items.length ? items.slice() : items.slice(items.length - limit);
}
function sizeOf(messages) {
    let bytes = 0;
    for (const m of messages)
        bytes += m.content.length * 2 + MESSAGE_FIXED_BYTES;
    return bytes;
}
function stored(seq, r) {
    // Frozen: the same objects are handed out from the cache to every request.
    return Object.freeze({ seq, role: r.role, content: r.content, tokens: r.tokens, createdAt: r.createdAt });
}
function info(id, rec) {
    return { id, createdAt: rec.createdAt, updatedAt: rec.updatedAt, messageCount: rec.count };
}
function isObject(v) {
    return typeof v === 'object' && v !== null;
}
function asSessionRecord(v) {
    if (!isObject(v) || typeof v.nextSeq !== 'number' || typeof v.count !== 'number')
        throw new Error('corrupt session record');
    return { createdAt: Number(v.createdAt), updatedAt: Number(v.updatedAt), nextSeq: v.nextSeq, count: v.count };
}
function asMessageRecord(v) {
    if (!isObject(v) || (v.role !== 'user' && v.role !== 'assistant') || typeof v.content !== 'string')
        throw new Error('corrupt message record');
    return { role: v.role, content: v.content, tokens: Number(v.tokens), createdAt: Number(v.createdAt) };
}
//# sourceMappingURL=session-repo.js.map