/**
 * The stored trace of one finished request: the planner's draft (how the prompt was packed) with the request's own
 * facts. Fields are listed, not spread: the draft's `messages` objects stay behind, and what is kept of them is the
 * JSON that went upstream (`messagesJson`, a slice of the body already sent).
 */
import type { RequestTrace } from '../storage/interface.js'
import type { PromptTrace } from '../types.js'

export type RequestFacts = Pick<
  RequestTrace,
  'id' | 'createdAt' | 'route' | 'model' | 'stream' | 'status' | 'durationMs' | 'promptTokens' | 'completionTokens' | 'cachedTokens' | 'error'
>

export function requestTrace(draft: PromptTrace, facts: RequestFacts): RequestTrace {
  return {
    id: facts.id,
    createdAt: facts.createdAt,
    route: facts.route,
    model: facts.model,
    stream: facts.stream,
    status: facts.status,
    durationMs: facts.durationMs,
    promptTokens: facts.promptTokens,
    completionTokens: facts.completionTokens,
    cachedTokens: facts.cachedTokens,
    error: facts.error,
    // A request that failed before its body was made (a refused pack) has no JSON yet.
    messagesJson: draft.messagesJson ?? JSON.stringify(draft.messages),
    messageTokens: draft.messageTokens,
    parts: draft.parts,
    sources: draft.sources,
    recalledMessages: draft.recalledMessages,
    leftOut: draft.leftOut,
    totalTokens: draft.totalTokens,
    window: draft.window,
    sessionId: draft.sessionId,
  }
}
