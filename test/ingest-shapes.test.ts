/**
 * Ingestion on inputs of hostile shape: every one of these was superlinear before (a quarter of a megabyte of most of
 * them took from seconds to many minutes; 15 MB without white space overflowed the stack). Here each must extract and
 * chunk into chunks of bounded size that cover the text; how the cost grows with size is measured by
 * bench/ingest-shapes.ts (no timings are asserted here: a test that hangs is what fails).
 */
import t from 'tap'
import { chunkText } from '../src/ingest/chunker.js'
import { extract } from '../src/ingest/extract.js'
import { MAX_TITLE_CHARS } from '../src/ingest/text-builder.js'
import { HOSTILE_SHAPES } from '../bench/lib/shapes.js'

const SIZE = 256 * 1024
const OPTS = { chunkTokens: 192, overlapTokens: 80, maxChunks: 1_000_000 }

for (const shape of HOSTILE_SHAPES) {
  t.test(`${shape.name}: ${shape.what}`, async (t) => {
    const x = await extract({ filename: shape.filename, contentType: undefined, bytes: Buffer.from(shape.make(SIZE)) })
    const chunks = chunkText(x, OPTS)
    t.ok(chunks.length > 0, `${chunks.length} chunks`)
    // A unit is at most half a chunk, so a chunk never holds much more than chunkTokens (pieces are cut by an
    // estimate of characters per token, hence the slack).
    const biggest = Math.max(...chunks.map((c) => c.tokens))
    t.ok(biggest <= 2 * OPTS.chunkTokens, `largest chunk ${biggest} tokens`)
    t.ok(chunks.every((c) => c.headingPath.every((h) => h.length <= MAX_TITLE_CHARS)), 'heading titles bounded')
    // Every non-white-space character of the extracted text is in some chunk.
    let covered = 0
    for (const c of chunks) {
      if (c.start > covered && /\S/.test(x.text.slice(covered, c.start))) t.fail(`text at ${covered} is in no chunk`)
      covered = Math.max(covered, c.end)
    }
    t.notOk(/\S/.test(x.text.slice(covered)), 'the end is covered')
  })
}
