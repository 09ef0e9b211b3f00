/**
 * `_metadata` is written out field by field (chat/metadata.ts `metadataJson`), not by JSON.stringify: the text every
 * response carries must still be exactly JSON.stringify's, for any values a request can produce (strings that need
 * escaping, sources with metadata and `focused`, non-finite numbers, nulls).
 */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { metadataJson, type Metadata, type RagSource } from '../src/chat/metadata.js'
import type { NotRetrieved } from '../src/knowledge/relevance.js'

const REASONS: Array<NotRetrieved | null> = [null, 'disabled', 'empty_query', 'small_talk', 'no_files', 'no_match', 'not_relevant', 'no_room', 'in_prompt']

const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('', '"', '\\', '\u0000', '\u2028', 'a"b\\c\n', '\ud800'))
const count = fc.oneof(fc.nat(), fc.integer(), fc.constantFrom(0, -0, 2 ** 53, 1e21))
const real = fc.oneof(fc.double(), fc.constantFrom(NaN, Infinity, -Infinity, 0.1 + 0.2))

const source: fc.Arbitrary<RagSource> = fc
  .record({
    file_id: text,
    filename: text,
    metadata: fc.oneof(fc.constant(null), fc.dictionary(text, fc.jsonValue())),
    chunk_index: count,
    score: real,
    relevance: real,
    focused: fc.boolean(),
  })
  .map(({ focused, ...s }) => (focused ? { ...s, focused: true as const } : s))

/** In the field order both planner paths build it (planner.ts, plain-plan.ts): the order JSON.stringify then writes. */
const metadata: fc.Arbitrary<Metadata> = fc
  .record({
    sessionId: fc.option(text),
    historyMessages: count,
    recalledMessages: count,
    recognizedMessages: count,
    enabled: fc.boolean(),
    resultsFound: count,
    query: fc.option(text),
    sources: fc.array(source, { maxLength: 4 }),
    reason: fc.constantFrom(...REASONS),
    bestRelevance: fc.option(real),
    totalTokens: count,
    includedMessages: count,
    includedChunks: count,
    truncated: fc.boolean(),
    window: count,
    reserved: count,
    stablePrefixTokens: count,
  })
  .map((v) => ({
    memory: { sessionId: v.sessionId, historyMessages: v.historyMessages, recalledMessages: v.recalledMessages, recognizedMessages: v.recognizedMessages },
    rag: { enabled: v.enabled, resultsFound: v.resultsFound, query: v.query, sources: v.sources, reason: v.reason, bestRelevance: v.bestRelevance },
    context: {
      totalTokens: v.totalTokens,
      includedMessages: v.includedMessages,
      includedChunks: v.includedChunks,
      truncated: v.truncated,
      window: v.window,
      reserved: v.reserved,
      stablePrefixTokens: v.stablePrefixTokens,
    },
  }))

t.test('metadataJson is JSON.stringify, character for character, on any metadata', async (t) => {
  // One assertion for the 2,000 cases: fast-check throws with the smallest counterexample when one differs.
  t.doesNotThrow(() => fc.assert(fc.property(metadata, (m) => metadataJson(m) === JSON.stringify(m)), { numRuns: 2000 }))
})

t.test('every field of the type is written: a metadata object with each one set, and a source focused', async (t) => {
  // Typed with every field required, so a field added to Metadata fails to compile here until it is set (and then the
  // comparison fails until metadataJson writes it).
  const full: { [K in keyof Metadata]: Required<Metadata[K]> } = {
    memory: { sessionId: 'thread "7"', historyMessages: 12, recalledMessages: 3, recognizedMessages: 2 },
    rag: {
      enabled: true,
      resultsFound: 9,
      query: 'gift card\nrefunds',
      sources: [{ file_id: 'file-1', filename: 'faq.md', metadata: { team: 'support' }, chunk_index: 4, score: 0.031, relevance: 0.83, focused: true }],
      reason: null,
      bestRelevance: 0.83,
    },
    context: { totalTokens: 2048, includedMessages: 15, includedChunks: 1, truncated: true, window: 8192, reserved: 1024, stablePrefixTokens: 640 },
  }
  t.equal(metadataJson(full), JSON.stringify(full))
  t.same(JSON.parse(metadataJson(full)), full)
})
