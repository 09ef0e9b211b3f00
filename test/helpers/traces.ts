/** A whole request trace for store tests: a plain relay's defaults, with what the test sets. */
import type { RequestTrace } from '../../src/storage/interface.js'

export function wholeTrace(fields: Pick<RequestTrace, 'id' | 'createdAt'> & Partial<RequestTrace>): RequestTrace {
  return {
    route: '/api/v1/chat/completions',
    model: 'openai/gpt-4o',
    stream: false,
    status: 200,
    durationMs: 12,
    promptTokens: 10,
    completionTokens: 2,
    cachedTokens: null,
    error: null,
    messagesJson: '[]',
    messageTokens: [],
    parts: { system: 0, history: 0, recall: 0, excerpts: 0 },
    sources: [],
    recalledMessages: 0,
    leftOut: { historyMessages: 0, chunks: 0, retrievalReason: 'disabled' },
    totalTokens: 10,
    window: 128_000,
    sessionId: null,
    ...fields,
  }
}
