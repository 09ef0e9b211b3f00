/**
 * Uploaded bytes → plain text with its structure (headings and paragraphs as character ranges), for the chunker.
 *
 * Formats: text, Markdown, HTML, JSON, CSV (and TSV), PDF. The format comes from the content type when that names
 * one of them specifically, else from the file extension, else (no extension, no useful type) from the bytes: a
 * `%PDF-` header, or text that decodes cleanly. Anything else is refused as `unsupported_media_type` (415); a file
 * with no extractable text as `empty_file` (400).
 *
 * For text and Markdown the extracted text is the file's own text (BOM removed, line endings normalised to \n), so
 * chunk offsets point into what the user uploaded. The other formats produce a rendering: blocks joined by blank lines.
 */
import { gatewayError } from '../errors.js'
import { extractCsv, extractJson } from './extract-data.js'
import { extractHtml } from './extract-html.js'
import { extractPdf, textLimitExceeded, type ExtractLimits } from './extract-pdf.js'

export type { ExtractLimits } from './extract-pdf.js'

/** Defaults when the caller names no limits (tools, tests): the configuration's defaults. */
export const DEFAULT_EXTRACT_LIMITS: ExtractLimits = { maxDecodedBytes: 128 * 1024 * 1024, maxTextChars: 32 * 1024 * 1024 }
import { boundTitle, type Block } from './text-builder.js'

export type { Block } from './text-builder.js'

export type Format = 'text' | 'markdown' | 'html' | 'json' | 'csv' | 'pdf'

export interface ExtractedText {
  format: Format
  text: string
  blocks: Block[]
}

export interface UploadedFile {
  filename: string
  contentType: string | undefined
  bytes: Buffer
}

const BY_EXTENSION: Record<string, Format> = {
  txt: 'text',
  text: 'text',
  log: 'text',
  md: 'markdown',
  markdown: 'markdown',
  mdown: 'markdown',
  mkd: 'markdown',
  html: 'html',
  htm: 'html',
  xhtml: 'html',
  json: 'json',
  csv: 'csv',
  tsv: 'csv',
  pdf: 'pdf',
}

const BY_TYPE: Record<string, Format> = {
  'text/plain': 'text',
  'text/markdown': 'markdown',
  'text/x-markdown': 'markdown',
  'text/html': 'html',
  'application/xhtml+xml': 'html',
  'application/json': 'json',
  'text/json': 'json',
  'text/csv': 'csv',
  'application/csv': 'csv',
  'text/tab-separated-values': 'csv',
  'application/pdf': 'pdf',
}

/** Types that say nothing about the content: the extension decides. */
const GENERIC_TYPES = new Set(['application/octet-stream', 'binary/octet-stream', 'application/x-www-form-urlencoded'])

/** The format a content type names, if it names one we read (parameters such as charset ignored). */
export function formatOfType(contentType: string | undefined): Format | undefined {
  return BY_TYPE[baseType(contentType)]
}

function baseType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? ''
}

export function detectFormat(file: UploadedFile): Format {
  const type = baseType(file.contentType)
  const dot = file.filename.lastIndexOf('.')
  const ext = dot > 0 ? file.filename.slice(dot + 1).toLowerCase() : ''
  const byType = BY_TYPE[type]
  const byExt = BY_EXTENSION[ext]
  // text/plain is what many clients send for any text file, so a known extension is more specific than it.
  if (byType !== undefined && byType !== 'text') return byType
  if (byExt !== undefined) return byExt
  if (byType === 'text') return 'text'
  const typeSaysNothing = type === '' || GENERIC_TYPES.has(type)
  if (typeSaysNothing && ext === '') {
    if (file.bytes.subarray(0, 5).toString('latin1') === '%PDF-') return 'pdf'
    if (looksLikeText(file.bytes)) return 'text'
  }
  throw gatewayError('unsupported_media_type', {
    param: 'file',
    message:
      `Unsupported file type (${type || 'no content type'}${ext ? `, .${ext}` : ''}): ` +
      'upload text, Markdown, HTML, JSON, CSV or PDF',
  })
}

