/**
 * How much a PDF's streams decode to, measured before pdfjs reads it: pdfjs inflates every content stream it needs
 * whole, into ArrayBuffers that no worker `resourceLimits` bound (they live outside the V8 heap), so a 1 MB PDF whose
 * content stream inflates to 1 GiB took the process to 2.36 GB (issue 29). Here each stream is inflated as a stream,
 * chunk by chunk, counting and discarding, so the measurement itself holds ≈ 64 KiB whatever the ratio, and stops as
 * soon as the total passes the budget.
 *
 * What is measured: every `stream … endstream` whose filters are FlateDecode only (one or chained: a chain's every
 * stage counts); its extent from a direct or resolvable `/Length`, else up to `endstream`. A stream whose filters mix
 * FlateDecode or LZWDecode with others (ASCII85 + Flate, in old PDFs) cannot be measured without decoding those
 * filters too: it counts as its raw size times 1,032 (deflate's largest ratio), so a small one passes and a large one
 * is refused. Streams with no expanding filter (none, DCT, JPX, CCITT, ASCIIHex, ASCII85, RunLength) count their raw
 * size.
 */
import { createInflate, constants } from 'node:zlib'

/** Deflate's largest expansion ratio. */
const MAX_DEFLATE_RATIO = 1032

export class DecodedBytesExceeded extends Error {
  constructor(readonly limit: number) {
    super(`The PDF's streams decode to more than ${limit} bytes`)
    this.name = 'DecodedBytesExceeded'
  }
}

/** The decoded size of the PDF's streams; throws DecodedBytesExceeded as soon as it passes `limit`. */
export async function pdfDecodedBytes(pdf: Buffer, limit: number): Promise<number> {
  let total = 0
  const add = (n: number): void => {
    total += n
    if (total > limit) throw new DecodedBytesExceeded(limit)
  }
  for (const s of streams(pdf)) {
    const filters = s.filters
    const data = pdf.subarray(s.start, s.end)
    if (filters.length > 0 && filters.every((f) => f === 'FlateDecode' || f === 'Fl')) await inflateCounting(data, filters.length, add)
    else if (filters.some((f) => f === 'FlateDecode' || f === 'Fl' || f === 'LZWDecode' || f === 'LZW')) add(data.length * MAX_DEFLATE_RATIO)
    else add(data.length)
  }
  return total
}

interface StreamSpan {
  start: number
  end: number
  filters: string[]
}

/** Every stream's data span and filters, in file order. */
function* streams(pdf: Buffer): Iterable<StreamSpan> {
  let from = 0
  for (;;) {
    const kw = pdf.indexOf('stream', from, 'latin1')
    if (kw === -1) return
    from = kw + 6
    // `endstream`, or a word that merely ends in "stream": not a stream's start.
    if (kw >= 3 && pdf.toString('latin1', kw - 3, kw) === 'end') continue
    if (kw > 0 && /[A-Za-z]/.test(String.fromCharCode(pdf[kw - 1] ?? 0))) continue
    let start = kw + 6
    if (pdf[start] === 0x0d) start++
    if (pdf[start] === 0x0a) start++
    const dict = dictionaryBefore(pdf, kw)
    if (dict === undefined) continue
    const length = lengthOf(pdf, dict)
    let end = length !== undefined && start + length <= pdf.length ? start + length : pdf.indexOf('endstream', start, 'latin1')
    if (end === -1) end = pdf.length
    from = Math.max(from, end)
    yield { start, end, filters: filtersOf(dict) }
  }
}

/** The text of the dictionary that ends right before `stream` (`<< … >>`, nesting counted). */
function dictionaryBefore(pdf: Buffer, kw: number): string | undefined {
  let i = kw - 1
  while (i >= 0 && (pdf[i] === 0x20 || pdf[i] === 0x0a || pdf[i] === 0x0d || pdf[i] === 0x09)) i--
  if (i < 1 || pdf[i] !== 0x3e || pdf[i - 1] !== 0x3e) return undefined
  let depth = 0
  // Dictionaries are small; 64 KiB back is far more than any real one.
  for (let j = i; j > 0 && j > i - 65536; j--) {
    if (pdf[j] === 0x3e && pdf[j - 1] === 0x3e) {
      depth++
      j--
    } else if (pdf[j] === 0x3c && pdf[j - 1] === 0x3c) {
      depth--
      j--
      if (depth === 0) return pdf.toString('latin1', j, i + 1)
    }
  }
  return undefined
}

function filtersOf(dict: string): string[] {
  const m = /\/Filter\s*(\[([^\]]*)\]|\/[A-Za-z0-9]+)/.exec(dict)
  if (m === null) return []
  const list = m[2] ?? m[1] ?? ''
  return [...list.matchAll(/\/([A-Za-z0-9]+)/g)].map((x) => x[1] as string)
}

/** A direct `/Length n`, or `/Length n g R` resolved to its object's integer; undefined when neither. */
function lengthOf(pdf: Buffer, dict: string): number | undefined {
  const direct = /\/Length\s+(\d+)(?!\s+\d+\s+R)/.exec(dict)
  if (direct !== null) return Number(direct[1])
  const ref = /\/Length\s+(\d+)\s+(\d+)\s+R/.exec(dict)
  if (ref === null) return undefined
  const at = pdf.indexOf(`\n${ref[1]} ${ref[2]} obj`, 0, 'latin1')
  if (at === -1) return undefined
  const m = /^\s*\d+\s+\d+\s+obj\s+(\d+)/.exec(pdf.toString('latin1', at, at + 64))
  return m === null ? undefined : Number(m[1])
}

/** Inflate `data` through `layers` chained inflaters, telling `add` every byte each stage puts out. */
async function inflateCounting(data: Buffer, layers: number, add: (n: number) => void): Promise<void> {
  const stages = Array.from({ length: layers }, () =>
    // A truncated or damaged stream is read as far as it goes, as pdfjs does.
    createInflate({ finishFlush: constants.Z_SYNC_FLUSH, chunkSize: 64 * 1024 }),
  )
  await new Promise<void>((resolve, reject) => {
    let failed = false
    const fail = (err: unknown): void => {
      if (failed) return
      failed = true
      for (const s of stages) s.destroy()
      reject(err)
    }
    stages.forEach((stage, i) => {
      const next = stages[i + 1]
      stage.on('data', (chunk: Buffer) => {
        try {
          add(chunk.length)
        } catch (err) {
          fail(err)
          return
        }
        if (next !== undefined && !next.write(chunk)) {
          stage.pause()
          next.once('drain', () => stage.resume())
        }
      })
      // Corrupt data ends the stream where pdfjs would stop too: what was counted so far stands.
      stage.on('error', () => {
        if (next !== undefined) next.end()
        else if (!failed) resolve()
      })
      stage.on('end', () => (next !== undefined ? next.end() : failed ? undefined : resolve()))
    })
    stages[0]?.end(data)
  })
}
