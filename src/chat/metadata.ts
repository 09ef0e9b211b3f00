/** The `_metadata` object: all three groups always present; values known before the upstream call. */
import type { Tokens } from '../types.js'
import type { NotRetrieved } from '../knowledge/relevance.js'

export interface RagSource {
  file_id: string
  filename: string
  metadata: Record<string, unknown> | null
  chunk_index: number
  score: number
  /** Share of the query's information the chunk holds, 0–1: what the relevance gate let it in on (knowledge/relevance.ts). */
  relevance: number
  /** Only the chunk's best-matching sentences went in, not the whole chunk (RAG_FOCUS_NEIGHBOURS). */
  focused?: true
}

export interface Metadata {
  memory: {
    sessionId: string | null
    /** Stored messages sent (the kept history, and the tool call a request's tool results answer). */
    historyMessages: number
    recalledMessages: number
    /** Leading request messages recognised as the session's own (a client resending its history): not saved again. */
    recognizedMessages: number
  }
  rag: {
    enabled: boolean
    resultsFound: number
    query: string | null
    sources: RagSource[]
    /** Why no chunk reached the prompt; null when some did. */
    reason: NotRetrieved | null
    /** The best chunk's relevance (share of the query it holds, 0–1); null when nothing was searched or found. */
    bestRelevance: number | null
  }
  context: {
    totalTokens: Tokens
    /** Messages sent upstream besides the retrieved-context and recall blocks: request messages + history included. */
    includedMessages: number
    includedChunks: number
    truncated: boolean
    /** The window the packer used (after the vendor margin and learned correction) and the reply reserve. */
    window: Tokens
    reserved: Tokens
    /** Tokens at the start of this prompt that are the same as the previous request of the session, as packed. */
    stablePrefixTokens: Tokens
  }
}
