/**
 * The chunker: token bounds, exact offsets into the extracted text, heading paths, paragraph-respecting breaks and
 * sentence overlap, and the per-file chunk cap.
 */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { chunkText, countO200k } from '../src/ingest/chunker.js'
import { countO200kUncached } from '../src/context/token-count.js'
import { markdownBlocks, paragraphs } from '../src/ingest/extract.js'
import { HOSTILE_SHAPES, PROSE } from '../bench/lib/shapes.js'

const sentence = (i: number): string => `Sentence number ${i} talks about topic ${i % 7} and nothing else at all.`

t.test('chunks stay within the token size, and text equals the extracted range', async (t) => {
  const text = Array.from({ length: 6 }, (_, p) => Array.from({ length: 9 }, (_, s) => sentence(p * 10 + s)).join(' ')).join('\n\n')
  const chunks = chunkText({ text, blocks: paragraphs(text) }, { chunkTokens: 64, overlapTokens: 0, maxChunks: 1000 })
  t.ok(chunks.length > 6)
  chunks.forEach((c, i) => {
    t.equal(c.index, i)
    t.equal(c.text, text.slice(c.start, c.end), 'offsets point at the text')
    t.equal(c.tokens, countO200kUncached(c.text), 'exact token count (the library’s own, not the cached counter)')
    t.ok(c.tokens <= 64, `chunk ${i} has ${c.tokens} ≤ 64 tokens`)
    t.notMatch(c.text, /^\s|\s$/, 'trimmed')
  })
  // Every sentence is in some chunk, whole.
  for (let i = 0; i < 60; i++) if (i % 10 < 9) t.ok(chunks.some((c) => c.text.includes(sentence(i))), `sentence ${i} whole`)
})

t.test('breaks fall on sentence ends; overlap repeats the previous sentence within a paragraph', async (t) => {
  const text = Array.from({ length: 12 }, (_, i) => sentence(i)).join(' ')
  const perSentence = countO200k(sentence(1))
  const chunks = chunkText({ text, blocks: paragraphs(text) }, { chunkTokens: perSentence * 4 + 4, overlapTokens: perSentence + 2, maxChunks: 100 })
  t.ok(chunks.length >= 3)
  for (const c of chunks) t.match(c.text, /^Sentence number \d+.*\.$/s, 'starts and ends on sentence boundaries')
  for (let i = 1; i < chunks.length; i++) {
    const prev = chunks[i - 1]!
    const cur = chunks[i]!
    t.ok(cur.start < prev.end, `chunk ${i} overlaps chunk ${i - 1}`)
    t.ok(prev.text.endsWith(text.slice(cur.start, prev.end)), 'the overlap is the previous chunk’s tail')
  }
})

t.test('short paragraphs share a chunk; a paragraph break ends a half-full chunk without overlap', async (t) => {
  const p1 = [sentence(1), sentence(2)].join(' ')
  const p2 = [sentence(3), sentence(4)].join(' ')
  const text = ['Alpha one.', 'Beta two.', p1, p2].join('\n\n')
  const size = countO200k(p1) + 20
  const chunks = chunkText({ text, blocks: paragraphs(text) }, { chunkTokens: size, overlapTokens: 20, maxChunks: 100 })
  t.equal(chunks[0]?.text.startsWith('Alpha one.\n\nBeta two.'), true, 'small paragraphs merged')
  const last = chunks.at(-1)
  t.equal(last?.text, p2, 'the last paragraph starts its own chunk, with no overlap from the one before')
  t.equal(last?.start, text.indexOf(p2))
})

t.test('headings start chunks and give every chunk its heading path', async (t) => {
  const md = [
    '# Manual',
    'Intro paragraph.',
    '## Install',
    'Run the installer. It takes a minute.',
    '### Linux',
    'Use the package manager.',
    '## Usage',
    'Start it with the start command.',
  ].join('\n\n')
  const chunks = chunkText({ text: md, blocks: markdownBlocks(md) }, { chunkTokens: 200, overlapTokens: 20, maxChunks: 100 })
  t.same(
    chunks.map((c) => [c.headingPath, c.text.split('\n')[0]]),
    [
      [['Manual'], '# Manual'],
      [['Manual', 'Install'], '## Install'],
      [['Manual', 'Install', 'Linux'], '### Linux'],
      [['Manual', 'Usage'], '## Usage'],
    ],
  )
  const stacked = '# A\n\n## B\n\nText under B.'
  const s = chunkText({ text: stacked, blocks: markdownBlocks(stacked) }, { chunkTokens: 200, overlapTokens: 0, maxChunks: 10 })
  t.same(s.map((c) => [c.text, c.headingPath]), [[stacked, ['A', 'B']]], 'a heading alone does not make a chunk')
})

