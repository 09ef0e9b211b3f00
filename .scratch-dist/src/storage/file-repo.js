// Ids are ASCII ('file-…', hex tenant ids), so ['', '\uffff'] brackets every id under a prefix.
const LOW = '';
const HIGH = '\uffff';
export class FileRepo {
    #store;
    constructor(store) {
        this.#store = store;
    }
    getFile(tenant, id) {
        return this.#store.files.get([tenant, id]);
    }
    /** A tenant's files, oldest first. */
    listFiles(tenant) {
        const rows = [];
        for (const { value } of this.#store.files.getRange({ start: [tenant, LOW], end: [tenant, HIGH] }))
            rows.push(value);
        return rows.sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : 1));
    }
    getChunk(tenant, fileId, index) {
        return this.#store.chunks.get([tenant, fileId, index]);
    }
    /** Every chunk of a tenant, in key order. */
    *tenantChunks(tenant) {
        for (const { key, value } of this.#store.chunks.getRange({ start: [tenant, LOW], end: [tenant, HIGH] })) {
            const k = key;
            yield { fileId: k[1], index: k[2], chunk: value };
        }
    }
    indexMeta(namespace) {
        return this.#store.meta.get(['index', namespace]);
    }
    /** Namespaces with index meta whose name starts with `prefix`. */
    namespaces(prefix) {
        const out = [];
        for (const key of this.#store.meta.getKeys({ start: ['index', prefix], end: ['index', prefix + HIGH] })) {
            out.push(key[1]);
        }
        return out;
    }
    *vectors(namespace) {
        for (const { key, value } of this.#store.vectors.getRange({ start: [namespace, 0], end: [namespace, Number.MAX_SAFE_INTEGER] })) {
            yield { label: key[1], vector: decodeVector(value) };
        }
    }
    /**
     * Store a file with its chunks and their vectors in one transaction. Labels are allocated inside it, so concurrent
     * ingestions into one namespace never collide. `check` sees the namespace meta first and may throw to refuse
     * (e.g. another embedder, too many documents); nothing is written then.
     */
    async insertFile(opts) {
        const { tenant, namespace, file, chunks, vectors } = opts;
        if (vectors.length !== chunks.length)
            throw new RangeError('insertFile: one vector per chunk');
        const dimension = vectors[0]?.length ?? 0;
        const store = this.#store;
        return store.transaction(() => {
            const before = this.indexMeta(namespace);
            opts.check(before, chunks.length);
            const empty = before === undefined || before.count === 0;
            const first = before?.nextLabel ?? 0;
            const labels = chunks.map((_, i) => first + i);
            store.files.put([tenant, file.id], file);
            chunks.forEach((c, i) => {
                const label = labels[i];
                store.chunks.put([tenant, file.id, i], { ...c, label });
                store.vectors.put([namespace, label], encodeVector(vectors[i]));
            });
            const meta = {
                embedderId: empty ? opts.embedderId : before.embedderId,
                dimension: empty ? dimension : before.dimension,
                version: (before?.version ?? 0) + 1,
                count: (before?.count ?? 0) + chunks.length,
                nextLabel: first + chunks.length,
            };
            store.meta.put(['index', namespace], meta);
            return { fromVersion: before?.version ?? 0, meta, labels };
        });
    }
    /** Delete a file, its chunks and vectors in one transaction; undefined if the tenant has no such file. */
    async deleteFile(tenant, namespace, id) {
        const store = this.#store;
        return store.transaction(() => {
            if (store.files.get([tenant, id]) === undefined)
                return undefined;
            const labels = [];
            const keys = [];
            for (const { key, value } of store.chunks.getRange({ start: [tenant, id, 0], end: [tenant, id, Number.MAX_SAFE_INTEGER] })) {
                keys.push(key);
                labels.push(value.label);
            }
            for (const key of keys)
                store.chunks.remove(key);
            for (const label of labels)
                store.vectors.remove([namespace, label]);
            store.files.remove([tenant, id]);
            const before = this.indexMeta(namespace);
            const meta = {
                embedderId: before?.embedderId ?? '',
                dimension: before?.dimension ?? 0,
                version: (before?.version ?? 0) + 1,
                count: Math.max(0, (before?.count ?? 0) - labels.length),
                nextLabel: before?.nextLabel ?? 0,
            };
            store.meta.put(['index', namespace], meta);
            return { fromVersion: before?.version ?? 0, meta, labels };
        });
    }
}
export function encodeVector(v) {
    return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}
/** Copy out of LMDB's buffer (it may be reused, and may not be 4-byte aligned). */
export function decodeVector(bytes) {
    const copy = new Uint8Array(bytes.byteLength);
    copy.set(bytes);
    return new Float32Array(copy.buffer);
}
//# sourceMappingURL=file-repo.js.map