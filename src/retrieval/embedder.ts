/**
 * Embedders turn texts into unit vectors for the cosine HNSW index. `LocalEmbedder` is the default: offline,
 * deterministic, no model download and no key — a feature-hashing embedder over the same terms BM25 uses plus the
 * character trigrams of each term, which let spelling variants and inflections meet ("normandy" / "norman",
 * "colonise" / "colonize") where exact terms do not.
 * `OpenAICompatibleEmbedder` (./openai-embedder.ts) calls any `/embeddings` endpoint.
 */
import { hashText, mix } from '../context/range-cache.js'
import { analyze } from './analyzer.js'
import { termLists, vocabularyOf, type CodedTerms } from './chunk-terms.js'

/** What lets a caller give up on work done for it: the client's departure, when it has one. */
export interface Cancel {
  readonly signal?: AbortSignal | undefined
}

export interface Embedder {
  /**
   * Names the vector space: two embedders with the same id produce comparable vectors. Recorded per index namespace;
   * a namespace built with another id is refused rather than searched with incomparable vectors.
   */
  readonly id: string
  /** Vector length; 0 while unknown (a remote embedder learns it from its first answer). */
  readonly dimension: number
  /**
   * How much this embedder's ranking counts in hybrid fusion, relative to BM25's 1. A learned model's semantic
   * ranking deserves an equal say (1, the default when absent); a weak one should only break BM25's near-ties.
   */
  readonly fusionWeight?: number
  /**
   * One unit-length vector per text, same order. `signal` (the client's departure) cancels a remote call; read only
   * when a call is made, so a caller may pass a lazy getter.
   */
  embed(texts: readonly string[], opts?: Cancel): Promise<Float32Array[]>
  /**
   * Same, from the texts' `analyze` terms, for embedders built on the shared analyzer: ingestion analyzes each chunk
   * once for both BM25 and the embedder (analysis was ~12% of ingestion CPU when done twice).
   */
  embedTerms?(terms: ReadonlyArray<readonly string[]>): Promise<Float32Array[]>
}

export interface LocalEmbedderOptions {
  /**
   * Vector length, a power of two from 64 to 4096. Default 256: vectors-only hit rate 64% at 128, 74% at 256, 80% at
   * 512 (bench/rag-eval.ts, 192/80 chunks) while hybrid stays at 95% for all three; 256 halves 512's graph memory
   * and insertion time. 128 would cut HNSW insertion by a quarter (165 → 123 µs at 100k chunks, bench corpus), not
   * worth those ten points of vectors-only hit rate.
   */
  dimension?: number
}

// Feature weights, chosen with bench/rag-eval.ts (vectors-only hit rate, 128-token chunks, 582 questions, 256 dims):
// terms alone 68.2%; + trigrams ×0.2 72.3%, ×0.35 73.5%; adding word bigrams (×0.5) lowered it (69.6%), so none.
const W_TERM = 1
const W_TRIGRAM = 0.35

const SEED_TRIGRAM = 0x85ebca6b

export class LocalEmbedder implements Embedder {
  readonly id: string
  readonly dimension: number
  /**
   * Hashed lexical features mostly repeat what BM25 already knows and rank worse than it alone: on bench/rag-eval.ts
   * (192/80 chunks, RRF k 10) vectors only 74%, BM25 94.9%; fused at weight 1 92.0%, at 0.5 94.9%, at 0.3 95.1%, at
   * 0.15 95.1%. At 0.3 they only reorder near-ties (misspellings, inflections the stemmer misses).
   */
  readonly fusionWeight = 0.3
  readonly #mask: number

  constructor(opts: LocalEmbedderOptions = {}) {
    const d = opts.dimension ?? 256
    if (!Number.isInteger(d) || d < 64 || d > 4096 || (d & (d - 1)) !== 0)
      throw new RangeError(`LocalEmbedder: dimension must be a power of two from 64 to 4096, got ${d}`)
    this.dimension = d
    this.#mask = d - 1
    this.id = `local:hash-v1:${d}`
  }

  embed(texts: readonly string[]): Promise<Float32Array[]> {
    return Promise.resolve(texts.map((t) => this.embedSync(t)))
  }

