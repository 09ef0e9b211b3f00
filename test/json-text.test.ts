/** json-text.ts writes strings and numbers exactly as JSON.stringify does, for any string and any number. */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { jsonNumber, jsonString } from '../src/json-text.js'

t.test('jsonString is JSON.stringify on any string: escapes, lone surrogates, long ones, plain ids', async (t) => {
  const strings = fc.oneof(
    fc.string(),
    fc.string({ unit: 'binary' }),
    fc.string({ minLength: 60, maxLength: 70 }),
    fc.constantFrom('', '"', '\\', '\u0000', '\u001f', '\u007f', '\u2028', '\ud800', 'resp_7e352d7265df867a11b7bffd', 'openai/gpt-4o'),
  )
  t.doesNotThrow(() => fc.assert(fc.property(strings, (s) => jsonString(s) === JSON.stringify(s)), { numRuns: 3000 }))
})

t.test('jsonNumber is JSON.stringify on any number: non-finite ones are null', async (t) => {
  const numbers = fc.oneof(fc.double(), fc.integer(), fc.constantFrom(NaN, Infinity, -Infinity, -0, 1e21, 2 ** 53 + 2, 5e-324))
  t.doesNotThrow(() => fc.assert(fc.property(numbers, (n) => jsonNumber(n) === JSON.stringify(n)), { numRuns: 3000 }))
})
