/**
 * A message part that names one of the caller's uploaded files by id (Chat's `{type: "file", file: {file_id}}`, the
 * Responses API's `{type: "input_file", file_id}`) becomes a text part holding that file's extracted text. It is
 * OpenAI's flow: upload with `files.create`, then refer to the file in a message. The provider behind the gateway
 * cannot resolve it: OpenRouter has no Files API, and our ids are ours. Sent through as it came, the part reached a
 * provider that refused it or dropped it, and the model answered without the file.
 *
 * The text goes in fenced as quoted data (the knowledge base's excerpts are framed the same way, context/fence.ts), with
 * the file's name. An id that is not one of the caller's files is a 400 naming the part. A file too large to send
 * whole is a 400 before it is read (`maxTokens`, the model's window); searching it (`useRAG`, `file_search`) is the
 * way to use a large file. The resolved text is what the request's messages hold from here on: the session saves it
 * and a chained response replays it, so a later turn does not depend on the file still being there.
 */
import { gatewayError, invalidParam } from '../errors.js'
import { fenceFor } from '../context/fence.js'
import type { ChatMessage, ContentPart, Tokens } from '../types.js'
import { isObject } from '../types.js'
import { quoteHeader } from '../messages/quoted-file.js'

/** The caller's files as this module reads them (KnowledgeBase.fileText; `tokens` about what the text holds). */
export interface FileTexts {
  fileText(tenant: string, id: string, maxTokens: Tokens): Promise<{ filename: string; text: string; tokens: Tokens } | { tooLarge: Tokens } | undefined>
}

/** The id a Chat `file` part names, if any. */
function chatFileId(part: unknown): string | undefined {
  if (!isObject(part) || part.type !== 'file' || !isObject(part.file)) return undefined
  const id = part.file.file_id
  return typeof id === 'string' ? id : undefined
}

/** Whether any message has a file part naming a file by id (a scan, no allocation: most requests have none). */
export function namesFiles(messages: readonly ChatMessage[]): boolean {
  for (const m of messages) {
    if (!Array.isArray(m.content)) continue
    for (const p of m.content) if (chatFileId(p) !== undefined) return true
  }
  return false
}

/** The text part a named file becomes. */
export function fileTextPart(id: string, filename: string, text: string): ContentPart {
  const fence = fenceFor(text)
  return { type: 'text', text: `${quoteHeader(id, filename)}${fence}\n${text}\n${fence}` }
}

/**
 * One request's named files as text parts. What they hold is bounded by the model's window over all of them, each
 * naming counted (a request naming many files, or one file many times, is refused once they would not fit, before the
 * rest is read or counted); a file named twice is read once.
 */
export class FileQuoter {
  readonly #files: FileTexts
  readonly #tenant: string
  readonly #window: Tokens
  #room: Tokens
  readonly #read = new Map<string, { part: ContentPart; tokens: Tokens }>()

  constructor(files: FileTexts, tenant: string, window: Tokens) {
    this.#files = files
    this.#tenant = tenant
    this.#window = window
    this.#room = window
  }

  /** The file `id` as a text part, or the 400 naming `param`. */
  async part(id: string, param: string): Promise<ContentPart> {
    const known = this.#read.get(id)
    if (known !== undefined) {
      if (known.tokens > this.#room) throw this.#tooLarge(id, known.tokens, param)
      this.#room -= known.tokens
      return known.part
    }
    const found = await this.#files.fileText(this.#tenant, id, this.#room)
    if (found === undefined) {
      throw invalidParam(param, `No file with id '${id}' among your files: upload it with POST /v1/files first, or send its content as file_data`)
    }
    if ('tooLarge' in found) throw this.#tooLarge(id, found.tooLarge, param)
    this.#room -= found.tokens
    const part = fileTextPart(id, found.filename, found.text)
    this.#read.set(id, { part, tokens: found.tokens })
    return part
  }

  #tooLarge(id: string, tokens: Tokens, param: string): Error {
    const others = this.#window - this.#room
    return gatewayError('context_length_exceeded', {
      param,
      message:
        `The file '${id}' holds about ${tokens} tokens${others > 0 ? `, with the files named before it about ${others}` : ''}, ` +
        `more than the model's window of ${this.#window}: search it instead (useRAG, or the file_search tool)`,
    })
  }
}

/** `messages` with every Chat file part that names a file by id replaced by the file's text (namesFiles first). */
export async function resolveFileParts(
  messages: readonly ChatMessage[],
  files: FileTexts,
  tenant: string,
  maxTokens: Tokens,
): Promise<ChatMessage[]> {
  const out: ChatMessage[] = []
  const quoter = new FileQuoter(files, tenant, maxTokens)
  for (const [i, m] of messages.entries()) {
    if (!Array.isArray(m.content) || !m.content.some((p) => chatFileId(p) !== undefined)) {
      out.push(m)
      continue
    }
    const content: ContentPart[] = []
    for (const [j, p] of (m.content as readonly ContentPart[]).entries()) {
      const id = chatFileId(p)
      if (id === undefined) {
        content.push(p)
        continue
      }
      content.push(await quoter.part(id, `messages[${i}].content[${j}].file.file_id`))
    }
    out.push({ ...m, content })
  }
  return out
}
