/**
 * The `file_search` tool on the gateway: the caller's knowledge base, searched by the planner exactly as `useRAG`
 * searches it, reported as OpenAI reports a hosted search, a `file_search_call` output item placed before the reply.
 * Its `results` are filled only when `include` asks for `file_search_call.results`, as in OpenAI's API.
 */
import type { PreparedChat } from '../chat/handler.js'
import type { ResponseItem } from './items.js'

export function fileSearchItem(prepared: PreparedChat, include: readonly string[], newId: (prefix: string) => string): ResponseItem {
  const rag = prepared.metadata.rag
  const withResults = include.includes('file_search_call.results')
  return {
    id: newId('fs'),
    type: 'file_search_call',
    status: 'completed',
    queries: rag.query === null ? [] : [rag.query],
    results: withResults
      ? (prepared.excerpts ?? []).map((h) => ({
          file_id: h.file_id,
          filename: h.filename,
          score: h.score,
          text: h.text,
          attributes: h.metadata ?? {},
        }))
      : null,
  }
}
