/**
 * Deterministic filler text for the benchmarks: pseudo-words built from syllables, drawn with a Zipf-like skew so a
 * few words are common and most are rare, as in real prose (which is what makes BM25 postings lists uneven).
 * Same seed, same text, every run.
 */
const SYLLABLES = ['ka', 'lo', 'mi', 'ren', 'tor', 'val', 'sen', 'dra', 'pel', 'qui', 'mor', 'fa', 'zu', 'bel', 'nok', 'tri', 'as', 'ent']

export class Corpus {
  #state: number
  readonly #vocab: string[]

  constructor(seed = 1, vocabSize = 8000) {
    this.#state = seed >>> 0 || 1
    const seen = new Set<string>()
    while (seen.size < vocabSize) {
      let w = ''
      const n = 2 + Math.floor(this.random() * 3)
      for (let i = 0; i < n; i++) w += SYLLABLES[Math.floor(this.random() * SYLLABLES.length)]
      seen.add(w)
    }
    this.#vocab = [...seen]
  }

  /** [0, 1), a 32-bit LCG: enough for filler text. */
  random(): number {
    this.#state = (Math.imul(this.#state, 1664525) + 1013904223) >>> 0
    return this.#state / 4294967296
  }

  word(): string {
    return this.#vocab[Math.floor(this.#vocab.length * this.random() ** 2.5)] as string
  }

  sentence(words: number): string {
    const out: string[] = []
    for (let i = 0; i < words; i++) out.push(this.word())
    const s = out.join(' ')
    return `${s.charAt(0).toUpperCase()}${s.slice(1)}.`
  }

  /** Sentences of 8–20 words up to about `words` words. */
  paragraph(words: number): string {
    const out: string[] = []
    for (let n = 0; n < words; ) {
      const k = 8 + Math.floor(this.random() * 13)
      out.push(this.sentence(k))
      n += k
    }
    return out.join(' ')
  }
}
