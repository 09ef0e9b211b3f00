/** RangeCache: remembers compute(text.slice(start, end)) by the range's characters, within its bound. */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { RangeCache } from '../src/context/range-cache.js'

t.test('same characters anywhere → one compute; different ones never confused', async (t) => {
  const computed: string[] = []
  const cache = new RangeCache({ maxEntries: 100, compute: (k: string) => (computed.push(k), k.toUpperCase()) })
  const text = 'the cat, the cathedral; the ca'
  t.equal(cache.get(text, 0, 3), 'THE')
  t.equal(cache.get(text, 9, 12), 'THE', 'found again at another place')
  t.equal(cache.get(text, 4, 7), 'CAT')
  t.equal(cache.get(text, 13, 22), 'CATHEDRAL', 'a longer key sharing the prefix is its own entry')
  t.equal(cache.get(text, 28, 30), 'CA', 'so is a shorter one')
  t.equal(cache.get('', 0, 0), '', 'the empty range is a key too')
  t.same(computed, ['the', 'cat', 'cathedral', 'ca', ''])
  t.equal(cache.size, 5)
})

t.test('property: always equals compute on the cut-out text, however small the bound', async (t) => {
  await fc.assert(
    fc.property(fc.array(fc.string({ maxLength: 6 }), { maxLength: 300 }), fc.integer({ min: 1, max: 8 }), (keys, max) => {
      const cache = new RangeCache({ maxEntries: max, compute: (k: string) => `<${k}>` })
      const text = keys.join('')
      let at = 0
      for (const k of keys) {
        if (cache.get(text, at, at + k.length) !== `<${k}>`) return false
        if (cache.size > max) return false
        at += k.length
      }
      return true
    }),
    { numRuns: 300 },
  )
  t.throws(() => new RangeCache({ maxEntries: 0, compute: String }), RangeError)
})
