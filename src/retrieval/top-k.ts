/** Bounded top-k selection over a sparse set of scored slots (the BM25 hot path). */

/**
 * The k highest of `scores[touched[0..n)]`, best first, with a bounded min-heap (k ≪ n on the hot path).
 * Ties break toward the lower slot (older document) so results are deterministic.
 */
export function topK(
  scores: Float32Array,
  touched: Int32Array,
  n: number,
  k: number,
): Array<{ slot: number; score: number }> {
  const heapS: number[] = []
  const heapV: number[] = []
  const worse = (i: number, j: number): boolean => {
    const a = heapV[i] as number
    const c = heapV[j] as number
    return a < c || (a === c && (heapS[i] as number) > (heapS[j] as number))
  }
  const swap = (i: number, j: number): void => {
    const s = heapS[i] as number
    heapS[i] = heapS[j] as number
    heapS[j] = s
    const v = heapV[i] as number
    heapV[i] = heapV[j] as number
    heapV[j] = v
  }
  for (let t = 0; t < n; t++) {
    const slot = touched[t] as number
    const v = scores[slot] as number
    if (heapS.length < k) {
      heapS.push(slot)
      heapV.push(v)
      let i = heapS.length - 1
      while (i > 0) {
        const p = (i - 1) >> 1
        if (!worse(i, p)) break
        swap(i, p)
        i = p
      }
      continue
    }
    const rootV = heapV[0] as number
    if (v < rootV || (v === rootV && slot > (heapS[0] as number))) continue
    heapS[0] = slot
    heapV[0] = v
    let i = 0
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let m = i
      if (l < heapS.length && worse(l, m)) m = l
      if (r < heapS.length && worse(r, m)) m = r
      if (m === i) break
      swap(i, m)
      i = m
    }
  }
  const out = heapS.map((slot, i) => ({ slot, score: heapV[i] as number }))
  out.sort((a, b) => b.score - a.score || a.slot - b.slot)
  return out
}

/** The k-th highest of `scores[touched[0..n)]` (−Infinity when n < k). */
export function kthBest(scores: Float32Array, touched: Int32Array, n: number, k: number): number {
  if (n < k) return -Infinity
  const top = topK(scores, touched, n, k)
  return top[top.length - 1]?.score ?? -Infinity
}
