/**
 * PDF → text from its text layer, with pdfjs-dist (Mozilla's PDF.js, the legacy build meant for Node). No OCR: a
 * scanned PDF without a text layer has no extractable text (400 `empty_file`).
 *
 * Lines are rebuilt from the items' vertical positions; a vertical gap larger than 1.6 line heights, or a new page,
 * ends a paragraph. pdfjs is imported on first use, so a gateway that never sees a PDF never loads it.
 */
import { gatewayError } from '../errors.js'
import { DecodedBytesExceeded, pdfDecodedBytes } from './pdf-streams.js'
import { TextBuilder, type Block } from './text-builder.js'

/** Bounds on one file's extraction (EXTRACT_MAX_DECODED_BYTES, EXTRACT_MAX_TEXT_CHARS). */
export interface ExtractLimits {
  /** What a PDF's streams may decode to, in all (measured before pdfjs decodes them, see pdf-streams.ts). */
  maxDecodedBytes: number
  /** Characters of text one file may yield. */
  maxTextChars: number
}

export function textLimitExceeded(limit: number): Error {
  return gatewayError('extraction_limit_exceeded', {
    param: 'file',
    message: `The file's text is longer than EXTRACT_MAX_TEXT_CHARS (${limit} characters)`,
  })
}

type PdfJs = typeof import('pdfjs-dist/legacy/build/pdf.mjs')
let pdfjs: Promise<PdfJs> | undefined

/** Paragraph break when the gap between baselines exceeds this many line heights. */
const PARAGRAPH_GAP = 1.6

export async function extractPdf(bytes: Buffer, limits: ExtractLimits): Promise<{ text: string; blocks: Block[] }> {
  try {
    await pdfDecodedBytes(bytes, limits.maxDecodedBytes)
  } catch (err) {
    if (!(err instanceof DecodedBytesExceeded)) throw err
    throw gatewayError('extraction_limit_exceeded', {
      param: 'file',
      message: `The PDF's compressed streams decode to more than EXTRACT_MAX_DECODED_BYTES (${limits.maxDecodedBytes} bytes)`,
      cause: err,
    })
  }
  pdfjs ??= import('pdfjs-dist/legacy/build/pdf.mjs')
  const lib = await pdfjs
  // pdfjs takes ownership of (and may detach) the buffer it is given: hand it a copy.
  const task = lib.getDocument({
    data: new Uint8Array(bytes),
    // Text extraction only: no font loading, no eval, no network.
    disableFontFace: true,
    useSystemFonts: false,
    isEvalSupported: false,
    useWorkerFetch: false,
    stopAtErrors: false,
    verbosity: 0,
  })
  let doc: Awaited<typeof task.promise>
  try {
    doc = await task.promise
  } catch (err) {
    await task.destroy()
    const name = err instanceof Error ? err.name : ''
    throw gatewayError('invalid_parameter', {
      param: 'file',
      message: name === 'PasswordException' ? 'The PDF is encrypted with a password' : 'The file is not a readable PDF',
      cause: err,
    })
  }
  const out = new TextBuilder()
  let chars = 0
  try {
    for (let p = 1; p <= doc.numPages; p++) {
      const page = await doc.getPage(p)
      const content = await page.getTextContent()
      let para = ''
      let lastY: number | null = null
      let lastH = 0
      for (const item of content.items) {
        if (!('str' in item)) continue
        const y = item.transform[5] as number
        const h = item.height || Math.abs(item.transform[3] as number) || 10
        if (item.str === '') continue
        if (lastY !== null && Math.abs(y - lastY) > 0.5) {
          if (Math.abs(lastY - y) > PARAGRAPH_GAP * lastH) {
            out.paragraph(para)
            para = ''
          } else if (para && !/[\s-]$/.test(para)) para += ' '
        }
        para += item.str
        lastY = y
        lastH = h
      }
      out.paragraph(para.replace(/[ \t]+/g, ' '))
      page.cleanup()
      // Checked per page, so text-heavy pages past the limit are never all held at once.
      chars += para.length
      if (chars > limits.maxTextChars) throw textLimitExceeded(limits.maxTextChars)
    }
  } finally {
    await doc.destroy()
  }
  return out.build()
}
