/**
 * Incremental Okapi BM25 over analyzed terms, in memory, for one namespace.
 *
 * Layout is for the search hot path (target ≤ 1 ms p50 at 100k chunks, see bench/rag-perf.ts): documents live in
 * dense slots, each term has a growable posting list of (slot, tf) in typed arrays, and a query accumulates scores
 * into one reused Float32Array, touching only the slots that contain a query term. Removal tombstones the slot and
 * fixes document frequencies at once (so idf stays exact); postings are compacted when tombstones outnumber live
 * documents, which keeps memory proportional to the live set.
 */
const INITIAL_POSTINGS = 4;
export class Bm25Index {
    #k1;
    #b;
    #maxDocs;
    #termIds = new Map();
    #postDocs = [];
    #postTfs = [];
    #postLen = [];
    #df = [];
    #slotOf = new Map();
    #slotLabel = new Float64Array(64);
    #slotLen = new Float32Array(64);
    #slotAlive = new Uint8Array(64);
    #slotTerms = [];
    #slots = 0;
    #live = 0;
    #totalLen = 0;
    #scores = new Float32Array(64);
    #touched = new Int32Array(64);
    constructor(opts) {
        this.#k1 = opts.k1 ?? 1.2;
        this.#b = opts.b ?? 0.75;
        this.#maxDocs = opts.maxDocs;
        if (!(this.#maxDocs >= 1))
            throw new RangeError('Bm25Index: maxDocs must be ≥ 1');
    }
    get size() {
        return this.#live;
    }
    has(label) {
        return this.#slotOf.has(label);
    }
    /** Index `terms` (from `analyze`) under `label`. Re-adding a label replaces its document. */
    add(label, terms) {
        if (this.#slotOf.has(label))
            this.remove(label);
        if (this.#live >= this.#maxDocs)
            throw new RangeError(`Bm25Index: more than ${this.#maxDocs} documents`);
        const counts = new Map();
        for (const t of terms) {
            let id = this.#termIds.get(t);
            if (id === undefined) {
                id = this.#postDocs.length;
                this.#termIds.set(t, id);
                this.#postDocs.push(new Uint32Array(INITIAL_POSTINGS));
                this.#postTfs.push(new Uint16Array(INITIAL_POSTINGS));
                this.#postLen.push(0);
                this.#df.push(0);
            }
            counts.set(id, (counts.get(id) ?? 0) + 1);
        }
        const slot = this.#newSlot();
        this.#slotLabel[slot] = label;
        this.#slotLen[slot] = terms.length;
        this.#slotAlive[slot] = 1;
        const ids = new Uint32Array(counts.size);
        let i = 0;
        for (const [id, tf] of counts) {
            ids[i++] = id;
            this.#append(id, slot, Math.min(tf, 0xffff));
            this.#df[id] = (this.#df[id] ?? 0) + 1;
        }
        this.#slotTerms[slot] = ids;
        this.#slotOf.set(label, slot);
        this.#live++;
        this.#totalLen += terms.length;
    }
    /** Forget `label`; false if it was not indexed. */
    remove(label) {
        const slot = this.#slotOf.get(label);
        if (slot === undefined)
            return false;
        this.#slotOf.delete(label);
        this.#slotAlive[slot] = 0;
        for (const id of this.#slotTerms[slot] ?? [])
            this.#df[id] = (this.#df[id] ?? 1) - 1;
        this.#slotTerms[slot] = null;
        this.#live--;
        this.#totalLen -= this.#slotLen[slot] ?? 0;
        if (this.#slots - this.#live > Math.max(1024, this.#live))
            this.#compact();
        return true;
    }
    /** The `k` best documents for `queryTerms`, best first; documents sharing no term with the query are not returned. */
    search(queryTerms, k) {
        if (this.#live === 0 || k <= 0)
            return [];
        const k1 = this.#k1;
        const b = this.#b;
        const n = this.#live;
        const avg = this.#totalLen / n || 1;
        const scores = this.#scores;
        const touched = this.#touched;
        const alive = this.#slotAlive;
        const lens = this.#slotLen;
        let nTouched = 0;
        for (const t of new Set(queryTerms)) {
            const id = this.#termIds.get(t);
            if (id === undefined)
                continue;
            const df = this.#df[id] ?? 0;
            if (df === 0)
                continue;
            const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
            const docs = this.#postDocs[id];
            const tfs = this.#postTfs[id];
            const len = this.#postLen[id] ?? 0;
            const idfK = idf * (k1 + 1);
            const c0 = k1 * (1 - b);
            const c1 = (k1 * b) / avg;
            for (let i = 0; i < len; i++) {
                const slot = docs[i];
                if (alive[slot] === 0)
                    continue;
                const tf = tfs[i];
                const prev = scores[slot];
                if (prev === 0)
                    touched[nTouched++] = slot;
                scores[slot] = prev + (idfK * tf) / (tf + c0 + c1 * lens[slot]);
            }
        }
        const top = topK(scores, touched, nTouched, k);
        for (let i = 0; i < nTouched; i++)
            scores[touched[i]] = 0;
        return top.map(({ slot, score }) => ({ label: this.#slotLabel[slot], score }));
    }
    #newSlot() {
        if (this.#slots === this.#slotAlive.length) {
            const cap = this.#slots * 2;
            this.#slotLabel = grow(this.#slotLabel, cap, Float64Array);
            this.#slotLen = grow(this.#slotLen, cap, Float32Array);
            this.#slotAlive = grow(this.#slotAlive, cap, Uint8Array);
            this.#scores = new Float32Array(cap);
            this.#touched = new Int32Array(cap);
        }
        return this.#slots++;
    }
    #append(id, slot, tf) {
        const len = this.#postLen[id] ?? 0;
        let docs = this.#postDocs[id];
        let tfs = this.#postTfs[id];
        if (len === docs.length) {
            docs = grow(docs, len * 2, Uint32Array);
            tfs = grow(tfs, len * 2, Uint16Array);
            this.#postDocs[id] = docs;
            this.#postTfs[id] = tfs;
        }
        docs[len] = slot;
        tfs[len] = tf;
        this.#postLen[id] = len + 1;
    }
    /** Renumber live slots densely and drop dead postings; terms that no longer occur keep an empty list. */
    #compact() {
        const newSlot = new Int32Array(this.#slots).fill(-1);
        let next = 0;
        for (let s = 0; s < this.#slots; s++) {
            if (this.#slotAlive[s] === 1)
                newSlot[s] = next++;
        }
        for (let id = 0; id < this.#postDocs.length; id++) {
            const docs = this.#postDocs[id];
            const tfs = this.#postTfs[id];
            const len = this.#postLen[id] ?? 0;
            let w = 0;
            for (let i = 0; i < len; i++) {
                const ns = newSlot[docs[i]];
                if (ns < 0)
                    continue;
                docs[w] = ns;
                tfs[w] = tfs[i];
                w++;
            }
            this.#postLen[id] = w;
            if (w < docs.length / 4 && docs.length > INITIAL_POSTINGS) {
                const cap = Math.max(INITIAL_POSTINGS, w * 2);
                this.#postDocs[id] = docs.slice(0, cap);
                this.#postTfs[id] = tfs.slice(0, cap);
            }
        }
        const cap = Math.max(64, next * 2);
        const label = new Float64Array(cap);
        const lens = new Float32Array(cap);
        const alive = new Uint8Array(cap);
        const terms = [];
        for (let s = 0; s < this.#slots; s++) {
            const ns = newSlot[s];
            if (ns < 0)
                continue;
            label[ns] = this.#slotLabel[s];
            lens[ns] = this.#slotLen[s];
            alive[ns] = 1;
            terms[ns] = this.#slotTerms[s] ?? null;
            this.#slotOf.set(label[ns], ns);
        }
        this.#slotLabel = label;
        this.#slotLen = lens;
        this.#slotAlive = alive;
        this.#slotTerms = terms;
        this.#slots = next;
        this.#scores = new Float32Array(cap);
        this.#touched = new Int32Array(cap);
    }
}
function grow(a, cap, Ctor) {
    const b = new Ctor(cap);
    b.set(a);
    return b;
}
/**
 * The k highest of `scores[touched[0..n)]`, best first, with a bounded min-heap (k ≪ n on the hot path).
 * Ties break toward the lower slot (older document) so results are deterministic.
 */
function topK(scores, touched, n, k) {
    const heapS = [];
    const heapV = [];
    const worse = (i, j) => {
        const a = heapV[i];
        const c = heapV[j];
        return a < c || (a === c && heapS[i] > heapS[j]);
    };
    const swap = (i, j) => {
        const s = heapS[i];
        heapS[i] = heapS[j];
        heapS[j] = s;
        const v = heapV[i];
        heapV[i] = heapV[j];
        heapV[j] = v;
    };
    for (let t = 0; t < n; t++) {
        const slot = touched[t];
        const v = scores[slot];
        if (heapS.length < k) {
            heapS.push(slot);
            heapV.push(v);
            let i = heapS.length - 1;
            while (i > 0) {
                const p = (i - 1) >> 1;
                if (!worse(i, p))
                    break;
                swap(i, p);
                i = p;
            }
            continue;
        }
        const rootV = heapV[0];
        if (v < rootV || (v === rootV && slot > heapS[0]))
            continue;
        heapS[0] = slot;
        heapV[0] = v;
        let i = 0;
        for (;;) {
            const l = 2 * i + 1;
            const r = l + 1;
            let m = i;
            if (l < heapS.length && worse(l, m))
                m = l;
            if (r < heapS.length && worse(r, m))
                m = r;
            if (m === i)
                break;
            swap(i, m);
            i = m;
        }
    }
    const out = heapS.map((slot, i) => ({ slot, score: heapV[i] }));
    out.sort((a, b) => b.score - a.score || a.slot - b.slot);
    return out;
}
//# sourceMappingURL=bm25.js.map