/**
 * The planner's short path: a request with no session, no history and nothing to retrieve goes upstream as it came,
 * counted and checked against the window, with the `_metadata` and trace the general path (planner.ts) would give it.
 *
 * Why a path of its own: packing an empty history still built its units, windows and lists, and the general path's
 * state per request (the alignment, the counts' memo, the closures, the async function's frame) showed as garbage and
 * CPU. Measured by parallel A/B of gateway CPU per plain relayed request (bench/cpu-ab.ts; docs/benchmarks.md, "Plain
 * requests take a short path"). test/planner-plain.test.ts holds the two paths equal on random requests.
 */
import type { ChatMessage, PromptTrace, Tokens } from '../types.js'
import { invalidParam } from '../errors.js'
import { checkPairing } from '../messages/pairing.js'
import type { TokenCounter } from '../context/tokenizer.js'
import { checkRequestFits } from '../context/packer.js'
import type { NotRetrieved } from '../knowledge/relevance.js'
import type { PreparedChat } from './handler.js'
import type { Metadata } from './metadata.js'
import type { ChatRequest } from './validate.js'
import { clientMarksCache, needsBreakpoints, withBreakpoints } from './cache-breakpoints.js'

/** Why nothing is retrieved for the request, and its query, as `_metadata.rag` reports them. */
export interface PlainRetrieval {
  query: string | null
  reason: NotRetrieved
}

/** How many messages open the list as system or developer messages (`developer` is the newer models' `system`). */
export function leadingSystem(messages: readonly ChatMessage[]): number {
  let i = 0
  while (i < messages.length && (messages[i]?.role === 'system' || messages[i]?.role === 'developer')) i++
  return i
}

/**
 * The room kept for the reply: the request's max_completion_tokens or max_tokens, else DEFAULT_MAX_TOKENS capped at a
 * quarter of the usable window. One rule for both of the planner's paths.
 */
export function replyReserve(req: ChatRequest, usable: Tokens, defaultMaxTokens: Tokens): Tokens {
  return req.maxTokens ?? Math.min(defaultMaxTokens, Math.floor(usable / 4))
}

/**
 * What the request adds to the prompt besides its messages: its tool definitions (and the deprecated `functions`) and
 * its `response_format` schema. One rule for both of the planner's paths.
 */
export function requestExtraTokens(counter: TokenCounter, req: ChatRequest): Tokens {
  const p = req.passthrough
  return counter.toolsTokens(p.tools, req.model, p.functions) + counter.responseFormatTokens(p.response_format, req.model)
}

export function plainPlan(
  o: { counter: TokenCounter; defaultMaxTokens: Tokens; promptCache?: 'auto' | 'off' },
  req: ChatRequest,
  window: Tokens,
  rag: PlainRetrieval,
): PreparedChat {
  const model = req.model
  const usable = o.counter.usableWindow(model, window)
  const reserve = replyReserve(req, usable, o.defaultMaxTokens)
  const extraTokens = requestExtraTokens(o.counter, req)
  const sent = req.messages
  const system = leadingSystem(sent)
  // As the general path checks it: the messages after the leading system ones.
  const violation = checkPairing(system === 0 ? sent : sent.slice(system))
  if (violation !== undefined) throw invalidParam(`messages[${system + violation.index}].${violation.field}`, violation.message)
  const messageTokens: Tokens[] = []
  let totalTokens = o.counter.chatOverhead(model) + extraTokens
  for (const m of sent) {
    const n = o.counter.messageTokens(m, model)
    messageTokens.push(n)
    totalTokens += n
  }
  checkRequestFits(usable, reserve, totalTokens, extraTokens)
  const metadata: Metadata = {
    memory: { sessionId: null, historyMessages: 0, recalledMessages: 0, recognizedMessages: 0 },
    rag: { enabled: req.useRAG, resultsFound: 0, query: rag.query, sources: [], reason: rag.reason, bestRelevance: null },
    context: { totalTokens, includedMessages: sent.length, includedChunks: 0, truncated: false, window: usable, reserved: reserve, stablePrefixTokens: 0 },
  }
  const messages =
    o.promptCache !== 'off' && needsBreakpoints(model) && !clientMarksCache(req.passthrough, sent) ? withBreakpoints(sent, system, system) : sent
  const trace: PromptTrace = {
    messages,
    messageTokens,
    parts: { system, history: 0, recall: 0, excerpts: 0 },
    sources: metadata.rag.sources,
    recalledMessages: 0,
    leftOut: { historyMessages: 0, chunks: 0, retrievalReason: rag.reason },
    totalTokens,
    window: usable,
    sessionId: null,
  }
  return { messages, metadata, countedTokens: totalTokens, excerpts: [], trace }
}
