/**
 * `input_file` parts that name one of the caller's files by `file_id` become `input_text` parts with the file's text,
 * as chat/file-inputs.ts does for Chat's file parts (why, and how the text is framed, there). For a response, only the
 * messages sent upstream and kept for a chain change: the stored `input` (what `input_items` lists) keeps the part as
 * it was sent. Items added to a conversation are its session's messages, so they keep the text (and list as the file).
 */
import type { FileQuoter } from '../chat/file-inputs.js'
import { isObject } from '../types.js'
import type { ItemPart, ResponseItem } from './item-types.js'

function namedFile(part: unknown): string | undefined {
  return isObject(part) && part.type === 'input_file' && typeof part.file_id === 'string' ? part.file_id : undefined
}

function hasNamedFile(item: ResponseItem): boolean {
  return item.type === 'message' && Array.isArray(item.content) && item.content.some((p) => namedFile(p) !== undefined)
}

/** Whether any input message names a file by id (a scan: most requests have none and pay no await). */
export function namesInputFiles(input: readonly ResponseItem[]): boolean {
  return input.some(hasNamedFile)
}

/**
 * `input` with its named files' text in place, bounded by `quoter`'s window; `param` names the array in errors
 * (`input` of a response, `items` of a conversation).
 */
export async function resolveInputFiles(input: ResponseItem[], quoter: FileQuoter, param: string): Promise<ResponseItem[]> {
  const out: ResponseItem[] = []
  for (const [i, item] of input.entries()) {
    if (!hasNamedFile(item)) {
      out.push(item)
      continue
    }
    const content: ItemPart[] = []
    for (const [j, p] of (item.content as readonly ItemPart[]).entries()) {
      const id = namedFile(p)
      if (id === undefined) content.push(p)
      else {
        content.push({ type: 'input_text', text: (await quoter.part(id, `${param}[${i}].content[${j}].file_id`)).text })
      }
    }
    out.push({ ...item, content })
  }
  return out
}
