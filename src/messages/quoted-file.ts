/**
 * How a message quotes a whole file it named by id (chat/file-inputs.ts builds the quote): a text part that opens with
 * `The file "<name as JSON>" (<id>), quoted:` and a line break. The header is the one sign of a quote, in a request
 * and in a turn read back from the store alike: the retrieval query leaves a quoted file out (text.ts `userText`), and
 * a file the prompt quotes is not retrieved again in pieces (chat/planner.ts).
 */
import type { ChatMessage, ContentPart } from '../types.js'

const HEADER = /^The file ("(?:[^"\\]|\\.)*") \((file-[\w-]+)\), quoted:\n/

/** The quote's first line, with its line break. */
export function quoteHeader(id: string, filename: string): string {
  return `The file ${JSON.stringify(filename)} (${id}), quoted:\n`
}

/** The id of the file `text` quotes, or undefined when it is not a quote. */
export function quotedFileId(text: string): string | undefined {
  return text.startsWith('The file "') ? HEADER.exec(text)?.[2] : undefined
}

/** The file `text` quotes, with the name it had when quoted (what a conversation's item listing shows). */
export function quotedFile(text: string): { id: string; filename: string } | undefined {
  const m = text.startsWith('The file "') ? HEADER.exec(text) : null
  return m === null ? undefined : { id: m[2] as string, filename: JSON.parse(m[1] as string) as string }
}

/** Whether a content part is a quoted file. */
export function isQuote(p: ContentPart): boolean {
  return p.type === 'text' && typeof p.text === 'string' && quotedFileId(p.text) !== undefined
}

/** The files the user messages among `messages` quote. */
export function quotedFileIds(messages: readonly ChatMessage[]): Set<string> {
  const ids = new Set<string>()
  const add = (text: unknown): void => {
    const id = typeof text === 'string' ? quotedFileId(text) : undefined
    if (id !== undefined) ids.add(id)
  }
  for (const m of messages) {
    if (m.role !== 'user') continue
    // A message of one quote is a string (the Responses bridge makes one text part a string).
    if (typeof m.content === 'string') add(m.content)
    else if (Array.isArray(m.content)) for (const p of m.content as readonly ContentPart[]) if (p.type === 'text') add(p.text)
  }
  return ids
}
