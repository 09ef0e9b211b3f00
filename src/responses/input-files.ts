/**
 * `input_file` parts that name one of the caller's files by `file_id` become `input_text` parts with the file's text,
 * as chat/file-inputs.ts does for Chat's file parts (why, and how the text is framed, there). Only the messages sent
 * upstream and kept for a chain change: the stored `input` (what `input_items` lists) keeps the part as it was sent.
 */
import type { Cancel } from '../retrieval/embedder.js'
import type { NamedFiles } from '../chat/handler.js'
import { FileQuoter } from '../chat/file-inputs.js'
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

/** `input` with its named files' text in place. */
export async function resolveInputFiles(
  input: ResponseItem[],
  files: NamedFiles,
  tenant: string,
  model: string,
  authorization: string,
  cancel: Cancel,
): Promise<ResponseItem[]> {
  const quoter = new FileQuoter(files.texts, tenant, await files.window(model, authorization, cancel))
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
        content.push({ type: 'input_text', text: (await quoter.part(id, `input[${i}].content[${j}].file_id`)).text })
      }
    }
    out.push({ ...item, content })
  }
  return out
}
