/**
 * Embedders turn texts into unit vectors for the cosine HNSW index. `LocalEmbedder` is the default: offline,
 * deterministic, no model download and no key — a feature-hashing embedder over the same terms BM25 uses (word
 * unigrams and bigrams) plus character trigrams of each word, which let spelling variants and inflections meet
 * ("normans" / "norman", "colonise" / "colonize") where exact terms do not.
 * `OpenAICompatibleEmbedder` (./openai-embedder.ts) calls any `/embeddings` endpoint.
 */
import { analyze } from './analyzer.js'

export interface Embedder {
  /**
   * Names the vector space: two embedders with the same id produce comparable vectors. Recorded per index namespace;
   * a namespace built with another id is refused rather than searched with incomparable vectors.
   */
  readonly id: string
  /** Vector length; 0 while unknown (a remote embedder learns it from its first answer). */
  readonly dimension: number
  /** One unit-length vector per text, same order. */
  embed(texts: readonly string[]): Promise<Float32Array[]>
}

export { OpenAICompatibleEmbedder, type OpenAICompatibleEmbedderOptions } from './openai-embedder.js'

export interface LocalEmbedderOptions {
  /** Vector length, a power of two from 64 to 4096. Default 256 (chosen in bench/rag-eval.ts). */
  dimension?: number
}

// Feature weights, chosen with bench/rag-eval.ts (vectors-only hit rate); see its header for the figures.
const W_UNIGRAM = 1
const W_BIGRAM = 0
const W_TRIGRAM = 0.35

const SEED_BIGRAM = 0x9e3779b9
const SEED_TRIGRAM = 0x85ebca6b

export class LocalEmbedder implements Embedder {
  readonly id: string
  readonly dimension: number
  readonly #mask: number

  constructor(opts: LocalEmbedderOptions = {}) {
    const d = opts.dimension ?? 512
    if (!Number.isInteger(d) || d < 64 || d > 4096 || (d & (d - 1)) !== 0)
      throw new RangeError(`LocalEmbedder: dimension must be a power of two from 64 to 4096, got ${d}`)
    this.dimension = d
    this.#mask = d - 1
    this.id = `local:hash-v1:${d}`
  }

  embed(texts: readonly string[]): Promise<Float32Array[]> {
    return Promise.resolve(texts.map((t) => this.embedSync(t)))
  }

  /** Synchronous form, for callers on a hot path that cannot afford a promise per text. */
  embedSync(text: string, weight?: (term: string) => number): Float32Array {
    const v = new Float32Array(this.dimension)
    const mask = this.#mask
    // Signed hashing (Weinberger et al. 2009): a colliding feature adds ±w, so collisions cancel on average instead of
    // inflating every similarity.
    const add = (h: number, w: number): void => {
      const i = h & mask
      v[i] = (v[i] as number) + (h & 0x80000000 ? -w : w)
    }
    let prev = 0
    let prevW = 1
    const terms = analyze(text)
    for (let t = 0; t < terms.length; t++) {
      const term = terms[t] as string
      const w = weight ? weight(term) : 1
      const h = fnv1a(term, 0x811c9dc5)
      add(h, W_UNIGRAM * w)
      if (t > 0) add(mix(prev ^ Math.imul(h, SEED_BIGRAM)), W_BIGRAM * Math.sqrt(w * prevW))
      prev = h
      prevW = w
      addTrigrams(term, (hh, ww) => add(hh, ww * w))
    }
    let norm = 0
    for (let i = 0; i < v.length; i++) norm += (v[i] as number) ** 2
    if (norm > 0) {
      const inv = 1 / Math.sqrt(norm)
      for (let i = 0; i < v.length; i++) v[i] = (v[i] as number) * inv
    }
    return v
  }
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

function fnv1a(s: string, seed: number): number {
  let h = seed
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return mix(h)
}

/** murmur3's finaliser: spreads every input bit over the output so low bits (the bucket) are well distributed. */
function mix(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}
