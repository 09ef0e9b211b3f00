/**
 * The piece-cached o200k counter: always equal to gpt-tokenizer's own count, whatever the white space, punctuation,
 * scripts and special-token text; bounded memory; and it actually reuses what it has counted.
 */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { encode } from 'gpt-tokenizer'
import { countO200k, countO200kIngest, countO200kUncached, pieceCounter } from '../src/context/token-count.js'

const library = (text: string): number => encode(text, { disallowedSpecial: new Set() }).length

t.test('property: equal to the library on any mix of words, spaces, line breaks and punctuation', async (t) => {
  const fragment = fc.constantFrom(
    'word', 'The', 'naïve', 'École', 'ΑΣ', '東京', '한국어', 'Привет', '42', '1234567', '3.14', 'don’t', "it's", "IT'S", "'ll",
    '"Quoted', 'end."', 'Stop.', 'Why?', '(aside)', '—', '…', '/', '//', '.\n/', '🙂', '👍🏽', '<|endoftext|>', '<|im_start|>',
    ' ', ' ', ' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', ' \n', '\n ', '.\n', '\u00a0', '\u2003', '\u3000', '\u0085', '\u000b',
    '\f', '\u200b', '\ufeff', 'x'.repeat(70),
  )
  await fc.assert(
    fc.property(fc.array(fragment, { maxLength: 200 }), (parts) => {
      const text = parts.join('')
      const expected = library(text)
      return countO200k(text) === expected && countO200kUncached(text) === expected
    }),
    { numRuns: 1000 },
  )
  t.pass('1000 random texts')
})

t.test('property: equal to the library on arbitrary Unicode', async (t) => {
  await fc.assert(
    fc.property(fc.string({ unit: 'grapheme', maxLength: 300 }), fc.string({ unit: fc.constantFrom(' ', 'a', '.', '\n', '\u00a0'), maxLength: 30 }), (a, b) => {
      const text = `${a}${b}${a}`
      return countO200k(text) === library(text)
    }),
    { numRuns: 500 },
  )
  t.pass('500 random texts')
})

t.test('long unbroken runs are counted in slices, like the uncached counter, and not remembered', async (t) => {
  const text = `before ${'東'.repeat(2500)} after ${'y'.repeat(1200)}`
  t.equal(countO200k(text), countO200kUncached(text))
  t.equal(countO200k(''), 0)
})

t.test('remembers pieces within its bound, and stays exact after it forgets them', async (t) => {
  let calls = 0
  const count = (s: string): number => {
    calls++
    return library(s)
  }
  const counter = pieceCounter({ count, maxEntries: 4, maxPieceLength: 64 })
  t.equal(counter('the cat saw the cat'), library('the cat saw the cat'))
  t.equal(calls, 4, "pieces 'the', ' cat', ' saw', ' the' counted once each; the second ' cat' remembered")
  calls = 0
  t.equal(counter('the cat'), 2)
  t.equal(calls, 0, 'both pieces remembered')
  t.equal(counter('dog'), 1)
  t.equal(counter('the'), 1)
  t.equal(calls, 2, "the full map was emptied for 'dog', so 'the' was counted again")
  t.equal(counter('a b c d e f g h'), library('a b c d e f g h'), 'exact while the map keeps emptying')
})

t.test('property: the ingestion counter (our own merge) equals the library too, base64 included', async (t) => {
  const fragment = fc.oneof(
    fc.constantFrom('word', 'The', 'naïve', '東京', '42', "it's", 'end.', ' ', '  ', '\n', '\n\n', '🙂', '<|endoftext|>', 'x'.repeat(70)),
    fc.string({ unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'), minLength: 1, maxLength: 300 }),
  )
  await fc.assert(
    fc.property(fc.array(fragment, { maxLength: 60 }), (parts) => {
      const text = parts.join('')
      return countO200kIngest(text) === library(text)
    }),
    { numRuns: 1000 },
  )
  t.equal(countO200kIngest(`before ${'東'.repeat(2500)} after ${'y'.repeat(1200)}`), countO200kUncached(`before ${'東'.repeat(2500)} after ${'y'.repeat(1200)}`), 'long runs sliced alike')
})
