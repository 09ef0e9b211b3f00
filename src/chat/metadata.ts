/** The `_metadata` object: all three groups always present; values known before the upstream call. */
import type { Tokens } from '../types.js'
import type { NotRetrieved } from '../knowledge/relevance.js'
import { jsonNumber, jsonString } from '../json-text.js'

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

/**
 * `JSON.stringify(m)` for a `Metadata` built in the field order above (both planner paths build it so), written out
 * field by field: the text every response carries. Why: JSON.stringify walks the three objects' maps in C++ and paid
 * ≈ 1.3 µs a call hot, 7.6 µs on a request's cold path, against 0.3 and 3.4 µs here (Node 20, this machine); under
 * load it was 2.4 % of a plain relayed request's CPU (`perf`, docs/benchmarks.md "Tenth round"). Strings and numbers
 * go through json-text.ts (JSON.stringify's text, without the call where none is needed), the sources array through
 * JSON.stringify unless empty. A field added to the type must be added here: test/metadata-json.test.ts compares the two
 * on objects with every optional field.
 */
export function metadataJson(m: Metadata): string {
  const a = m.memory
  const r = m.rag
  const c = m.context
  return (
    `{"memory":{"sessionId":${str(a.sessionId)},"historyMessages":${num(a.historyMessages)},"recalledMessages":${num(a.recalledMessages)},` +
    `"recognizedMessages":${num(a.recognizedMessages)}},"rag":{"enabled":${r.enabled ? 'true' : 'false'},"resultsFound":${num(r.resultsFound)},` +
    `"query":${str(r.query)},"sources":${r.sources.length === 0 ? '[]' : JSON.stringify(r.sources)},"reason":${str(r.reason)},` +
    `"bestRelevance":${num(r.bestRelevance)}},"context":{"totalTokens":${num(c.totalTokens)},"includedMessages":${num(c.includedMessages)},` +
    `"includedChunks":${num(c.includedChunks)},"truncated":${c.truncated ? 'true' : 'false'},"window":${num(c.window)},` +
    `"reserved":${num(c.reserved)},"stablePrefixTokens":${num(c.stablePrefixTokens)}}}`
  )
}

function str(s: string | null): string {
  return s === null ? 'null' : jsonString(s)
}

function num(n: number | null): string {
  return n === null ? 'null' : jsonNumber(n)
}
