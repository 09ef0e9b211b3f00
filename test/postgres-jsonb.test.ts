/**
 * storage/postgres/jsonb.ts: the JSON text PostgreSQL's jsonb takes, for values holding what it refuses (a NUL, an
 * unpaired surrogate), by a table of values and the text expected. The database's own verdict on each is in
 * test/hostile-inputs.e2e.test.ts, run on PostgreSQL.
 */
import t from 'tap'
import { jsonb, nullableJsonb } from '../src/storage/postgres/jsonb.js'

const CASES: Array<[string, unknown, string]> = [
  ['plain text is JSON.stringify as it is', { a: 'b', n: 1, l: [true, null] }, '{"a":"b","n":1,"l":[true,null]}'],
  ['a NUL in a value', { a: 'x\u0000y' }, '{"a":"x\\ufffdy"}'],
  ['a NUL in a key', { ['k\u0000']: 1 }, '{"k\\ufffd":1}'],
  ['an unpaired low surrogate', ['a\udca2b'], '["a\\ufffdb"]'],
  ['an unpaired high surrogate at the end', 'a\ud83d', '"a\\ufffd"'],
  ['a pair is a character, kept', 'a\ud83d\ude00b', '"a\ud83d\ude00b"'],
  ['other control characters are kept', 'a\u0001\u001f\n', '"a\\u0001\\u001f\\n"'],
  ['an escaped backslash before u0000 is text, kept', 'a\\u0000', '"a\\\\u0000"'],
  ['a backslash, then a NUL', '\\\u0000', '"\\\\\\ufffd"'],
  ['a quote, then a NUL', '"\u0000', '"\\"\\ufffd"'],
]

for (const [name, value, expected] of CASES) {
  t.equal(jsonb(value), expected, name)
  t.doesNotThrow(() => JSON.parse(jsonb(value)) as unknown, `${name}: still JSON`)
}

t.equal(nullableJsonb(null), null)
t.equal(nullableJsonb(undefined), null)
t.equal(nullableJsonb({ a: '\u0000' }), '{"a":"\\ufffd"}')
