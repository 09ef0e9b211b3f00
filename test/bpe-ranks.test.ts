/**
 * The rank tables bpe-ranks.ts scans from gpt-tokenizer's generated rank files, against the library's own rank lists:
 * every rank the library can look up (a string, or a byte array that is not valid UTF-8) is found with its rank, each
 * key once (the lists hold no two entries with the same bytes), and the two-byte table agrees.
 */
import t from 'tap'
import { createRequire } from 'node:module'
import { tryConvertToString } from 'gpt-tokenizer/utfUtil'
import { latin1OfUtf8, NONE, rankTable, type BpeEncoding } from '../src/context/bpe-ranks.js'

const require = createRequire(import.meta.url)

for (const encoding of ['o200k_base', 'cl100k_base'] as const satisfies readonly BpeEncoding[]) {
  t.test(`${encoding}: every rank of the library's list, by its bytes`, async (t) => {
    const list = (require(`gpt-tokenizer/cjs/bpeRanks/${encoding}`) as { default: Array<string | number[]> }).default
    const table = rankTable(encoding)
    const ranks = new Map<string, number>()
    let repeated = 0
    list.forEach((value, rank) => {
      let key: string | undefined
      if (typeof value === 'string') key = latin1OfUtf8(value)
      else if (tryConvertToString(new Uint8Array(value)) === undefined) key = String.fromCharCode(...value)
      if (key === undefined) return
      if (ranks.has(key)) repeated++
      ranks.set(key, rank)
    })
    t.equal(repeated, 0, 'no two ranks with the same bytes')
    let wrong = 0
    for (const [key, rank] of ranks) if (table.rank(`(${key})`, 1, key.length + 1) !== rank) wrong++
    t.equal(wrong, 0, `${ranks.size} keys found with their ranks`)
    let wrongPairs = 0
    for (let x = 0; x < 65536; x++) {
      const key = String.fromCharCode(x >> 8, x & 0xff)
      if (table.pair(key, 0) !== (ranks.get(key) ?? NONE)) wrongPairs++
    }
    t.equal(wrongPairs, 0, 'every two-byte sequence')
    t.equal(table.rank('\u0000\u00ff\u0000\u00ff\u0000', 0, 5), NONE, 'a sequence that is no token')
  })
}
