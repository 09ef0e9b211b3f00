/**
 * What a message says, as text: for the retrieval and recall queries, for indexing saved turns, and for rendering
 * recalled turns as quoted lines. Text parts are joined; a refusal reads as its text; tool calls read as
 * `name(arguments)`; media parts leave a short marker so a recalled turn still shows that something was attached.
 */
import { isArray, type ChatMessage, type ContentPart } from '../types.js'
import { isQuote, quotedFileId } from './quoted-file.js'

export function contentText(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  let out = ''
  for (const p of content as readonly ContentPart[]) {
    const piece = partText(p)
    if (piece === '') continue
    out += out === '' ? piece : `\n${piece}`
  }
  return out
}

function partText(p: ContentPart): string {
  switch (p.type) {
    case 'text':
      return typeof p.text === 'string' ? p.text : ''
    case 'refusal':
      return typeof p.refusal === 'string' ? p.refusal : ''
    case 'image_url':
      return '[image]'
    case 'input_audio':
      return '[audio]'
    case 'file': {
      const f = p.file as { filename?: unknown } | undefined
      return typeof f?.filename === 'string' ? `[file ${f.filename}]` : '[file]'
    }
    default:
      return ''
  }
}

/** The text of a message: its content, a refusal, and the calls it makes. */
export function messageText(m: ChatMessage): string {
  let out = contentText(m.content)
  if (typeof m.refusal === 'string' && m.refusal !== '') out = out === '' ? m.refusal : `${out}\n${m.refusal}`
  if (isArray(m.tool_calls)) {
    for (const c of m.tool_calls) {
      const call = c.function ? `${c.function.name}(${c.function.arguments})` : `${c.type} call`
      out = out === '' ? call : `${out}\n${call}`
    }
  }
  return out
}

/**
 * Only user text: what a user typed (text parts), for the retrieval query. Empty when it has none. The markers media
 * parts leave in `contentText` are not part of the question: "[image]" searched for the word "image", which no file
 * answers, and diluted the relevance of the chunk the question's own words found.
 */
export function userText(m: ChatMessage): string {
  if (m.role !== 'user') return ''
  const c = m.content
  // A file the message quotes (quoted-file.ts) is not part of the question.
  if (typeof c === 'string') return quotedFileId(c) === undefined ? c.trim() : ''
  if (!Array.isArray(c)) return ''
  let out = ''
  for (const p of c as readonly ContentPart[]) {
    if (p.type !== 'text' || typeof p.text !== 'string' || p.text === '' || isQuote(p)) continue
    out = out === '' ? p.text : `${out}\n${p.text}`
  }
  return out.trim()
}
