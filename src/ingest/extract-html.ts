/**
 * HTML → text blocks with htmlparser2 (streaming tokenizer, tolerant of broken markup, decodes entities).
 * Only visible text is kept: script, style, template, head metadata, embedded objects and `hidden` elements are
 * dropped. Block-level elements end paragraphs; h1–h6 become headings; table rows become one line each with cells
 * separated by " | "; <pre> keeps its line breaks.
 */
import { Parser } from 'htmlparser2'
import { gatewayError } from '../errors.js'
import { TextBuilder, type Block } from './text-builder.js'

const SKIP = new Set([
  'script', 'style', 'noscript', 'template', 'head', 'svg', 'math', 'canvas', 'iframe', 'object', 'embed', 'select',
  'button', 'map', 'audio', 'video',
])
const BLOCK = new Set([
  'p', 'div', 'section', 'article', 'main', 'header', 'footer', 'nav', 'aside', 'li', 'ul', 'ol', 'dl', 'dt', 'dd',
  'table', 'thead', 'tbody', 'tfoot', 'tr', 'caption', 'blockquote', 'pre', 'figure', 'figcaption', 'hr', 'form',
  'fieldset', 'legend', 'details', 'summary', 'address', 'body', 'html',
])
const HEADING = /^h([1-6])$/

/**
 * Deepest element nesting read. htmlparser2 keeps its open elements in an array it `unshift`s on every open tag and
 * searches on every close tag, so each tag costs the depth: 80,000 nested <div>s took 6 s, and the cost grows with
 * the square of the depth. Browsers stop nesting at 512 too (Chromium's parser attaches deeper elements to the 512th).
 */
export const MAX_HTML_DEPTH = 512

export function extractHtml(html: string): { text: string; blocks: Block[] } {
  const out = new TextBuilder()
  // One entry per open element: whether text inside it is hidden.
  const hidden: boolean[] = []
  let buf = ''
  // Whether `buf` holds anything but white space, kept as it grows: trimming it at every cell was quadratic on a long
  // row (200 KB of <td>: 2.6 s).
  let bufText = false
  let pre = 0
  let heading: { level: number; text: string } | null = null
  let title: string | null = null
  let inTitle = false

  const flush = (): void => {
    // Not /^\n+|\s+$/g for <pre>: /\s+$/ tries every position of a run of white space to its end (quadratic).
    const t = pre > 0 ? withoutLeadingNewlines(buf).trimEnd() : buf.replace(/\s+/g, ' ').trim()
    if (t) out.paragraph(t)
    buf = ''
    bufText = false
  }

  const parser = new Parser(
    {
      onopentag(name, attribs) {
        const parentHidden = hidden.at(-1) ?? false
        // <title> lives in <head>, which is otherwise skipped.
        if (name === 'title') inTitle = true
        if (hidden.length >= MAX_HTML_DEPTH)
          throw gatewayError('invalid_parameter', {
            param: 'file',
            message: `The HTML nests elements more than ${MAX_HTML_DEPTH} deep; upload it as plain text (.txt) instead`,
          })
        hidden.push(parentHidden || SKIP.has(name) || 'hidden' in attribs || attribs['aria-hidden'] === 'true')
        if (hidden.at(-1)) return
        const h = HEADING.exec(name)
        if (h) {
          flush()
          heading = { level: Number(h[1]), text: '' }
        } else if (BLOCK.has(name)) {
          flush()
          if (name === 'pre') pre++
        } else if (name === 'br') {
          if (heading) heading.text += ' '
          else buf += '\n'
        } else if ((name === 'td' || name === 'th') && bufText) {
          buf += ' | '
        }
      },
      ontext(data) {
        if (inTitle) {
          title = (title ?? '') + data
          return
        }
        if (hidden.at(-1)) return
        if (heading) heading.text += data
        else {
          buf += data
          if (!bufText && data.trim() !== '') bufText = true
        }
      },
      onclosetag(name) {
        if (name === 'title') inTitle = false
        const wasHidden = hidden.pop() ?? false
        if (wasHidden) return
        if (HEADING.test(name) && heading) {
          out.heading(heading.level, heading.text)
          heading = null
        } else if (BLOCK.has(name)) {
          flush()
          if (name === 'pre') pre = Math.max(0, pre - 1)
        }
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  )
  parser.write(html)
  parser.end()
  if (heading !== null) out.heading((heading as { level: number }).level, (heading as { text: string }).text)
  flush()
  const built = out.build()
  const t = (title as string | null)?.replace(/\s+/g, ' ').trim()
  // The page title heads everything so its words reach every chunk's heading path, unless the page repeats it as h1.
  if (!t || (built.blocks[0]?.kind === 'heading' && built.blocks[0].title === t)) return built
  const withTitle = new TextBuilder()
  withTitle.heading(1, t)
  const shift = built.text ? t.length + 2 : t.length
  const blocks = [
    ...withTitle.blocks,
    ...built.blocks.map((b) => ({ ...b, level: b.kind === 'heading' ? Math.min(6, b.level + 1) : 0, start: b.start + shift, end: b.end + shift })),
  ]
  return { text: built.text ? `${t}\n\n${built.text}` : t, blocks }
}

function withoutLeadingNewlines(s: string): string {
  let i = 0
  while (s.charCodeAt(i) === 10) i++
  return s.slice(i)
}
