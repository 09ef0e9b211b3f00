/**
 * Builds what goes upstream for one chat: the session's history, the caller's retrieved file chunks and the request,
 * packed into the model's window with exact token counts, plus `_metadata`. Also saves completed exchanges.
 * Each step is a small function of its inputs; this module only wires them.
 */
import type { ChatMessage, Tenant, Tokens } from '../types.js'
import type { TokenCounter } from '../context/tokenizer.js'
import { pack } from '../context/packer.js'
import type { SessionRepo, StoredMessage } from '../storage/session-repo.js'
import type { ModelCatalog } from '../upstream/model-catalog.js'
import type { KnowledgeBase, SearchHit } from '../knowledge/knowledge-base.js'
import { renderContextMessage } from '../knowledge/knowledge-base.js'
import type { RecallCandidates, SessionRecall } from '../recall/session-recall.js'
import type { ChatPlanner, PreparedChat } from './handler.js'
import type { Metadata } from './metadata.js'
import type { Usage } from './relay-stream.js'
import type { ChatRequest } from './validate.js'

export interface PlannerOptions {
  counter: TokenCounter
  sessions: SessionRepo
  knowledge: KnowledgeBase
  catalog: ModelCatalog
  defaultContextLength: Tokens
  defaultMaxTokens: Tokens
  maxHistoryMessages: number
  ragBudgetShare: number
  ragMaxTokens: Tokens
  ragTopK: number
  /** Long-term recall; absent when RECALL=off. */
  recall?: { service: SessionRecall; recentShare: number }
}

/** Leading system messages stay first; everything from the first non-system message on keeps its order. */
export function splitRequest(messages: ChatMessage[]): { system: ChatMessage[]; other: ChatMessage[] } {
  let i = 0
  while (i < messages.length && messages[i]?.role === 'system') i++
  return { system: messages.slice(0, i), other: messages.slice(i) }
}

/** The retrieval query: `ragQuery`, else the last user message. */
export function retrievalQuery(req: ChatRequest): string | undefined {
  if (req.ragQuery !== undefined) return req.ragQuery
  for (let i = req.messages.length - 1; i >= 0; i--) {
    const m = req.messages[i]
    if (m?.role === 'user' && m.content.trim() !== '') return m.content
  }
  return undefined
}

export class Planner implements ChatPlanner {
  readonly #o: PlannerOptions

  constructor(o: PlannerOptions) {
    this.#o = o
  }

  async prepare(tenant: Tenant, req: ChatRequest, opts: { authorization: string }): Promise<PreparedChat> {
    const o = this.#o
    const window = (await o.catalog.contextLength(req.model, opts.authorization)) ?? o.defaultContextLength
    const usable = o.counter.usableWindow(req.model, window)
    const reserve = req.maxTokens ?? Math.min(o.defaultMaxTokens, Math.floor(usable / 4))
    const { system, other } = splitRequest(req.messages)

    const history = req.sessionId === undefined ? [] : o.sessions.history(tenant.id, req.sessionId, o.maxHistoryMessages)

    const query = req.useRAG ? retrievalQuery(req) : undefined
    let hits: SearchHit[] = []
    if (query !== undefined) hits = await o.knowledge.search(tenant.id, query, o.ragTopK)

    const model = req.model
    // Request messages are counted once here and again by the packer: memoized per message object.
    const counted = new Map<ChatMessage, Tokens>()
    const messageTokens = (m: ChatMessage): Tokens => {
      let n = counted.get(m)
      if (n === undefined) counted.set(m, (n = o.counter.messageTokens(m, model)))
      return n
    }
    const historyMessageTokens = (m: StoredMessage): Tokens => o.counter.storedMessageTokens(m, model)
    const ragBudget = Math.min(o.ragMaxTokens, Math.floor(usable * o.ragBudgetShare))

    // Recall searches (async) before packing (sync), and only when the history cannot fit whole: the common case
    // pays one pass over stored counts.
    // A read limited to maxHistoryMessages may have left older messages out: they count as not fitting.
    const older =
      req.sessionId !== undefined && history.length >= o.maxHistoryMessages
        ? Math.max(0, (o.sessions.get(tenant.id, req.sessionId)?.messageCount ?? 0) - history.length)
        : 0
    let recalled: RecallCandidates | undefined
    const recall = o.recall
    // MAX_HISTORY_MESSAGES=0 asks for no history at all: recall does not bring it back either.
    if (recall !== undefined && req.sessionId !== undefined && o.maxHistoryMessages > 0 && history.length + older > 0) {
      let fixed = o.counter.chatOverhead(model) + reserve + (hits.length > 0 ? ragBudget : 0)
      for (const m of req.messages) fixed += messageTokens(m)
      let historyTokens = 0
      for (const m of history) historyTokens += historyMessageTokens(m)
      const recallQuery = retrievalQuery(req)
      if ((fixed + historyTokens > usable || older > 0) && recallQuery !== undefined) {
        // About the block's room (the retrieval block may take less than its budget): sizes the candidate list.
        const room = Math.floor((usable - fixed) * (1 - recall.recentShare))
        recalled = await recall.service.search(tenant.id, req.sessionId, recallQuery, room)
      }
    }

    const result = pack({
      window: usable,
      reserve,
      requestSystem: system,
      requestOther: other,
      history,
      olderMessages: older,
      maxHistoryMessages: o.maxHistoryMessages,
      retrieval:
        hits.length === 0
          ? undefined
          : {
              candidates: hits,
              budget: ragBudget,
              render: (selected) => renderContextMessage(selected.map((i) => hits[i] as SearchHit)),
            },
      recall:
        recall === undefined || recalled === undefined
          ? undefined
          : {
              recentShare: recall.recentShare,
              select: (ctx) => {
                const block = recall.service.select(recalled, ctx, model)
                return block && { message: block.message, messages: block.seqs.length, seqs: block.seqs, tokens: block.tokens }
              },
            },
      messageTokens,
      historyMessageTokens,
      chatOverhead: o.counter.chatOverhead(model),
    })

    const usedHits = result.selectedChunks.map((i) => hits[i] as SearchHit)
    const metadata: Metadata = {
      memory: { sessionId: req.sessionId ?? null, historyMessages: result.includedHistory, recalledMessages: result.recalledMessages },
      rag: {
        enabled: req.useRAG,
        resultsFound: hits.length,
        query: query ?? null,
        sources: usedHits.map((h) => ({
          file_id: h.file_id,
          filename: h.filename,
          chunk_index: h.chunk_index,
          score: h.score,
        })),
      },
      context: {
        totalTokens: result.totalTokens,
        includedMessages: req.messages.length + result.includedHistory,
        includedChunks: result.includedChunks,
        truncated: result.truncated,
        window: usable,
        reserved: reserve,
      },
    }
    return { messages: result.messages, metadata, countedTokens: result.totalTokens }
  }

  async save(tenant: Tenant, req: ChatRequest, reply: string): Promise<void> {
    if (req.sessionId === undefined) return
    const toSave: ChatMessage[] = req.messages.filter((m) => m.role !== 'system')
    toSave.push({ role: 'assistant', content: reply })
    await this.#o.sessions.appendExchange(tenant.id, req.sessionId, toSave)
  }

  observeUsage(model: string, counted: Tokens, usage: Usage | undefined): void {
    const reported = usage?.prompt_tokens
    if (typeof reported === 'number' && reported > 0 && counted > 0) this.#o.counter.observe(model, counted, reported)
  }
}
