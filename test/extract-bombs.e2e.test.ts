/**
 * Extraction with bounds (issue 29): PDFs made here to expand (a FlateDecode stream of zeros, chained Flate, many
 * pages, text past the limit) are refused with 422 `extraction_limit_exceeded` naming the limit, within the time
 * budget and without the process's memory following the bomb; a normal PDF is still read, also right after.
 *
 * Uploads go through the real HTTP API of a gateway in this process, so `process.memoryUsage().rss` is the gateway's
 * (its extraction threads included).
 */
import t, { type Test } from 'tap'
import { createDeflate, deflateSync } from 'node:zlib'
import { pdfDecodedBytes, DecodedBytesExceeded } from '../src/ingest/pdf-streams.js'
import { makePdf } from './helpers/format-fixtures.js'
import { startHarness, type Harness } from './helpers/harness.js'

const MiB = 1024 * 1024

/** A PDF whose pages' content streams are `contents` (raw bytes, already encoded with `filter`). */
function pdfWith(contents: Array<{ data: Buffer; filter?: string }>, pageCount = contents.length): Buffer {
  const parts: Buffer[] = []
  const offsets: number[] = []
  let size = 0
  const push = (b: Buffer | string): void => {
    const buf = typeof b === 'string' ? Buffer.from(b, 'latin1') : b
    parts.push(buf)
    size += buf.length
  }
  const objects: Array<Buffer | string> = []
  objects.push('<< /Type /Catalog /Pages 2 0 R >>')
  objects.push('') // pages, below
  objects.push('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>')
  const contentRefs: number[] = []
  for (const c of contents) {
    const dict = `<< /Length ${c.data.length}${c.filter ? ` /Filter ${c.filter}` : ''} >>\nstream\n`
    objects.push(Buffer.concat([Buffer.from(dict, 'latin1'), c.data, Buffer.from('\nendstream', 'latin1')]))
    contentRefs.push(objects.length)
  }
  const kids: string[] = []
  for (let p = 0; p < pageCount; p++) {
    objects.push(
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${contentRefs[p % contentRefs.length]} 0 R >>`,
    )
    kids.push(`${objects.length} 0 R`)
  }
  objects[1] = `<< /Type /Pages /Kids [${kids.join(' ')}] /Count ${kids.length} >>`
  push('%PDF-1.4\n')
  objects.forEach((o, i) => {
    offsets.push(size)
    push(`${i + 1} 0 obj\n`)
    push(o)
    push('\nendobj\n')
  })
  const xref = size
  push(`xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`)
  push(offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join(''))
  push(`trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`)
  return Buffer.concat(parts)
}

/** `bytes` of zeros, deflated as a stream (1 GiB of zeros is never held: 64 KiB at a time). */
async function deflatedZeros(bytes: number): Promise<Buffer> {
  const d = createDeflate({ level: 9 })
  const out: Buffer[] = []
  d.on('data', (c: Buffer) => out.push(c))
  const zeros = Buffer.alloc(64 * 1024)
  for (let left = bytes; left > 0; left -= zeros.length) {
    if (!d.write(left >= zeros.length ? zeros : zeros.subarray(0, left))) await new Promise((r) => d.once('drain', r))
  }
  await new Promise<void>((resolve) => d.end(resolve))
  return Buffer.concat(out)
}

async function uploadPdf(h: Harness, name: string, pdf: Buffer): Promise<Response> {
  const form = new FormData()
  form.append('file', new Blob([pdf], { type: 'application/pdf' }), name)
  return h.fetch('/api/v1/files', { method: 'POST', body: form })
}

async function expectLimit(t: Test, res: Response, limit: string): Promise<void> {
  t.equal(res.status, 422, `422 for ${limit}`)
  const body = (await res.json()) as { error: { code: string; message: string; param: string | null; type: string } }
  t.match(body.error, { code: 'extraction_limit_exceeded', param: 'file', type: 'invalid_request_error' })
  t.match(body.error.message, limit, `the message names ${limit}`)
}

const normal = makePdf([['Quarterly report', 'Revenue grew in the northern region.']])

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

  // 200 MB (the issue's first case) and a bomb inside a bomb.
  await expectLimit(t, await uploadPdf(h, 'b200.pdf', pdfWith([{ data: await deflatedZeros(200 * MiB), filter: '/FlateDecode' }])), 'EXTRACT_MAX_DECODED_BYTES')
  const nested = deflateSync(await deflatedZeros(512 * MiB))
  await expectLimit(t, await uploadPdf(h, 'nested.pdf', pdfWith([{ data: nested, filter: '[/FlateDecode /FlateDecode]' }])), 'EXTRACT_MAX_DECODED_BYTES')

  const after = await uploadPdf(h, 'report-2.pdf', normal)
  t.equal(after.status, 201, 'a normal PDF is read after the bombs')
  await after.json()
  t.equal((await h.fetch('/api/v1/files')).status, 200)
})

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
  const text = await h.fetch('/api/v1/files', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ filename: 'long.txt', content: lines.join('\n').repeat(3) }),
  })
  await expectLimit(t, text, 'EXTRACT_MAX_TEXT_CHARS')
  const short = await uploadPdf(h, 'short.pdf', normal)
  t.equal(short.status, 201, 'a file under the limit is read')
  await short.json()
})