t.test('text without sentence breaks is cut at words, and unbroken text anywhere', async (t) => {
  const words = Array.from({ length: 600 }, (_, i) => `word${i}`).join(' ')
  const chunks = chunkText({ text: words, blocks: paragraphs(words) }, { chunkTokens: 100, overlapTokens: 10, maxChunks: 100 })
  t.ok(chunks.length >= 8)
  for (const c of chunks) {
    t.ok(c.tokens <= 110, `≈ bounded (${c.tokens})`)
    t.match(c.text, /^word\d+.*word\d+$/s, 'cut between words')
  }
  const blob = 'x'.repeat(20000)
  const b = chunkText({ text: blob, blocks: paragraphs(blob) }, { chunkTokens: 100, overlapTokens: 0, maxChunks: 1000 })
  t.equal(b.map((c) => c.text).join(''), blob, 'nothing lost')
})

t.test('property: every chunk’s token count equals counting its text, whatever the whitespace and punctuation', async (t) => {
  const fragment = fc.constantFrom(
    'word', 'The', 'naïve', 'école', '東京', '42', '3.14', 'don’t', "it's", '"Quoted', 'end."', 'Stop.', 'Why?', 'Wow!',
    '(aside)', '—', '…', '🙂', '<|endoftext|>', 'x'.repeat(30), ' ', ' ', ' ', '  ', '\t', '\n', '\n\n', '\n \n', ' \n', '.\n',
  )
  await fc.assert(
    fc.asyncProperty(fc.array(fragment, { minLength: 1, maxLength: 400 }), fc.integer({ min: 16, max: 80 }), async (parts, size) => {
      const text = parts.join('')
      const chunks = chunkText({ text, blocks: paragraphs(text) }, { chunkTokens: size, overlapTokens: Math.floor(size / 3), maxChunks: 10_000 })
      for (const c of chunks) {
        if (c.tokens !== countO200kUncached(c.text)) return false
        if (c.text !== text.slice(c.start, c.end)) return false
      }
      return true
    }),
    { numRuns: 300 },
  )
  t.pass('300 random documents')
})

t.test('more chunks than maxChunks → 413', async (t) => {
  const text = Array.from({ length: 50 }, (_, i) => sentence(i)).join('\n\n')
  t.throws(() => chunkText({ text, blocks: paragraphs(text) }, { chunkTokens: 16, overlapTokens: 0, maxChunks: 3 }), {
    code: 'payload_too_large',
    status: 413,
  })
  t.throws(() => chunkText({ text, blocks: paragraphs(text) }, { chunkTokens: 16, overlapTokens: 16, maxChunks: 3 }), RangeError)
})

t.test('base64 and prose: the same chunks as with the library counting, each within its size by the exact count', async (t) => {
  // The default counter (our own merge, o200k-bpe.ts) must not move a single boundary: same chunks as counting every
  // unit and chunk with gpt-tokenizer itself, and every chunk's count is the library's count of its text.
  for (const shape of [PROSE, ...HOSTILE_SHAPES.filter((s) => s.name.startsWith('base64'))]) {
    const text = shape.make(48 * 1024)
    const opts = { chunkTokens: 192, overlapTokens: 80, maxChunks: 100_000 }
    const ours = chunkText({ text, blocks: paragraphs(text) }, opts)
    const library = chunkText({ text, blocks: paragraphs(text) }, { ...opts, countTokens: countO200kUncached })
    t.same(ours, library, `${shape.name}: ${ours.length} chunks, identical`)
    t.ok(ours.every((c) => c.tokens === countO200kUncached(c.text) && c.tokens <= 192), `${shape.name}: exact counts, ≤ 192`)
  }
})

t.test('property: base64 on one line (every unit cut mid-word): each chunk’s count is the library’s', async (t) => {
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  await fc.assert(
    fc.property(fc.string({ unit: fc.constantFrom(...B64, ...B64, '\n', ' '), minLength: 200, maxLength: 6000 }), fc.integer({ min: 16, max: 200 }), (text, size) => {
      const chunks = chunkText({ text, blocks: paragraphs(text) }, { chunkTokens: size, overlapTokens: Math.floor(size / 3), maxChunks: 100_000 })
      return chunks.every((c) => c.tokens === countO200kUncached(c.text) && c.text === text.slice(c.start, c.end))
    }),
    { numRuns: 200 },
  )
  t.pass('200 random texts')
})

t.test('a line starting with "/" after a line ending in a symbol: one o200k pre-token spans the break, the count stays exact', async (t) => {
  const text = `${'A'.repeat(121)}/\n/Ak${'A'.repeat(80)}`
  const chunks = chunkText({ text, blocks: paragraphs(text) }, { chunkTokens: 16, overlapTokens: 5, maxChunks: 1000 })
  for (const c of chunks) t.equal(c.tokens, countO200kUncached(c.text), JSON.stringify(c.text.slice(0, 30)))
})
