/**
 * Chunk terms: each chunk's terms equal analyzing its whole index text (title, heading path, text joined by line
 * breaks), although overlapping stretches are analyzed once — whatever the chunker did to the text.
 */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { analyze } from '../src/retrieval/analyzer.js'
import { chunkTerms, codeTerms, decodeTerms } from '../src/retrieval/chunk-terms.js'
import { chunkText } from '../src/ingest/chunker.js'
import { markdownBlocks } from '../src/ingest/extract.js'

const indexTerms = (title: string, c: { headingPath: string[]; text: string }): string[] =>
  analyze([title, ...c.headingPath, c.text].filter(Boolean).join('\n'))

t.test('property: equal to analyzing each chunk whole, for overlapping chunks of any text', async (t) => {
  const fragment = fc.constantFrom(
    'The', 'Normans', 'running', 'ΟΔΟΣ', 'Σ', "'", '.', 'Stop.', 'Why?', 'café', '東京都', 'don’t', '42', 'x'.repeat(300), '# Title\n\n',
    '## Sub Σ\n\n', ' ', ' ', ' ', '\n', '\n\n', '\u00a0',
  )
  await fc.assert(
    fc.property(fc.array(fragment, { minLength: 1, maxLength: 300 }), fc.integer({ min: 16, max: 64 }), fc.constantFrom('notes.md', 'ΣΣ-report.txt', ''), (parts, size, filename) => {
      const text = parts.join('')
      const chunks = chunkText({ text, blocks: markdownBlocks(text) }, { chunkTokens: size, overlapTokens: Math.floor(size / 2), maxChunks: 10_000 })
      const title = filename.replace(/\.[^.]*$/, '')
      const got = chunkTerms(text, title, chunks)
      // Coded as they travel from the prepare thread, decoded: the same terms.
      return chunks.every((c, i) => JSON.stringify(got[i]) === JSON.stringify(indexTerms(title, c))) &&
        JSON.stringify(decodeTerms(codeTerms(got))) === JSON.stringify(got)
    }),
    { numRuns: 300 },
  )
  t.pass('300 random documents')
})

t.test('a chunk that starts inside a word is analyzed whole, not from its neighbours’ pieces', async (t) => {
  const text = 'alpha beta gamma'
  // Hand-made spans: the second starts mid-word ("ta gamma"), inside the first.
  const spans = [
    { start: 0, end: 10, headingPath: [] },
    { start: 8, end: 16, headingPath: ['Greek letters'] },
  ]
  t.same(chunkTerms(text, 'doc', spans), [
    ['doc', 'alpha', 'beta'],
    ['doc', 'greek', 'letter', 'ta', 'gamma'],
  ])
})