export async function extract(file: UploadedFile, limits: ExtractLimits = DEFAULT_EXTRACT_LIMITS): Promise<ExtractedText> {
  const format = detectFormat(file)
  let out: { text: string; blocks: Block[] }
  if (format === 'pdf') {
    out = await extractPdf(file.bytes, limits)
  } else {
    const text = decodeText(file.bytes)
    if (format === 'text') out = { text, blocks: paragraphs(text) }
    else if (format === 'markdown') out = { text, blocks: markdownBlocks(text) }
    else if (format === 'html') out = extractHtml(text)
    else if (format === 'json') out = extractJson(text) ?? { text, blocks: paragraphs(text) }
    else out = extractCsv(text, file.filename.toLowerCase().endsWith('.tsv') || /tab-separated/i.test(file.contentType ?? ''))
  }
  if (out.text.length > limits.maxTextChars) throw textLimitExceeded(limits.maxTextChars)
  if (!/[\p{L}\p{N}]/u.test(out.text)) throw gatewayError('empty_file', { param: 'file', message: `${file.filename} has no extractable text` })
  return { format, ...out }
}

/** UTF-8 (BOM stripped) or UTF-16 with a BOM; text that is not valid UTF-8 is read as Windows-1252, not refused. */
export function decodeText(bytes: Buffer): string {
  let text: string
  if (bytes[0] === 0xff && bytes[1] === 0xfe) text = new TextDecoder('utf-16le').decode(bytes.subarray(2))
  else if (bytes[0] === 0xfe && bytes[1] === 0xff) text = new TextDecoder('utf-16be').decode(bytes.subarray(2))
  else {
    if (bytes.subarray(0, 8192).includes(0))
      throw gatewayError('unsupported_media_type', { param: 'file', message: 'The file is binary, not text' })
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes)
    } catch {
      text = new TextDecoder('windows-1252').decode(bytes)
    }
  }
  return text.replace(/\r\n?/g, '\n')
}

function looksLikeText(bytes: Buffer): boolean {
  const head = bytes.subarray(0, 8192)
  if (head.includes(0)) return false
  try {
    // A multi-byte character cut at the 8 KiB boundary is fine; anything else invalid means binary.
    new TextDecoder('utf-8', { fatal: true }).decode(head.length < bytes.length ? head.subarray(0, head.length - 4) : head)
    return true
  } catch {
    return false
  }
}

/** Paragraphs separated by blank lines, trimmed; no headings. */
export function paragraphs(text: string, from = 0, to = text.length): Block[] {
  const blocks: Block[] = []
  const re = /\n[ \t]*\n/g
  re.lastIndex = from
  let start = from
  for (;;) {
    const m = re.exec(text)
    const end = m === null || m.index >= to ? to : m.index
    pushTrimmed(blocks, text, start, end)
    if (m === null || m.index >= to) break
    start = m.index + m[0].length
    re.lastIndex = start
  }
  return blocks
}

function pushTrimmed(blocks: Block[], text: string, start: number, end: number): void {
  while (start < end && /\s/.test(text[start] as string)) start++
  while (end > start && /\s/.test(text[end - 1] as string)) end--
  if (end > start) blocks.push({ kind: 'paragraph', level: 0, title: '', start, end })
}

