/**
 * The knowledge base: per-tenant files, ingested (extract → chunk → embed → one LMDB transaction → indexes) and
 * searched (BM25 + vectors, fused). The HTTP routes and the chat pipeline call this; it holds no HTTP knowledge.
 *
 * Tenants are separate all the way down: LMDB keys start with the tenant, and each tenant has its own index
 * namespace (`files:<tenant>`), so a search can only ever rank the caller's own chunks.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { gatewayError } from '../errors.js';
import { FileRepo } from '../storage/file-repo.js';
import { chunkText } from './chunker.js';
import { extract } from './extract.js';
import { SearchIndex } from './search-index.js';
export { renderContextMessage, selectContext } from './context-message.js';
const MAX_K = 100;
export class KnowledgeBase {
    #repo;
    #index;
    #embedder;
    #opts;
    #maxChunksPerTenant;
    constructor(opts) {
        this.#opts = opts;
        this.#embedder = opts.embedder;
        this.#repo = new FileRepo(opts.store);
        this.#maxChunksPerTenant = opts.maxChunksPerTenant ?? 1_000_000;
        const repo = this.#repo;
        this.#index = new SearchIndex({
            dir: join(opts.dataDir, 'index'),
            embedder: opts.embedder,
            maxLoaded: opts.maxLoadedTenants,
            maxDocsPerNamespace: this.#maxChunksPerTenant,
            rrfK: opts.rrfK,
            candidates: opts.candidates,
            hnsw: opts.hnsw,
            source: {
                meta: (ns) => repo.indexMeta(ns),
                vectors: (ns) => repo.vectors(ns),
                *documents(ns) {
                    for (const { fileId, index, chunk } of repo.tenantChunks(tenantOf(ns)))
                        yield { label: chunk.label, ref: [fileId, index], text: indexText(chunk) };
                },
            },
        });
    }
    /** Load every tenant's index, rebuilding missing, stale or corrupt graph files from LMDB (up to the LRU bound). */
    init() {
        const namespaces = this.#repo.namespaces(NS_PREFIX);
        for (const ns of namespaces.slice(0, this.#opts.maxLoadedTenants ?? 64)) {
            if ((this.#repo.indexMeta(ns)?.count ?? 0) > 0)
                this.#index.load(ns);
        }
        return Promise.resolve();
    }
    async ingest(tenant, file) {
        const extracted = await extract(file);
        const chunks = chunkText(extracted, {
            chunkTokens: this.#opts.chunkTokens,
            overlapTokens: this.#opts.chunkOverlap,
            maxChunks: this.#opts.maxChunksPerFile,
        });
        if (chunks.length === 0)
            throw gatewayError('empty_file', { param: 'file', message: `${file.filename} has no extractable text` });
        const ns = namespaceOf(tenant);
        const check = (meta, adding) => {
            this.#index.checkEmbedder(meta);
            if ((meta?.count ?? 0) + adding > this.#maxChunksPerTenant)
                throw gatewayError('payload_too_large', {
                    param: 'file',
                    message: `This file would take the knowledge base past ${this.#maxChunksPerTenant} chunks: delete some files first`,
                });
        };
        // Refuse before paying for embeddings; checked again inside the transaction, where it is authoritative.
        check(this.#repo.indexMeta(ns), chunks.length);
        const texts = chunks.map(indexText);
        const vectors = await this.#embedder.embed(texts);
        validateVectors(vectors, chunks.length);
        const record = {
            id: `file-${this.#newId()}`,
            object: 'file',
            filename: file.filename,
            bytes: file.bytes.length,
            chunks: chunks.length,
            status: 'processed',
            created_at: Math.floor(this.#opts.clock() / 1000),
            metadata: file.metadata,
            content_type: contentTypeOf(extracted.format, file.contentType),
        };
        // Loaded before the write, so the change is applied in memory instead of forcing a rebuild later.
        this.#index.load(ns);
        const change = await this.#repo.insertFile({
            tenant,
            namespace: ns,
            file: record,
            chunks: chunks.map(toRow),
            vectors,
            embedderId: this.#embedder.id,
            check,
        });
        this.#index.applyAdd(ns, change.fromVersion, change.meta, chunks.map((c, i) => ({ label: change.labels[i], ref: [record.id, c.index], text: texts[i], vector: vectors[i] })));
        return record;
    }
    list(tenant) {
        return this.#repo.listFiles(tenant);
    }
    get(tenant, id) {
        return this.#repo.getFile(tenant, id);
    }
    async delete(tenant, id) {
        const ns = namespaceOf(tenant);
        const change = await this.#repo.deleteFile(tenant, ns, id);
        if (change === undefined)
            return false;
        this.#index.applyRemove(ns, change.fromVersion, change.meta, change.labels);
        return true;
    }
    /** The tenant's best chunks for `query`, best first. No files → []. */
    async search(tenant, query, k, mode = 'hybrid') {
        const hits = await this.#index.search(namespaceOf(tenant), query, Math.min(Math.max(1, Math.floor(k)), MAX_K), mode);
        const out = [];
        const filenames = new Map();
        for (const { ref, score } of hits) {
            const [fileId, index] = ref;
            const chunk = this.#repo.getChunk(tenant, fileId, index);
            if (!filenames.has(fileId))
                filenames.set(fileId, this.#repo.getFile(tenant, fileId)?.filename);
            const filename = filenames.get(fileId);
            // A hit whose rows are gone was deleted between ranking and lookup: it is not returned.
            if (chunk === undefined || filename === undefined)
                continue;
            out.push({
                file_id: fileId,
                filename,
                chunk_index: index,
                score,
                text: chunk.text,
                tokens: chunk.tokens,
                ...(chunk.headingPath.length ? { heading_path: chunk.headingPath } : {}),
                char_start: chunk.start,
                char_end: chunk.end,
            });
        }
        return out;
    }
    /** Save changed index files now (they are also saved a few seconds after changes and on close). */
    flush() {
        this.#index.flush();
    }
    close() {
        return this.#index.close();
    }
    #newId() {
        const random = this.#opts.random;
        if (random === undefined)
            return randomBytes(12).toString('hex');
        let id = '';
        for (let i = 0; i < 24; i++)
            id += Math.floor(random() * 16).toString(16);
        return id;
    }
}
const NS_PREFIX = 'files:';
const namespaceOf = (tenant) => `${NS_PREFIX}${tenant}`;
const tenantOf = (ns) => ns.slice(NS_PREFIX.length);
/** What BM25 and the embedder see: the heading path gives a chunk the words of the section it belongs to. */
function indexText(c) {
    return c.headingPath.length ? `${c.headingPath.join(' / ')}\n${c.text}` : c.text;
}
function toRow(c) {
    return { text: c.text, tokens: c.tokens, start: c.start, end: c.end, headingPath: c.headingPath };
}
function validateVectors(vectors, expected) {
    const dimension = vectors[0]?.length ?? 0;
    if (vectors.length !== expected || dimension === 0 || vectors.some((v) => v.length !== dimension))
        throw gatewayError('upstream_invalid_response', {
            message: `The embedder returned ${vectors.length} vectors of inconsistent size for ${expected} chunks`,
        });
}
const FORMAT_TYPES = {
    text: 'text/plain',
    markdown: 'text/markdown',
    html: 'text/html',
    json: 'application/json',
    csv: 'text/csv',
    pdf: 'application/pdf',
};
/** The content type the file was read as: the client's, when it names the same format, else the format's own. */
function contentTypeOf(format, given) {
    const mine = FORMAT_TYPES[format] ?? 'application/octet-stream';
    const base = given?.split(';')[0]?.trim().toLowerCase();
    return base && !['application/octet-stream', 'text/plain'].includes(base) ? base : mine;
}
//# sourceMappingURL=knowledge-base.js.map