  embedTerms(terms: ReadonlyArray<readonly string[]>): Promise<Float32Array[]> {
    return Promise.resolve(terms.map((t) => this.#vector(t)))
  }

  /** Synchronous form, for callers on a hot path that cannot afford a promise per text. */
  embedSync(text: string): Float32Array {
    return this.#vector(analyze(text))
  }

  /**
   * `embedTerms` of every chunk of a file whose terms are coded over its vocabulary (chunk-terms.ts `CodedTerms`), with
   * each distinct term's features hashed once rather than at every occurrence: the same vectors, bit for bit (the
   * same additions in the same order). For 5 MB of prose (≈ 1.9M terms, ≈ 25k distinct) hashing per occurrence was
   * ≈ a quarter of the prepare thread's time.
   */
  embedCoded(coded: CodedTerms): Float32Array[] {
    const vocab = vocabularyOf(coded)
    // Mostly distinct terms (base64: nearly every term once): a table of features would be made to be read once.
    if (vocab.length * 2 > coded.codes.length) return this.#perOccurrence(vocab, coded)
    // Each distinct term's features in the order #vector adds them: slots `starts[k]` .. `starts[k + 1]` of at/weight.
    const starts = new Uint32Array(vocab.length + 1)
    for (let k = 0; k < vocab.length; k++) starts[k + 1] = (starts[k] as number) + featureCount(vocab[k] as string)
    const at = new Uint32Array(starts[vocab.length] as number)
    // Float64: the signed weight as #vector adds it (0.35 as a float32 would round differently).
    const weight = new Float64Array(at.length)
    const mask = this.#mask
    let f = 0
    // The same signed hashing as #vector's `add`, recorded instead of added.
    const put = (h: number, w: number): void => {
      at[f] = h & mask
      weight[f++] = h & 0x80000000 ? -w : w
    }
    for (const term of vocab) {
      put(hashText(term), W_TERM)
      addTrigrams(term, put)
    }
    const { codes, ends } = coded
    const out: Float32Array[] = []
    let from = 0
    for (const end of ends) {
      const v = new Float32Array(this.dimension)
      for (let k = from; k < end; k++) {
        const code = codes[k] as number
        for (let j = starts[code] as number, z = starts[code + 1] as number; j < z; j++) {
          const i = at[j] as number
          v[i] = (v[i] as number) + (weight[j] as number)
        }
      }
      out.push(normalise(v))
      from = end
    }
    return out
  }

  #perOccurrence(vocab: readonly string[], coded: CodedTerms): Float32Array[] {
    const out: Float32Array[] = []
    for (const terms of termLists(coded, vocab)) out.push(this.#vector(terms))
    return out
  }

  #vector(terms: readonly string[]): Float32Array {
    const v = new Float32Array(this.dimension)
    const mask = this.#mask
    // Signed hashing (Weinberger et al. 2009): a colliding feature adds ±w, so collisions cancel on average instead of
    // inflating every similarity.
    const add = (h: number, w: number): void => {
      const i = h & mask
      v[i] = (v[i] as number) + (h & 0x80000000 ? -w : w)
    }
    for (const term of terms) {
      add(hashText(term), W_TERM)
      addTrigrams(term, add)
    }
    return normalise(v)
  }
}

/** How many features #vector adds for a term: itself, and a trigram per character once it has two. */
function featureCount(term: string): number {
  return 1 + (term.length < 2 ? 0 : term.length)
}

/** `v` scaled in place to unit length (a zero vector stays zero), and returned. */
export function normalise(v: Float32Array): Float32Array {
  let n = 0
  for (let i = 0; i < v.length; i++) n += (v[i] as number) ** 2
  if (n > 0) {
    const inv = 1 / Math.sqrt(n)
    for (let i = 0; i < v.length; i++) v[i] = (v[i] as number) * inv
  }
  return v
}

/** Character trigrams of " term " (boundaries marked), hashed without building substrings. */
function addTrigrams(term: string, add: (h: number, w: number) => void): void {
  const n = term.length
  if (n < 2) return
  const w = W_TRIGRAM
  let a = 32
  let b = term.charCodeAt(0)
  for (let i = 1; i <= n; i++) {
    const c = i < n ? term.charCodeAt(i) : 32
    add(mix(((a * 31 + b) * 31 + c) ^ SEED_TRIGRAM), w)
    a = b
    b = c
  }
}