const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/
const FENCE = /^ {0,3}(`{3,}|~{3,})/

/**
 * Markdown → heading and paragraph blocks over the original text: ATX and setext headings, blank-line paragraphs,
 * fenced code kept whole (a `#` inside a fence is not a heading).
 */
export function markdownBlocks(text: string): Block[] {
  const blocks: Block[] = []
  let paraStart = -1
  let paraEnd = -1
  let paraLines = 0
  let fence: string | null = null
  const flush = (): void => {
    if (paraStart >= 0) pushTrimmed(blocks, text, paraStart, paraEnd)
    paraStart = -1
    paraLines = 0
  }
  let pos = 0
  while (pos <= text.length) {
    const nl = text.indexOf('\n', pos)
    const end = nl === -1 ? text.length : nl
    const line = text.slice(pos, end)
    if (fence !== null) {
      paraEnd = end
      if (line.trimStart().startsWith(fence)) fence = null
    } else if (FENCE.test(line)) {
      if (paraStart < 0) paraStart = pos
      fence = (FENCE.exec(line)?.[1] ?? '```').slice(0, 3)
      paraEnd = end
      paraLines = 2
    } else if (line.trim() === '') {
      flush()
    } else {
      const atx = atxHeading(line)
      const setext = paraLines === 1 ? SETEXT.exec(line) : null
      if (atx) {
        flush()
        blocks.push({ kind: 'heading', level: atx.level, title: atx.title, start: pos, end })
      } else if (setext && paraStart >= 0) {
        const title = text.slice(paraStart, paraEnd).trim()
        blocks.push({ kind: 'heading', level: (setext[1] as string)[0] === '=' ? 1 : 2, title, start: paraStart, end })
        paraStart = -1
        paraLines = 0
      } else {
        if (paraStart < 0) paraStart = pos
        paraEnd = end
        paraLines++
      }
    }
    if (nl === -1) break
    pos = nl + 1
  }
  flush()
  return blocks.map((b) => (b.kind === 'heading' ? { ...b, title: boundTitle(stripInlineMarkdown(b.title)) } : b))
}

/**
 * An ATX heading line (`## Title ##`): up to three spaces, 1–6 `#`, then the end or a space or tab; the title without
 * an optional closing run of `#` and the white space around it. Written out because the regex it replaces,
 * /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/, is quadratic on a long line of spaces (50 KB: 11 s). Same
 * answers (a property test holds it to the regex), including its refusal of lines with U+2028/U+2029 (`.` does not
 * match them; \r and \n never reach here).
 */
export function atxHeading(line: string): { level: number; title: string } | undefined {
  let p = 0
  while (p < 3 && line.charCodeAt(p) === 32) p++
  let level = 0
  while (line.charCodeAt(p + level) === 35 /* # */) level++
  if (level < 1 || level > 6) return undefined
  p += level
  if (p === line.length) return { level, title: '' }
  if (!isBlank(line.charCodeAt(p))) return undefined
  if (/[\n\r\u2028\u2029]/.test(line)) return undefined
  while (p < line.length && isBlank(line.charCodeAt(p))) p++
  let end = line.length
  while (end > p && isBlank(line.charCodeAt(end - 1))) end--
  let hashes = end
  while (hashes > p && line.charCodeAt(hashes - 1) === 35) hashes--
  let before = hashes
  while (before > p && isBlank(line.charCodeAt(before - 1))) before--
  if (hashes < end && before < hashes) end = before
  return { level, title: line.slice(p, end).trim() }
}

const isBlank = (c: number): boolean => c === 32 || c === 9

/**
 * Heading text without inline markup: links and images become their text, emphasis and code marks go. A scan, not
 * /!?\[([^\]]*)\]\([^)]*\)/g, which rescans the rest of the line from every `[` (quadratic on `[[[[…`).
 */
export function stripInlineMarkdown(s: string): string {
  let out = ''
  let i = 0
  // Where the next `[`/`](`/`)` can be found; -1 once there is none, so no search runs twice over the same text.
  let nextClose = 0
  let nextParen = 0
  while (i < s.length) {
    const c = s.charCodeAt(i)
    const open = c === 91 /* [ */ ? i : c === 33 /* ! */ && s.charCodeAt(i + 1) === 91 ? i + 1 : -1
    if (open !== -1 && nextClose !== -1) {
      if (nextClose <= open) nextClose = s.indexOf(']', open + 1)
      if (nextClose !== -1 && s.charCodeAt(nextClose + 1) === 40 /* ( */) {
        if (nextParen !== -1 && nextParen <= nextClose + 1) nextParen = s.indexOf(')', nextClose + 2)
        if (nextParen !== -1) {
          out += s.slice(open + 1, nextClose)
          i = nextParen + 1
          continue
        }
      }
    }
    out += s[i]
    i++
  }
  return out.replace(/[*_`~]+/g, '').trim()
}
