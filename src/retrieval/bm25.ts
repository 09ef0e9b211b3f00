/**
 * Incremental Okapi BM25 over analyzed terms, in memory, for one namespace.
 *
 * Layout is for the search hot path (target ≤ 1 ms p50 at 100k chunks, see bench/rag-perf.ts): documents live in
 * dense slots, each term has a growable posting list of (slot, tf) in typed arrays, and a query accumulates scores
 * into one reused Float32Array, touching only the slots that contain a query term. Removal tombstones the slot and
 * fixes document frequencies at once (so idf stays exact); postings are compacted when tombstones outnumber live
 * documents, which keeps memory proportional to the live set.
 *
 * Proximity: the top candidates get a bonus for query terms that occur close together (a sentence answering a
 * question usually holds several of its terms). On SQuAD (176/80 chunks) it moved the answer's chunk to rank 1 for
 * 2,388 questions instead of 2,326, and into the top 5 for 2,749 instead of 2,733, of 2,910 (bench/rag-eval.ts).
 * k1 and b barely matter there (k1 0.9–2, b 0.4–0.9 all within ±0.2 points), so the usual 1.2 / 0.75 stay.
 *
 * Pruning (MaxScore, term at a time): query terms are scored rarest first; before walking a long posting list, if the
 * k-th best score so far (k = the rerank depth) already exceeds the most the remaining terms could add together, the
 * remaining terms are scored only for the documents that can still reach it, from each document's own term sequence.
 * The results are exactly those of the exhaustive pass (a property test compares them). In the gateway's knowledge
 * scenario (100k chunks, a 12-word question, bench/scenarios/knowledge.ts) BM25's profiled time per request fell from
 * ≈ 900 to ≈ 420 µs; on SQuAD (bench/rag-eval.ts) every figure is unchanged.
 */
import { kthBest, topK } from './top-k.js'

export interface Bm25Options {
  /** Term-frequency saturation. Default 1.2. */
  k1?: number
  /** Length normalisation, 0 (none) to 1 (full). Default 0.75. */
  b?: number
  /** Hard cap on live documents; `add` past it throws. */
  maxDocs: number
  /**
   * Weight of the proximity bonus: the best total idf of distinct query terms found within `proximityWindow`
   * consecutive terms, added to the BM25 score of the top `rerankDepth` documents. Default 1; 0 turns it off.
   */
  proximity?: number
  /** Default 8 terms (stopwords excluded), about a sentence. */
  proximityWindow?: number
  /** Default 50. */
  rerankDepth?: number
  /**
   * MaxScore pruning (default on): stop walking the long posting lists of common query terms once they can no longer
   * change which documents rank first, and score only the documents that still can. Same results as off.
   */
  prune?: boolean
}

/** A query's pairs of consecutive terms (Bm25Index.relevance's `phraseWeight`). */
interface QueryPairs {
  /** First term id → second term id → index into `weights`. */
  next: Map<number, Map<number, number>>
  weights: number[]
  total: number
}

interface QueryTerm {
  id: number
  /** idf × (k1 + 1): the most this term adds to any document's score. */
  idfK: number
  /** Posting list length (live and tombstoned documents). */
  len: number
}

/** Lists shorter than this are walked whatever the bound says: checking costs about as much as walking them. */
const PRUNE_MIN_POSTINGS = 1024
/** Relative slack on bounds compared with float32 scores (an ulp is 6e-8 relative; a sum of a few dozen roundings). */
const ROUNDING_MARGIN = 1e-5

export interface ScoredLabel {
  label: number
  score: number
}

const INITIAL_POSTINGS = 4

export class Bm25Index {
  readonly #k1: number
  readonly #b: number
  readonly #maxDocs: number
  readonly #proximity: number
  readonly #window: number
  readonly #depth: number

  readonly #termIds = new Map<string, number>()
  #postDocs: Uint32Array[] = []
  #postTfs: Uint16Array[] = []
  #postLen: number[] = []
  #df: number[] = []

  readonly #slotOf = new Map<number, number>()
  #slotLabel = new Float64Array(64)
  #slotLen = new Float32Array(64)
  #slotAlive = new Uint8Array(64)
  #slotTerms: (Uint32Array | null)[] = []
  #slots = 0
  #live = 0
  #totalLen = 0

