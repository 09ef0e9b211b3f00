/**
 * A vector with no direction: what an embedder returns for text with no index terms. The cosine graph cannot place it,
 * so it is neither indexed (storage/recall-indexable.ts) nor searched with (search-index.ts).
 */
export function isZeroVector(v: Float32Array): boolean {
  for (let i = 0; i < v.length; i++) if (v[i] !== 0) return false
  return true
}
