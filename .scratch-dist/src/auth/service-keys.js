/**
 * Service-key primitives. Keys are stored only as SHA-256 hashes; a key's tenant id is derived from its hash, so a
 * tenant's data is reachable only through that key and the raw key never needs to be kept anywhere.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
export const KEY_PREFIX = 'rg_';
export function hashKey(key) {
    return createHash('sha256').update(key, 'utf8').digest('hex');
}
/** A new random key: 192 bits, URL-safe. */
export function generateKey(random = randomBytes) {
    return KEY_PREFIX + random(24).toString('base64url');
}
/** Short public id of a key (safe to print, log and use in `keys revoke`). */
export function keyIdFor(hash) {
    return `key_${hash.slice(0, 12)}`;
}
/** The tenant a key owns: scopes every session, file and index of that key. */
export function tenantIdFor(hash) {
    return `t_${hash.slice(0, 24)}`;
}
/** Constant-time equality of two hex digests of equal length. */
export function sameHash(a, b) {
    const ab = Buffer.from(a, 'hex');
    const bb = Buffer.from(b, 'hex');
    return ab.length === bb.length && timingSafeEqual(ab, bb);
}
//# sourceMappingURL=service-keys.js.map