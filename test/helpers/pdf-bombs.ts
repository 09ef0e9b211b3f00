/**
 * PDFs made to expand, and the upload/limit checks, shared by the extraction-bomb files (test/extract-bombs*.e2e.test.ts,
 * split so each stays well within the per-file timeout).
 */
import type { Test } from 'tap'
import { createDeflate, deflateSync } from 'node:zlib'
import type { Harness } from './harness.js'
import { uploadMultipart } from './uploads.js'
import { makePdf } from './format-fixtures.js'

export const MiB = 1024 * 1024

/** A PDF whose pages' content streams are `contents` (raw bytes, already encoded with `filter`). */
export function pdfWith(contents: Array<{ data: Buffer; filter?: string }>, pageCount = contents.length): Buffer {
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
export async function deflatedZeros(bytes: number): Promise<Buffer> {
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

export const uploadPdf = (h: Harness, name: string, pdf: Buffer): Promise<Response> =>
  uploadMultipart(h, { filename: name, content: pdf, type: 'application/pdf' })

export async function expectLimit(t: Test, res: Response, limit: string): Promise<void> {
  t.equal(res.status, 422, `422 for ${limit}`)
  const body = (await res.json()) as { error: { code: string; message: string; param: string | null; type: string } }
  t.match(body.error, { code: 'extraction_limit_exceeded', param: 'file', type: 'invalid_request_error' })
  t.match(body.error.message, limit, `the message names ${limit}`)
}

export const normal = makePdf([['Quarterly report', 'Revenue grew in the northern region.']])
