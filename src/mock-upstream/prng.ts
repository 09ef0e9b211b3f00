/** A seeded PRNG, so two runs of the mock (or of a benchmark's corpus) make the same choices. */

/** Uniform in [0, 1). */
export type Rng = () => number

/** mulberry32: 32 bits of state, small, fast, and good enough for test data (not for anything secret). */
export function mulberry32(seed: number): Rng {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
