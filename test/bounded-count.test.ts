import t from 'tap'
import { encode } from 'gpt-tokenizer'
import { MAX_RUN, boundedCount, isWhite } from '../src/context/bounded-count.js'

const count = (s: string): number => encode(s, { disallowedSpecial: new Set() }).length

t.test('ordinary text is counted exactly', async (t) => {
  const text = 'The quick brown fox jumps over the lazy dog. '.repeat(200)
  t.equal(boundedCount(text, count), count(text))
  t.equal(boundedCount('short', count), count('short'))
})

t.test('a long unbroken run is counted in slices: never below the true count, and fast', async (t) => {
  const cjk = '漢字仮名交じり文'.repeat(1500) // 12,000 characters, one pre-token
  let calls = 0
  let longest = 0
  const n = boundedCount(`before ${cjk} after`, (s) => {
    calls++
    longest = Math.max(longest, s.length)
    return count(s)
  })
  t.ok(longest <= MAX_RUN + 1, 'no slice longer than the bound reaches the tokenizer')
  t.ok(calls >= 12)
  t.ok(n >= count('before ') + count(' after') + cjk.length / 8, 'a plausible count')
})

t.test('surrogate pairs are never cut', async (t) => {
  const emoji = '😀'.repeat(1200) // 2,400 UTF-16 units, no white space
  const seen: string[] = []
  boundedCount(emoji, (s) => {
    seen.push(s)
    return count(s)
  })
  t.equal(seen.join(''), emoji)
  t.ok(seen.every((s) => !/\p{Surrogate}/u.test(s)), 'no slice holds half a pair')
})

t.test('long runs of white space are counted in slices too (one pre-token of spaces was quadratic)', async (t) => {
  const text = `start${' '.repeat(5000)}\n\n${'\n'.repeat(3000)}end`
  let longest = 0
  const n = boundedCount(text, (s) => {
    longest = Math.max(longest, s.length)
    return count(s)
  })
  t.ok(longest <= MAX_RUN + 1, 'no slice longer than the bound reaches the tokenizer')
  t.ok(n >= count(text), 'never below the true count')
})

t.test('15 MB without white space: no stack overflow, every character counted once', async (t) => {
  // The old guard was a regex (/\S{1000,}/) whose match kept a backtracking entry per character: RangeError here.
  const text = 'aB3+/x'.repeat(2_500_000)
  let chars = 0
  const n = boundedCount(text, (s) => {
    chars += s.length
    return s.length
  })
  t.equal(chars, text.length)
  t.equal(n, text.length)
})

t.test('isWhite is exactly \\s', async (t) => {
  for (let c = 0; c <= 0xffff; c++) if (isWhite(c) !== /\s/.test(String.fromCharCode(c))) t.fail(`U+${c.toString(16)}`)
  t.pass('all of the BMP')
})
