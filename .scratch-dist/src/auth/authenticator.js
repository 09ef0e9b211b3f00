import { gatewayError } from '../errors.js';
import { hashKey, sameHash, tenantIdFor } from './service-keys.js';
export class Authenticator {
    #inline = new Map();
    #stored;
    constructor(opts) {
        for (const [key, plan] of opts.inlineKeys)
            this.#inline.set(hashKey(key), plan);
        this.#stored = opts.stored;
    }
    /** Header names are case-insensitive (node lower-cases them): `serviceKey`, alias `x-service-key`. */
    static presentedKey(headers) {
        const v = headers['servicekey'] ?? headers['x-service-key'];
        const key = Array.isArray(v) ? v[0] : v;
        return key === undefined || key === '' ? undefined : key;
    }
    authenticate(headers) {
        const key = Authenticator.presentedKey(headers);
        if (key === undefined)
            throw gatewayError('missing_service_key');
        const hash = hashKey(key);
        let inlinePlan;
        for (const [h, plan] of this.#inline) {
            // Every inline hash is compared in constant time and the loop never stops early, so the time taken does not
            // depend on which key (if any) matched.
            if (sameHash(h, hash))
                inlinePlan = plan;
        }
        if (inlinePlan !== undefined)
            return { id: tenantIdFor(hash), plan: inlinePlan };
        const tenant = this.#stored.lookup(hash);
        if (tenant === undefined)
            throw gatewayError('invalid_service_key');
        return tenant;
    }
}
//# sourceMappingURL=authenticator.js.map