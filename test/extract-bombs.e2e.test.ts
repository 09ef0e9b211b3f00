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
import { pdfDecodedBytes, DecodedBytesExceeded } from '../src/ingest/pdf-streams.js'
import { startHarness } from './helpers/harness.js'
import { deflatedZeros, expectLimit, MiB, normal, pdfWith, uploadPdf } from './helpers/pdf-bombs.js'

t.test('the stream measurement: counts what Flate streams decode to, stops at the limit', async (t) => {
  const zeros = deflateSync(Buffer.alloc(4 * MiB))
  t.equal(await pdfDecodedBytes(pdfWith([{ data: zeros, filter: '/FlateDecode' }]), 64 * MiB), 4 * MiB, 'one stream: its decoded size')
  await t.rejects(pdfDecodedBytes(pdfWith([{ data: zeros, filter: '/FlateDecode' }]), MiB), DecodedBytesExceeded, 'over the limit')
  // Chained: each stage counts, so a bomb inside a bomb is seen.
  const twice = deflateSync(zeros)
  await t.rejects(pdfDecodedBytes(pdfWith([{ data: twice, filter: '[/FlateDecode /FlateDecode]' }]), 2 * MiB), DecodedBytesExceeded, 'a chained bomb')
  // An unknown mix with Flate cannot be measured: a large one counts as deflate's worst case.
  await t.rejects(pdfDecodedBytes(pdfWith([{ data: zeros, filter: '[/ASCII85Decode /FlateDecode]' }]), MiB), DecodedBytesExceeded)
  t.ok((await pdfDecodedBytes(normal, MiB)) < 1024, 'a normal PDF measures its few bytes')
})

t.test('decompression bombs through the API: refused within the time budget, memory bounded, normal PDFs still read', async (t) => {
  const h = await startHarness(t, { env: { EXTRACT_TIMEOUT_MS: '30000' } })
  // Warm the extraction thread and pdfjs with a normal PDF first, so the measurement below is of the bomb alone.
  const first = await uploadPdf(h, 'report.pdf', normal)
  t.equal(first.status, 201, 'a normal PDF is read')
  await first.json()

  const gib = pdfWith([{ data: await deflatedZeros(1024 * MiB), filter: '/FlateDecode' }])
  t.ok(gib.length < 2 * MiB, `a ${(gib.length / MiB).toFixed(2)} MB PDF that inflates to 1 GiB`)
  const rssBefore = process.memoryUsage().rss
  let peak = rssBefore
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20)
  const started = performance.now()
  const res = await uploadPdf(h, 'bomb.pdf', gib)
  const took = performance.now() - started
  clearInterval(sampler)
  await expectLimit(t, res, 'EXTRACT_MAX_DECODED_BYTES')
  t.ok(took < 30_000, `refused within the time budget (${Math.round(took)} ms)`)
  const growth = (peak - rssBefore) / MiB
  t.ok(growth < 300, `peak rss grew by ${growth.toFixed(0)} MB (< 300 MB) for a 1 GiB bomb`)

  // 200 MB (the first case) and a bomb inside a bomb.
  await expectLimit(t, await uploadPdf(h, 'b200.pdf', pdfWith([{ data: await deflatedZeros(200 * MiB), filter: '/FlateDecode' }])), 'EXTRACT_MAX_DECODED_BYTES')
  const nested = deflateSync(await deflatedZeros(512 * MiB))
  await expectLimit(t, await uploadPdf(h, 'nested.pdf', pdfWith([{ data: nested, filter: '[/FlateDecode /FlateDecode]' }])), 'EXTRACT_MAX_DECODED_BYTES')

  const after = await uploadPdf(h, 'report-2.pdf', normal)
  t.equal(after.status, 201, 'a normal PDF is read after the bombs')
  await after.json()
  t.equal((await h.fetch('/api/v1/files')).status, 200)
})
