/**
 * Extraction with bounds (issue 29): PDFs made here to expand (a FlateDecode stream of zeros, chained Flate, many
 * pages, text past the limit) are refused with 422 `extraction_limit_exceeded` naming the limit, within the time
 * budget and without the process's memory following the bomb; a normal PDF is still read, also right after.
 *
 * Uploads go through the real HTTP API of a gateway in this process, so `process.memoryUsage().rss` is the gateway's
 * (its extraction threads included).
 *
 * Split in three files for the per-file timeout: extract-bombs.e2e.test.ts (the measurement, bombs through the API),
 * extract-bombs-memory.e2e.test.ts (a big job gives its memory back), extract-bombs-budget.e2e.test.ts (the time
 * budget, the text limit).
 */
import t from 'tap'
import { deflateSync } from 'node:zlib'
import { makePdf } from './helpers/format-fixtures.js'
import { startHarness } from './helpers/harness.js'
import { uploadJson } from './helpers/uploads.js'
import { expectLimit, normal, pdfWith, uploadPdf } from './helpers/pdf-bombs.js'

t.test('many pages past the time budget: the thread is ended, the next upload is read', async (t) => {
  // 10 s: a new thread's first PDF also imports pdfjs (≈ 1 s, several on a loaded machine under the test runner's
  // TypeScript loader), and the normal PDF after the refusal must fit with room to spare.
  const h = await startHarness(t, { env: { EXTRACT_TIMEOUT_MS: '10000' } })
  // 100,000 pages sharing one content stream of 2,000 empty text operations each: 200 million operations to read,
  // far past any budget, in a 15 MB file that yields no text (so no other limit is reached first).
  const ops = 'BT /F1 12 Tf 72 720 Td (a) Tj ' + '() Tj '.repeat(2000) + 'ET'
  const many = pdfWith([{ data: deflateSync(Buffer.from(ops, 'latin1')), filter: '/FlateDecode' }], 100_000)
  const started = performance.now()
  await expectLimit(t, await uploadPdf(h, 'many.pdf', many), 'EXTRACT_TIMEOUT_MS')
  // Generous: the budget plus a loaded machine's slack (what matters is that it ends, and the process is not stuck).
  t.ok(performance.now() - started < 120_000, 'refused after about the budget')
  const next = await uploadPdf(h, 'report.pdf', normal)
  t.equal(next.status, 201, 'a normal PDF right after is read by a new thread')
  t.match(await next.json(), { object: 'file', status: 'processed' })
})

t.test('text past EXTRACT_MAX_TEXT_CHARS: 422, for a PDF and for a text file', async (t) => {
  const h = await startHarness(t, { env: { EXTRACT_MAX_TEXT_CHARS: '2000' } })
  const lines = Array.from({ length: 80 }, (_, i) => `line ${i} of a long page of text`)
  await expectLimit(t, await uploadPdf(h, 'long.pdf', makePdf([lines, lines])), 'EXTRACT_MAX_TEXT_CHARS')
  const text = await uploadJson(h, { filename: 'long.txt', content: lines.join('\n').repeat(3) })
  await expectLimit(t, text, 'EXTRACT_MAX_TEXT_CHARS')
  const short = await uploadPdf(h, 'short.pdf', normal)
  t.equal(short.status, 201, 'a file under the limit is read')
  await short.json()
})
