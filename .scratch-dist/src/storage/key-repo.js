/**
 * Service keys at rest: hash → record, in the `keys` database. Raw keys are never written. Lookups go to LMDB on
 * every request (a memory-mapped read of a few µs), so a key created or revoked by the CLI in another process takes
 * effect at once without any cache to invalidate.
 */
import { generateKey, hashKey, keyIdFor, sameHash, tenantIdFor } from '../auth/service-keys.js';
export class KeyRepo {
    #store;
    #now;
    constructor(store, opts) {
        this.#store = store;
        this.#now = opts.now;
    }
    /** Create a key; the raw key is returned once and never stored. */
    async create(plan, label) {
        const key = generateKey();
        const hash = hashKey(key);
        const record = { id: keyIdFor(hash), hash, plan, createdAt: this.#now(), ...(label ? { label } : {}) };
        await this.#store.keys.put(hash, record);
        return { key, record };
    }
    list() {
        const out = [];
        for (const { value } of this.#store.keys.getRange())
            out.push(value);
        return out;
    }
    /** Revoke by key id (`key_…`). Returns false when no active key has that id. */
    async revoke(id) {
        for (const { key, value } of this.#store.keys.getRange()) {
            const rec = value;
            if (rec.id === id && rec.revokedAt === undefined) {
                await this.#store.keys.put(key, { ...rec, revokedAt: this.#now() });
                return true;
            }
        }
        return false;
    }
    countActive() {
        let n = 0;
        for (const { value } of this.#store.keys.getRange())
            if (value.revokedAt === undefined)
                n++;
        return n;
    }
    /** The tenant for a presented key hash, if an active stored key has it. */
    lookup(hash) {
        const rec = this.#store.keys.get(hash);
        if (rec === undefined || rec.revokedAt !== undefined || !sameHash(rec.hash, hash))
            return undefined;
        return { id: tenantIdFor(rec.hash), plan: rec.plan };
    }
}
//# sourceMappingURL=key-repo.js.map