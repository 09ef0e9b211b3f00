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
import { startHarness } from './helpers/harness.js'
import { deflatedZeros, MiB, normal, pdfWith, uploadPdf } from './helpers/pdf-bombs.js'

t.test('a big job under the decoded limit: its memory is given back afterwards', async (t) => {
  const h = await startHarness(t)
  const warm = await uploadPdf(h, 'report.pdf', normal)
  t.equal(warm.status, 201)
  await warm.json()
  const pdf = pdfWith([{ data: await deflatedZeros(100 * MiB), filter: '/FlateDecode' }])
  const idle = process.memoryUsage().rss
  let peak = idle
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20)
  // 100 MB of zeros: under the 128 MiB default, so pdfjs really decodes it (and finds no text: 400 empty_file).
  const res = await uploadPdf(h, 'zeros.pdf', pdf)
  clearInterval(sampler)
  t.equal(res.status, 400, 'read, and found to have no text')
  await res.json()
  // The thread that decoded it is ended, so what it held goes back (bounded wait): at most half of the job's peak
  // growth is still held a little later.
  const bound = idle + (peak - idle) / 2
  let rss = process.memoryUsage().rss
  for (let i = 0; i < 50 && rss > bound; i++) {
    await new Promise((r) => setTimeout(r, 100))
    rss = process.memoryUsage().rss
  }
  t.ok(rss <= bound, `rss ${((rss - idle) / MiB).toFixed(0)} MB above idle after the job, its peak ${((peak - idle) / MiB).toFixed(0)} MB`)
  const again = await uploadPdf(h, 'report-2.pdf', normal)
  t.equal(again.status, 201, 'the next upload gets a new thread')
  await again.json()
})
