/**
 * Our own o200k merge (o200k-bpe.ts) against gpt-tokenizer's count: equal on base64 and other text whose pre-tokens
 * rarely repeat (the case it exists for), on prose, on every script and on broken UTF-16, with caches small enough
 * to be emptied again and again.
 */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { countTokens } from 'gpt-tokenizer'
import { bpeCounter } from '../src/context/o200k-bpe.js'

const library = (text: string): number => countTokens(text, { disallowedSpecial: new Set() })
// Tiny caches: every path (hit, miss, the cache emptied, longer than any cache) is taken many times.
const count = bpeCounter({ shortEntries: 64, shortLength: 8, longEntries: 4, longLength: 40 })
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/='

t.test('property: equal to the library on base64, in lines and on one line', async (t) => {
  const base64 = fc.string({ unit: fc.constantFrom(...B64), minLength: 1, maxLength: 600 })
  await fc.assert(
    fc.property(fc.array(base64, { minLength: 1, maxLength: 8 }), fc.constantFrom('', '\n', '\r\n', ' '), (lines, sep) => {
      const text = lines.join(sep)
      return count(text) === library(text)
    }),
    { numRuns: 1000 },
  )
  t.pass('1000 random texts')
})

t.test('property: equal to the library on ASCII of every character class', async (t) => {
  const ascii = fc.string({ unit: fc.integer({ min: 0, max: 127 }).map((c) => String.fromCharCode(c)), maxLength: 400 })
  await fc.assert(fc.property(ascii, (text) => count(text) === library(text)), { numRuns: 1000 })
  t.pass('1000 random texts')
})

t.test('property: equal to the library on arbitrary Unicode, lone surrogates included', async (t) => {
  const unit = fc.oneof(
    fc.string({ unit: 'grapheme', maxLength: 200 }),
    fc.string({ unit: 'binary', maxLength: 50 }),
    fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)),
    fc.constantFrom(' ', '  ', '\n', "'s", "'LL", '<|endoftext|>', '東京', '漢字'.repeat(40), 'x'.repeat(70), '"'.repeat(50)),
  )
  await fc.assert(
    fc.property(fc.array(unit, { maxLength: 12 }), (parts) => {
      const text = parts.join('')
      return count(text) === library(text)
    }),
    { numRuns: 1000 },
  )
  t.pass('1000 random texts')
})

t.test('a table of fixed cases', async (t) => {
  for (const text of ['', 'a', 'é', '🙂', '\ud800', 'hello world', "I'LL see what's there.", '  \n\n  x', 'A'.repeat(900), '1234567'])
    t.equal(count(text), library(text), JSON.stringify(text.slice(0, 20)))
})
