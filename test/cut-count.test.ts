/**
 * Counting a run cut into pieces from the pieces' counts (cut-count.ts): whenever it answers, the answer is the
 * library's count of the whole, for any cuts, in base64 and in text made of the characters that decide pre-token
 * ends (case changes, digits, "'", symbols, letters outside ASCII); and it answers for base64.
 */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { countTokens } from 'gpt-tokenizer'
import { countAcrossCuts } from '../src/ingest/cut-count.js'

const library = (text: string): number => countTokens(text, { disallowedSpecial: new Set() })
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'

/** The pieces of `text` cut at `cuts` (positions, deduplicated and sorted), each with its own exact count. */
function piecesOf(text: string, cuts: number[]): Array<{ start: number; end: number; tokens: number }> {
  const at = [...new Set([0, ...cuts.map((c) => c % text.length), text.length])].sort((a, b) => a - b)
  return at.slice(1).map((end, i) => ({ start: at[i] as number, end, tokens: library(text.slice(at[i], end)) }))
}

t.test('property: equal to the library whenever it answers', async (t) => {
  const units = [fc.constantFrom(...B64), fc.constantFrom(...B64, "'", 's', 'é', 'É', 'ß', '東', '1', '.', '_', 'L', 'l')]
  for (const [u, unit] of units.entries()) {
    let answered = 0
    await fc.assert(
      fc.property(fc.string({ unit, minLength: 2, maxLength: 500 }), fc.array(fc.nat(), { maxLength: 12 }), (text, cuts) => {
        const pieces = piecesOf(text, cuts)
        const got = countAcrossCuts(text, pieces, library)
        if (got === undefined) return true
        answered++
        return got === library(text)
      }),
      { numRuns: 1500 },
    )
    t.ok(answered > 100, `${u === 0 ? 'base64' : 'mixed'}: answered ${answered} of 1500 (the rest: no sync point near a cut)`)
  }
})

t.test('answers for base64 cut every few dozen characters; not for a run with no case change', async (t) => {
  const text = Array.from({ length: 3000 }, (_, i) => B64[(i * 7919 + ((i * i) % 13)) % 64]).join('')
  const pieces = piecesOf(text, Array.from({ length: 40 }, (_, i) => 70 * (i + 1)))
  t.equal(countAcrossCuts(text, pieces, library), library(text))
  const run = 'a'.repeat(500)
  t.equal(countAcrossCuts(run, piecesOf(run, [100, 250]), library), undefined)
  t.equal(countAcrossCuts('abcDEF', [{ start: 0, end: 2, tokens: 1 }, { start: 3, end: 6, tokens: 1 }], library), undefined, 'pieces not adjacent')
})
