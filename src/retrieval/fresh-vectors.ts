/**
 * Vectors committed to a namespace but not yet in its HNSW graph, searched exactly (cosine over every one of them).
 *
 * Why (issue 28): inserting into the graph is the largest share of an upload's main-thread time (hnswlib's `addPoint`
 * ≈ half of it, ≈ 100–220 µs a chunk: 1–3 s for the ≈ 11,000 chunks of 5 MB of prose), and the upload's response
 * waited for all of it. Now an upload is answered once its vectors are here, and search-index.ts moves them into the
 * graph in the background, a slice at a time. A search ranks the graph's nearest and these together, so every
 * committed vector is found, by the same cosine similarity the graph scores with (hnswlib's cosine space: 1 − the dot
 * product of the normalized vectors), exactly rather than approximately.
 *
 * Cost: one pass over `size × dimension` floats per search (7.2 ms of CPU over 14,730 vectors of 256 dimensions here, load 16), paid
 * only while a drain is in progress; the owner bounds `size` (SearchIndexOptions.maxFresh).
 */
import type { ScoredLabel } from './bm25.js'
import { topK } from './top-k.js'

export class FreshVectors {
  // Parallel arrays in insertion order (the drain's order: the graph is built in the order the vectors were
  // committed), scanned by position: iterating a Map of entries cost 8.8 ms of CPU a search against 7.2 (14,730 vectors).
  #labels: number[] = []
  #vectors: Array<Float32Array | undefined> = []
  #norms: number[] = []
  /** Position of each label still here. */
  readonly #at = new Map<number, number>()
  /** Positions before this one have all left (drained or deleted). */
  #head = 0

  get size(): number {
    return this.#at.size
  }

  add(label: number, vector: Float32Array): void {
    let sq = 0
    for (let i = 0; i < vector.length; i++) sq += (vector[i] as number) * (vector[i] as number)
    this.#at.set(label, this.#labels.length)
    this.#labels.push(label)
    this.#vectors.push(vector)
    this.#norms.push(Math.sqrt(sq))
  }

  has(label: number): boolean {
    return this.#at.has(label)
  }

  /** Forget `label`; false when it is not here (it is in the graph, or was never added). */
  delete(label: number): boolean {
    const at = this.#at.get(label)
    if (at === undefined) return false
    this.#at.delete(label)
    this.#vectors[at] = undefined
    if (this.#at.size === 0) this.clear()
    return true
  }

  /** The oldest vector still here, or undefined when empty. */
  first(): { label: number; vector: Float32Array } | undefined {
    while (this.#head < this.#labels.length) {
      const vector = this.#vectors[this.#head]
      if (vector !== undefined) return { label: this.#labels[this.#head] as number, vector }
      this.#head++
    }
    return undefined
  }

  /** Every vector here, oldest first. */
  forEach(fn: (label: number, vector: Float32Array) => void): void {
    for (let at = this.#head; at < this.#labels.length; at++) {
      const vector = this.#vectors[at]
      if (vector !== undefined) fn(this.#labels[at] as number, vector)
    }
  }

  clear(): void {
    this.#labels = []
    this.#vectors = []
    this.#norms = []
    this.#at.clear()
    this.#head = 0
  }

  /** Up to `k` labels by cosine similarity to `query`, best first (ties: the older label first). */
  search(query: Float32Array, k: number): ScoredLabel[] {
    const n = this.#at.size
    if (n === 0 || k <= 0) return []
    let qq = 0
    for (let i = 0; i < query.length; i++) qq += (query[i] as number) * (query[i] as number)
    const qNorm = Math.sqrt(qq)
    const scores = new Float32Array(n)
    const slots = new Int32Array(n)
    const labels = new Array<number>(n)
    let s = 0
    for (let at = this.#head; at < this.#labels.length; at++) {
      const vector = this.#vectors[at]
      if (vector === undefined) continue
      const norm = this.#norms[at] as number
      const dot = dotProduct(vector, query)
      // A zero vector is as far from everything as hnswlib makes it (its normalized form is all zeros: similarity 0).
      scores[s] = norm === 0 || qNorm === 0 ? 0 : dot / (norm * qNorm)
      slots[s] = s
      labels[s] = this.#labels[at] as number
      s++
    }
    return topK(scores, slots, s, k).map(({ slot, score }) => ({ label: labels[slot] as number, score }))
  }
}

/**
 * Σ a[i]·b[i] over a's length, four sums at a time: the loop's additions no longer wait on each other, 1.37× faster
 * than one running sum (256 dimensions, 1,024 vectors: 242 against 332 ns a vector, Node 20 on the 2-core dev VM).
 */
function dotProduct(a: Float32Array, b: Float32Array): number {
  const n = a.length
  let d0 = 0
  let d1 = 0
  let d2 = 0
  let d3 = 0
  let i = 0
  for (; i + 3 < n; i += 4) {
    d0 += (a[i] as number) * (b[i] as number)
    d1 += (a[i + 1] as number) * (b[i + 1] as number)
    d2 += (a[i + 2] as number) * (b[i + 2] as number)
    d3 += (a[i + 3] as number) * (b[i + 3] as number)
  }
  for (; i < n; i++) d0 += (a[i] as number) * (b[i] as number)
  return d0 + d1 + d2 + d3
}

/** The `k` best of two rankings of disjoint labels, best first. */
export function mergeRankings(a: readonly ScoredLabel[], b: readonly ScoredLabel[], k: number): ScoredLabel[] {
  if (b.length === 0) return a.length <= k ? [...a] : a.slice(0, k)
  if (a.length === 0) return b.length <= k ? [...b] : b.slice(0, k)
  const out: ScoredLabel[] = []
  let i = 0
  let j = 0
  while (out.length < k && (i < a.length || j < b.length)) {
    const x = a[i]
    const y = b[j]
    if (y === undefined || (x !== undefined && x.score >= y.score)) {
      out.push(x as ScoredLabel)
      i++
    } else {
      out.push(y)
      j++
    }
  }
  return out
}
