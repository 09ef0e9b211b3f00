/**
 * The ASCII pre-tokenizer scan against the regex it stands for (gpt-tokenizer's O200K_TOKEN_SPLIT_REGEX): the same
 * pieces, at the same places, on any ASCII text, and on the edge cases of each alternative.
 */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants'
import { asciiPieceEnd, isAscii } from '../src/context/o200k-ascii-split.js'

const byRegex = (text: string): string[] => [...text.matchAll(new RegExp(O200K_TOKEN_SPLIT_REGEX.source, O200K_TOKEN_SPLIT_REGEX.flags))].map((m) => m[0])
const byScan = (text: string): string[] => {
  const out: string[] = []
  for (let i = 0; i < text.length; ) {
    const e = asciiPieceEnd(text, i)
    out.push(text.slice(i, e))
    i = e
  }
  return out
}

t.test('property: the same pieces as the regex on any ASCII', async (t) => {
  const anyAscii = fc.string({ unit: fc.integer({ min: 0, max: 127 }).map((c) => String.fromCharCode(c)), maxLength: 200 })
  // Dense in the characters the alternatives turn on: letters of both cases, digits, quotes, slashes, white space.
  const tricky = fc.string({ unit: fc.constantFrom(...'aZbY09\'sSdDlLvVeErRmMtT /+-.\n\r\t\v\f"'), maxLength: 200 })
  for (const [name, gen] of [['any ASCII', anyAscii], ['tricky characters', tricky]] as const) {
    await fc.assert(fc.property(gen, (text) => JSON.stringify(byScan(text)) === JSON.stringify(byRegex(text))), { numRuns: 3000 })
    t.pass(`3000 texts of ${name}`)
  }
})

t.test('a table of the alternatives', async (t) => {
  for (const text of [
    "I'LL we've DON'T it's 'S x'", 'HTTPServer iPhone ABC abc', ' 12345 1 22', 'a+/b +\n/\n/x', '  \n\n  x', 'x   ', 'a \tb',
    ' \r\n', '\v\fx', '\u0000\u001f\u007f', "'", "x''s", 'Ab1cD', '', '...\r\r\n/',
  ])
    t.same(byScan(text), byRegex(text), JSON.stringify(text))
  t.equal(isAscii('plain text\n'), true)
  t.equal(isAscii('naïve'), false)
})