  #scores = new Float32Array(64)
  #tf = new Uint16Array(1024)
  #qw = new Float32Array(1024)
  #touched = new Int32Array(64)
  #candidates = new Int32Array(64)
  readonly #prune: boolean

  constructor(opts: Bm25Options) {
    this.#k1 = opts.k1 ?? 1.2
    this.#b = opts.b ?? 0.75
    this.#maxDocs = opts.maxDocs
    this.#proximity = opts.proximity ?? 1
    this.#window = opts.proximityWindow ?? 8
    this.#depth = opts.rerankDepth ?? 50
    this.#prune = opts.prune ?? true
    if (!(this.#maxDocs >= 1)) throw new RangeError('Bm25Index: maxDocs must be ≥ 1')
  }

  /** Searches that took MaxScore's shortcut (for tests and benchmarks: the results are the same either way). */
  prunedSearches = 0

  get size(): number {
    return this.#live
  }

  has(label: number): boolean {
    return this.#slotOf.has(label)
  }

  /** Index `terms` (from `analyze`) under `label`. Re-adding a label replaces its document. */
  add(label: number, terms: readonly string[]): void {
    const seq = new Uint32Array(terms.length)
    for (let i = 0; i < terms.length; i++) seq[i] = this.termId(terms[i] as string)
    this.addIds(label, seq)
  }

  /**
   * The id of `term` for `addIds`; a term not seen before gets one, with no documents yet (a search ignores it until
   * a document has it). A file's distinct terms are looked up once this way, not once per occurrence (chunk-terms.ts
   * `CodedTerms`).
   */
  termId(term: string): number {
    let id = this.#termIds.get(term)
    if (id === undefined) {
      id = this.#postDocs.length
      this.#termIds.set(term, id)
      this.#postDocs.push(new Uint32Array(INITIAL_POSTINGS))
      this.#postTfs.push(new Uint16Array(INITIAL_POSTINGS))
      this.#postLen.push(0)
      this.#df.push(0)
      if (id >= this.#tf.length) this.#tf = grow(this.#tf, this.#tf.length * 2, Uint16Array)
    }
    return id
  }

  /** `add`, with the document's terms as ids from `termId`, in order. `seq` becomes the index's own: not to be changed after. */
  addIds(label: number, seq: Uint32Array): void {
    if (this.#slotOf.has(label)) this.remove(label)
    if (this.#live >= this.#maxDocs) throw new RangeError(`Bm25Index: more than ${this.#maxDocs} documents`)
    const unique: number[] = []
    for (let i = 0; i < seq.length; i++) {
      const id = seq[i] as number
      // Term frequencies counted in a scratch array indexed by term id (a Map per document cost 2× here).
      const tf = this.#tf[id] as number
      if (tf === 0) unique.push(id)
      if (tf < 0xffff) this.#tf[id] = tf + 1
    }
    const slot = this.#newSlot()
    this.#slotLabel[slot] = label
    this.#slotLen[slot] = seq.length
    this.#slotAlive[slot] = 1
    for (const id of unique) {
      this.#append(id, slot, this.#tf[id] as number)
      this.#tf[id] = 0
      this.#df[id] = (this.#df[id] ?? 0) + 1
    }
    this.#slotTerms[slot] = seq
    this.#slotOf.set(label, slot)
    this.#live++
    this.#totalLen += seq.length
  }

  /**
   * Every live document's label and term ids (codes, one document after another, each ending at its `ends`), with the
   * vocabulary by id: what `restore` builds the same index from (terms-file.ts keeps it between starts).
   */
  snapshot(): { vocab: string[]; labels: Float64Array; ends: Uint32Array; codes: Uint32Array } {
    const vocab: string[] = new Array<string>(this.#postDocs.length)
    for (const [term, id] of this.#termIds) vocab[id] = term
    const labels = new Float64Array(this.#live)
    const ends = new Uint32Array(this.#live)
    let total = 0
    for (let s = 0; s < this.#slots; s++) if (this.#slotAlive[s] === 1) total += this.#slotTerms[s]?.length ?? 0
    const codes = new Uint32Array(total)
    let d = 0
    let at = 0
    for (let s = 0; s < this.#slots; s++) {
      if (this.#slotAlive[s] !== 1) continue
      const seq = this.#slotTerms[s] ?? new Uint32Array(0)
      codes.set(seq, at)
      at += seq.length
      labels[d] = this.#slotLabel[s] as number
      ends[d++] = at
    }
    return { vocab, labels, ends, codes }
  }

  /** Forget `label`; false if it was not indexed. */
  remove(label: number): boolean {
    const slot = this.#slotOf.get(label)
    if (slot === undefined) return false
    this.#slotOf.delete(label)
    this.#slotAlive[slot] = 0
    for (const id of new Set(this.#slotTerms[slot] ?? [])) this.#df[id] = (this.#df[id] ?? 1) - 1
    this.#slotTerms[slot] = null
    this.#live--
    this.#totalLen -= this.#slotLen[slot] ?? 0
    if (this.#slots - this.#live > Math.max(1024, this.#live)) this.#compact()
    return true
  }

  /** The `k` best documents for `queryTerms`, best first; documents sharing no term with the query are not returned. */
  search(queryTerms: readonly string[], k: number): ScoredLabel[] {
    if (this.#live === 0 || k <= 0) return []
    const k1 = this.#k1
    const b = this.#b
    const n = this.#live
    const avg = this.#totalLen / n || 1
    const c0 = k1 * (1 - b)
    const c1 = (k1 * b) / avg
    const scores = this.#scores
    const touched = this.#touched
    const alive = this.#slotAlive
    const lens = this.#slotLen
    const qIdf = new Map<number, number>()
    const terms: QueryTerm[] = []
    for (const t of new Set(queryTerms)) {
      const id = this.#termIds.get(t)
      if (id === undefined) continue
      const df = this.#df[id] ?? 0
      if (df === 0) continue
      const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5))
      qIdf.set(id, idf)
      // idf·(k1+1) bounds what the term can add to any document's score (tf/(tf+K) < 1).
      terms.push({ id, idfK: idf * (k1 + 1), len: this.#postLen[id] ?? 0 })
    }
    // Rarest first: they decide the ranking and their posting lists are short.
    terms.sort((x, y) => x.len - y.len || x.id - y.id)
    const rerank = this.#proximity > 0 && qIdf.size > 1
    const want = rerank ? Math.max(k, this.#depth) : k

    let nTouched = 0
    let rest = 0
    for (const t of terms) rest += t.idfK
    let ti = 0
    let threshold = -Infinity
    for (; ti < terms.length; ti++) {
      const t = terms[ti] as QueryTerm
      if (this.#prune && nTouched >= want && t.len > PRUNE_MIN_POSTINGS && t.len > nTouched) {
        // MaxScore: once the want-th best score so far beats everything the remaining terms could add, no document
        // they alone would bring in can reach the top; only the candidates that still can need those terms' scores.
        // (With a margin for float32 rounding, so the outcome is exactly the exhaustive one.)
        threshold = kthBest(scores, touched, nTouched, want)
        if (threshold > rest * (1 + ROUNDING_MARGIN)) break
      }
      const docs = this.#postDocs[t.id] as Uint32Array
      const tfs = this.#postTfs[t.id] as Uint16Array
      const idfK = t.idfK
      for (let i = 0; i < t.len; i++) {
        const slot = docs[i] as number
        if (alive[slot] === 0) continue
        const tf = tfs[i] as number
        const prev = scores[slot] as number
        if (prev === 0) touched[nTouched++] = slot
        scores[slot] = prev + (idfK * tf) / (tf + c0 + c1 * (lens[slot] as number))
      }
      rest -= t.idfK
    }
    let candidates = touched
    let nCandidates = nTouched
    if (ti < terms.length) {
      this.prunedSearches++
      nCandidates = this.#finishCandidates(terms.slice(ti), rest, threshold, nTouched, c0, c1)
      candidates = this.#candidates
    }
    let top = topK(scores, candidates, nCandidates, want)
    for (let i = 0; i < nTouched; i++) scores[touched[i] as number] = 0
    // Proximity only matters with two or more query terms; it reorders the best BM25 candidates.
    if (rerank) {
      if (this.#qw.length < this.#tf.length) this.#qw = new Float32Array(this.#tf.length)
      for (const [id, idf] of qIdf) this.#qw[id] = idf
      for (const c of top) c.score += this.#proximity * this.#bestWindow(c.slot, qIdf, this.#window)
      for (const id of qIdf.keys()) this.#qw[id] = 0
      top = top.sort((a, b) => b.score - a.score || a.slot - b.slot).slice(0, k)
    }
    return top.map(({ slot, score }) => ({ label: this.#slotLabel[slot] as number, score }))
  }

  /** The idf of `term` (as `search` weighs it), or undefined when no live document has it. */
  idf(term: string): number | undefined {
    const id = this.#termIds.get(term)
    const df = id === undefined ? 0 : (this.#df[id] ?? 0)
    if (df === 0) return undefined
    return Math.log(1 + (this.#live - df + 0.5) / (df + 0.5))
  }

  /**
   * How much of the query each document holds, from 0 to 1: the idf of the distinct query terms found in the document
   * over the idf of all the query's distinct terms. A term no document has counts at the idf of df 0: a query about something the index never mentions ("who
   * won the 1998 World Cup" against files on tax law) scores low even when its common words ("won") match. 0 for a
   * label not in the index or a query without terms. (Requiring the terms within a sentence-sized window instead
   * separated answerable from unanswerable questions worse on SQuAD, bench/rag-eval.ts --precision.)
   *
   * `phraseWeight` w > 0 blends in the query's word pairs: each two consecutive query terms (stopwords are not terms)
   * weigh the sum of their idf, and a pair counts as found when the document has the same two terms side by side, in
   * that order. Relevance is then (terms share + w × pairs share) / (1 + w); a query of one term has no pairs and keeps
   * its terms share. A question a passage answers usually repeats some of its phrasing ("Time for Reflection", "Yuan
   * dynasty"), one about another subject matches scattered common words: on SQuAD the blend at w 0.5 separated the two
   * better on both halves (area under the ROC curve 0.975 → 0.978 and 0.967 → 0.975, bench/rag-eval.ts header).
   * One walk of each asked-about document's terms gives both shares: on SQuAD's 646 paragraphs, the 8 best of each of
   * its 6,078 questions cost 6.9–7.3 µs a question with the pairs, 4.5–5.2 µs without (4.5–7.7 µs for the terms alone
   * before, through the windowed walk the proximity bonus uses), whatever the number of documents.
   */
  relevance(queryTerms: readonly string[], labels: readonly number[], phraseWeight = 0): number[] {
    const n = this.#live
    const qIdf = new Map<number, number>()
    const idfOf = new Map<string, number>()
    let total = 0
    for (const t of new Set(queryTerms)) {
      const id = this.#termIds.get(t)
      const df = id === undefined ? 0 : (this.#df[id] ?? 0)
      const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5))
      total += idf
      idfOf.set(t, idf)
      if (id !== undefined && df > 0) qIdf.set(id, idf)
    }
    if (total <= 0) return labels.map(() => 0)
    const pairs = phraseWeight > 0 ? this.#queryPairs(queryTerms, idfOf) : undefined
    if (this.#qw.length < this.#tf.length) this.#qw = new Float32Array(this.#tf.length)
    for (const [id, idf] of qIdf) this.#qw[id] = idf
    const out = labels.map((label) => {
      const slot = this.#slotOf.get(label)
      if (slot === undefined) return 0
      const held = this.#held(slot, qIdf, pairs)
      const terms = Math.min(1, held.terms / total)
      if (pairs === undefined) return terms
      return (terms + phraseWeight * Math.min(1, held.pairs / pairs.total)) / (1 + phraseWeight)
    })
    for (const id of qIdf.keys()) this.#qw[id] = 0
    return out
  }

  /**
   * The query's distinct pairs of consecutive terms, as `first id → second id → [pair index, weight]`, and the total
   * weight (a pair with a term no document has counts in the total but can never be found). Undefined without a pair.
   */
  #queryPairs(queryTerms: readonly string[], idfOf: ReadonlyMap<string, number>): QueryPairs | undefined {
    const next = new Map<number, Map<number, number>>()
    const weights: number[] = []
    const seen = new Set<string>()
    let total = 0
    for (let i = 0; i + 1 < queryTerms.length; i++) {
      const a = queryTerms[i] as string
      const b = queryTerms[i + 1] as string
      const key = `${a}\u0000${b}`
      if (a === b || seen.has(key)) continue
      seen.add(key)
      const w = (idfOf.get(a) ?? 0) + (idfOf.get(b) ?? 0)
      total += w
      const ia = this.#termIds.get(a)
      const ib = this.#termIds.get(b)
      if (ia === undefined || ib === undefined || (this.#df[ia] ?? 0) === 0 || (this.#df[ib] ?? 0) === 0) continue
      let m = next.get(ia)
      if (m === undefined) next.set(ia, (m = new Map<number, number>()))
      m.set(ib, weights.length)
      weights.push(w)
    }
    return total > 0 ? { next, weights, total } : undefined
  }

  /**
   * What the document holds of the query, in one walk of its terms: the idf of the distinct query terms in it, and the
   * weight of the query's `pairs` it has side by side (0 without pairs). Query weights (`#qw`) must be set.
   */
  #held(slot: number, qIdf: Map<number, number>, pairs: QueryPairs | undefined): { terms: number; pairs: number } {
    const seq = this.#slotTerms[slot]
    if (!seq) return { terms: 0, pairs: 0 }
    const qw = this.#qw
    const seen = this.#tf
    const found = pairs !== undefined && pairs.weights.length > 0 ? new Uint8Array(pairs.weights.length) : undefined
    let terms = 0
    let pairSum = 0
    for (let i = 0; i < seq.length; i++) {
      const a = seq[i] as number
      const idf = qw[a] as number
      // Most terms are not the query's: one array read skips them.
      if (idf === 0) continue
      if (seen[a] === 0) {
        seen[a] = 1
        terms += idf
      }
      if (found === undefined || i + 1 >= seq.length) continue
      const b = seq[i + 1] as number
      if ((qw[b] as number) === 0) continue
      const p = (pairs as QueryPairs).next.get(a)?.get(b)
      if (p === undefined || found[p] === 1) continue
      found[p] = 1
      pairSum += (pairs as QueryPairs).weights[p] as number
    }
    for (const id of qIdf.keys()) seen[id] = 0
    return { terms, pairs: pairSum }
  }

  /**
   * MaxScore's second phase: the touched documents that can still reach `threshold` with the `remaining` terms' bound
   * get those terms' exact contributions, counted from the document's own term sequence (a few hundred term ids)
   * instead of walking the terms' long posting lists. Added term by term in the same order as the first phase, so every
   * candidate's score is bit-for-bit what the exhaustive pass gives. Returns the number of candidates in #candidates.
   */
  #finishCandidates(remaining: readonly QueryTerm[], bound: number, threshold: number, nTouched: number, c0: number, c1: number): number {
    const scores = this.#scores
    const touched = this.#touched
    const lens = this.#slotLen
    if (this.#candidates.length < nTouched) this.#candidates = new Int32Array(this.#touched.length)
    const out = this.#candidates
    if (this.#qw.length < this.#tf.length) this.#qw = new Float32Array(this.#tf.length)
    const mark = this.#qw
    const tfOf = this.#tf
    for (const t of remaining) mark[t.id] = 1
    let n = 0
    for (let i = 0; i < nTouched; i++) {
      const slot = touched[i] as number
      if (((scores[slot] as number) + bound) * (1 + ROUNDING_MARGIN) < threshold) continue
      out[n++] = slot
      const seq = this.#slotTerms[slot]
      if (!seq) continue
      for (let j = 0; j < seq.length; j++) {
        const id = seq[j] as number
        if (mark[id] !== 0 && (tfOf[id] as number) < 0xffff) tfOf[id] = (tfOf[id] as number) + 1
      }
      for (const t of remaining) {
        const tf = tfOf[t.id] as number
        if (tf === 0) continue
        tfOf[t.id] = 0
        scores[slot] = (scores[slot] as number) + (t.idfK * tf) / (tf + c0 + c1 * (lens[slot] as number))
      }
    }
    for (const t of remaining) mark[t.id] = 0
    return n
  }

  /**
   * The highest total idf of distinct query terms found together within `w` consecutive terms of a document.
   * Query weights (`#qw`) and window counts (`#tf`, idle outside `add`) are arrays indexed by term id: a Map here
   * made the rerank cost as much as the BM25 pass.
   */
  #bestWindow(slot: number, qIdf: Map<number, number>, w: number): number {
    const seq = this.#slotTerms[slot]
    if (!seq) return 0
    const qw = this.#qw
    const inWin = this.#tf
    let cur = 0
    let best = 0
    for (let i = 0; i < seq.length; i++) {
      const id = seq[i] as number
      const idf = qw[id] as number
      if (idf > 0) {
        if (inWin[id] === 0) cur += idf
        inWin[id] = (inWin[id] as number) + 1
      }
      if (i >= w) {
        const old = seq[i - w] as number
        const oidf = qw[old] as number
        if (oidf > 0) {
          inWin[old] = (inWin[old] as number) - 1
          if (inWin[old] === 0) cur -= oidf
        }
      }
      if (cur > best) best = cur
    }
    for (const id of qIdf.keys()) inWin[id] = 0
    return best
  }

  #newSlot(): number {
    if (this.#slots === this.#slotAlive.length) {
      const cap = this.#slots * 2
      this.#slotLabel = grow(this.#slotLabel, cap, Float64Array)
      this.#slotLen = grow(this.#slotLen, cap, Float32Array)
      this.#slotAlive = grow(this.#slotAlive, cap, Uint8Array)
      this.#scores = new Float32Array(cap)
      this.#touched = new Int32Array(cap)
    }
    return this.#slots++
  }

  #append(id: number, slot: number, tf: number): void {
    const len = this.#postLen[id] ?? 0
    let docs = this.#postDocs[id] as Uint32Array
    let tfs = this.#postTfs[id] as Uint16Array
    if (len === docs.length) {
      docs = grow(docs, len * 2, Uint32Array)
      tfs = grow(tfs, len * 2, Uint16Array)
      this.#postDocs[id] = docs
      this.#postTfs[id] = tfs
    }
    docs[len] = slot
    tfs[len] = tf
    this.#postLen[id] = len + 1
  }

  /** Renumber live slots densely and drop dead postings; terms that no longer occur keep an empty list. */
  #compact(): void {
    const newSlot = new Int32Array(this.#slots).fill(-1)
    let next = 0
    for (let s = 0; s < this.#slots; s++) {
      if (this.#slotAlive[s] === 1) newSlot[s] = next++
    }
    for (let id = 0; id < this.#postDocs.length; id++) {
      const docs = this.#postDocs[id] as Uint32Array
      const tfs = this.#postTfs[id] as Uint16Array
      const len = this.#postLen[id] ?? 0
      let w = 0
      for (let i = 0; i < len; i++) {
        const ns = newSlot[docs[i] as number] as number
        if (ns < 0) continue
        docs[w] = ns
        tfs[w] = tfs[i] as number
        w++
      }
      this.#postLen[id] = w
      if (w < docs.length / 4 && docs.length > INITIAL_POSTINGS) {
        const cap = Math.max(INITIAL_POSTINGS, w * 2)
        this.#postDocs[id] = docs.slice(0, cap)
        this.#postTfs[id] = tfs.slice(0, cap)
      }
    }
    const cap = Math.max(64, next * 2)
    const label = new Float64Array(cap)
    const lens = new Float32Array(cap)
    const alive = new Uint8Array(cap)
    const terms: (Uint32Array | null)[] = []
    for (let s = 0; s < this.#slots; s++) {
      const ns = newSlot[s] as number
      if (ns < 0) continue
      label[ns] = this.#slotLabel[s] as number
      lens[ns] = this.#slotLen[s] as number
      alive[ns] = 1
      terms[ns] = this.#slotTerms[s] ?? null
      this.#slotOf.set(label[ns] as number, ns)
    }
    this.#slotLabel = label
    this.#slotLen = lens
    this.#slotAlive = alive
    this.#slotTerms = terms
    this.#slots = next
    this.#scores = new Float32Array(cap)
    this.#touched = new Int32Array(cap)
  }
}

type TypedArray = Float64Array | Float32Array | Uint32Array | Uint16Array | Uint8Array | Int32Array
type TypedCtor<T extends TypedArray> = new (length: number) => T

function grow<T extends TypedArray>(a: T, cap: number, Ctor: TypedCtor<T>): T {
  const b = new Ctor(cap)
  b.set(a as never)
  return b
}
