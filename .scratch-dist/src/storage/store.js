/**
 * The LMDB environment: opened once, here, and handed to the repositories in this folder. Nothing outside
 * `src/storage/` imports lmdb. Keys are arrays so that ranges by prefix are natural and ordered:
 * every tenant-owned record starts with the tenant id, so one tenant can never range over another's keys.
 *
 * Durability: lmdb-js commits asynchronous writes in batches and resolves their promises only after the commit is
 * synced to disk (we never set `noSync`), so `await store.transaction(...)` means durable. Batching is what makes
 * saves fast (one putSync per message measured ~2k/s here; batched writes 100k+/s).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'lmdb';
export const SCHEMA_VERSION = 1;
export function openStore(opts) {
    mkdirSync(opts.dir, { recursive: true });
    const root = open({
        path: join(opts.dir, 'recallgate.lmdb'),
        maxDbs: opts.maxDbs ?? 16,
        // Values are small structured records; msgpack (the default) keeps them compact and typed.
        encoding: 'msgpack',
    });
    const db = (name) => root.openDB({ name, encoding: 'msgpack' });
    const store = {
        root,
        keys: db('keys'),
        sessions: db('sessions'),
        messages: db('messages'),
        files: db('files'),
        chunks: db('chunks'),
        vectors: db('vectors'),
        meta: db('meta'),
        transaction: (fn) => root.transaction(fn),
        transactionSync: (fn) => root.transactionSync(fn),
        close: () => root.close(),
    };
    const version = store.meta.get('schemaVersion');
    if (version === undefined)
        store.meta.putSync('schemaVersion', SCHEMA_VERSION);
    else if (version !== SCHEMA_VERSION)
        throw new Error(`DATA_DIR holds schema version ${String(version)}; this build reads ${SCHEMA_VERSION}`);
    return store;
}
//# sourceMappingURL=store.js.map