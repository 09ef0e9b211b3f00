/**
 * Upload fixtures for the extraction and knowledge-base tests: an uploaded-file record, and a PDF made here (with a
 * real text layer and a correct xref table) rather than a checked-in binary.
 */

/** What the extractor and KnowledgeBase.ingest take; `metadata` is ignored by the extractor. */
export const upload = (
  filename: string,
  content: string | Buffer,
  contentType?: string,
  metadata: Record<string, unknown> | null = null,
) => ({
  filename,
  contentType,
  bytes: typeof content === 'string' ? Buffer.from(content) : content,
  metadata,
})

/** A minimal valid PDF 1.4: one page per entry, each line drawn with Helvetica; '' leaves a blank line. */
export function makePdf(pages: string[][]): Buffer {
  const objs: string[] = ['<< /Type /Catalog /Pages 2 0 R >>', '']
  const kids: string[] = []
  const font = 3
  objs.push('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>')
  for (const lines of pages) {
    const ops = lines.map((l) => `(${l.replace(/[\\()]/g, (m) => `\\${m}`)}) '`).join(' ')
    const content = `BT /F1 12 Tf 72 720 Td 14 TL ${ops} ET`
    objs.push(`<< /Length ${Buffer.byteLength(content, 'latin1')} >>\nstream\n${content}\nendstream`)
    const contentRef = objs.length
    objs.push(
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 ${font} 0 R >> >> /Contents ${contentRef} 0 R >>`,
    )
    kids.push(`${objs.length} 0 R`)
  }
  objs[1] = `<< /Type /Pages /Kids [${kids.join(' ')}] /Count ${kids.length} >>`
  let out = '%PDF-1.4\n'
  const offsets: number[] = []
  objs.forEach((o, i) => {
    offsets.push(Buffer.byteLength(out, 'latin1'))
    out += `${i + 1} 0 obj\n${o}\nendobj\n`
  })
  const xref = Buffer.byteLength(out, 'latin1')
  out += `xref\n0 ${objs.length + 1}\n0000000000 65535 f \n`
  out += offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')
  out += `trailer\n<< /Size ${objs.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`
  return Buffer.from(out, 'latin1')
}
