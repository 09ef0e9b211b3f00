/**
 * Builds what goes upstream for one chat: the session's history, the caller's retrieved file chunks and the request,
 * packed into the model's window with exact token counts, plus `_metadata`. Also saves completed exchanges.
 * Each step is a small function of its inputs; this module only wires them.
 */
import type { Quotas } from '../quotas/quotas.js'
import type { ChatMessage, PromptTrace, Tenant, Tokens } from '../types.js'
import { invalidParam } from '../errors.js'
import { checkPairing, hasToolCalls } from '../messages/pairing.js'
import { userText } from '../messages/text.js'
import { STORED_ENCODING, type TokenCounter } from '../context/tokenizer.js'
import { pack } from '../context/packer.js'
import type { SessionStore, StoredMessage } from '../storage/interface.js'
import { sessionKey } from '../storage/session-id.js'
import type { ModelCatalog } from '../upstream/model-catalog.js'
import type { Cancel } from '../retrieval/embedder.js'
import type { KnowledgeBase, SearchHit } from '../knowledge/knowledge-base.js'
import { renderContextMessage, renderCounted } from '../knowledge/knowledge-base.js'
import { DEFAULT_RELEVANCE_GATE, type NotRetrieved, type RelevanceGate } from '../knowledge/relevance.js'
import type { RecallCandidates, SessionRecall } from '../recall/session-recall.js'
import type { SentBlock } from '../recall/recall-block.js'
import type { ChatPlanner, PreparedChat } from './handler.js'
import type { Metadata } from './metadata.js'
import type { Usage } from './relay-stream.js'
import type { ChatRequest } from './validate.js'
import { alignResent } from './resent-history.js'
import { asksNothing } from './small-talk.js'
import { StablePrefix } from './stable-prefix.js'
import { leadingSystem, plainPlan, replyReserve, requestExtraTokens, type PlainRetrieval } from './plain-plan.js'
import { quotedFileIds } from '../messages/quoted-file.js'
import { clientMarksCache, needsBreakpoints, withBreakpoints } from './cache-breakpoints.js'

export interface PlannerOptions {
  counter: TokenCounter
  sessions: SessionStore
  knowledge: KnowledgeBase
  catalog: ModelCatalog
  defaultContextLength: Tokens
  defaultMaxTokens: Tokens
  maxHistoryMessages: number
  /** See context/packer.ts. Default 1. */
  historyStep?: number
  /** Default 'auto'. */
  promptCache?: 'auto' | 'off'
  /** Sessions whose previous prompt is remembered for `stablePrefixTokens`. Default 10,000. */
  stablePrefixSessions?: number
  ragBudgetShare: number
  ragMaxTokens: Tokens
  ragTopK: number
  /** Which retrieved chunks count as relevant (knowledge/relevance.ts); its defaults when absent. */
  relevanceGate?: RelevanceGate
  /** Long-term recall; absent when RECALL=off. */
  recall?: { service: SessionRecall; recentShare: number }
  /** The tenant's plan's quotas (quotas/): a new session is checked before the upstream call, saves are bounded. */
  quotas?: Pick<Quotas, 'checkNewSession' | 'sessionBounds'>
}

/**
 * Leading system and developer messages stay first (`developer` is the newer models' name for `system`); everything
 * from the first other message on keeps its order.
 */
export function splitRequest(messages: ChatMessage[]): { system: ChatMessage[]; other: ChatMessage[] } {
  const i = leadingSystem(messages)
  return { system: messages.slice(0, i), other: messages.slice(i) }
}

/**
 * The retrieval query: `ragQuery` (even "", which searches for nothing), else the text of the last user message that
 * has some (in a tool loop the request ends with tool results: the question is still the user's). When the request
 * has none, the history's: a tool loop kept in a session sends only the results, and the turn that answers them is
 * searched for the question it answers, as a client resending the whole conversation gets it.
 */
export function retrievalQuery(req: ChatRequest, history: readonly StoredMessage[] = []): string | undefined {
  if (req.ragQuery !== undefined) return req.ragQuery
  for (let i = req.messages.length - 1; i >= 0; i--) {
    const text = userText(req.messages[i] as ChatMessage)
    if (text !== '') return text
  }
  for (let i = history.length - 1; i >= 0; i--) {
    const text = userText((history[i] as StoredMessage).message)
    if (text !== '') return text
  }
  return undefined
}

const DISABLED = { query: null, reason: 'disabled' } as const

/** What `save` needs from `prepare`: the messages new to the session, and where a rewinding client diverged. */
interface Saving {
  fresh: ChatMessage[]
  replaceFrom: number | undefined
}

export class Planner implements ChatPlanner {
  readonly #o: PlannerOptions
  readonly #prefix: StablePrefix

  constructor(o: PlannerOptions) {
    this.#o = o
    this.#prefix = new StablePrefix(o.stablePrefixSessions ?? 10_000)
  }

  /**
   * `authorization` is the client's provider key (for the model list). `cancel.signal` is the client's departure: it
   * cancels the retrieval's and recall's embedding calls and this request's wait on the model list. Read only when one of
   * them is made (an AbortSignal costs ~6 µs to make, http/client-gone.ts): the request context, whose `signal` is a
   * getter of its class (an object literal with a getter is built through V8's slow path).
   */
  prepare(tenant: Tenant, req: ChatRequest, authorization: string, cancel: Cancel): PreparedChat | Promise<PreparedChat> {
    // A request with nothing to remember or retrieve, once the model list is cached, is answered without an await.
    // Not a detail: the general path is one large async function, and entering it (its state and closures allocated,
    // a promise, the caller's await) with the options literal it was called with cost 12 % of a plain relayed
    // request's CPU (parallel A/B of gateway CPU per request; docs/benchmarks.md, "Plain requests take a short path").
    const rag = this.#plainRetrieval(tenant, req)
    if (rag !== undefined) {
      const known = this.#o.catalog.knownContextLength(req.model, authorization)
      if (known !== undefined) return plainPlan(this.#o, req, known.window ?? this.#o.defaultContextLength, rag)
    }
    return this.#prepare(tenant, req, authorization, cancel, rag)
  }

  /**
   * A request the short path takes: no session and no history given, and nothing to retrieve: retrieval off, or a
   * tenant without files (asked of the store without an await, where it can answer so). Its `_metadata.rag` query and
   * reason, as the general path would give them; undefined for any other request.
   */
  #plainRetrieval(tenant: Tenant, req: ChatRequest): PlainRetrieval | undefined {
    if (req.sessionId !== undefined || req.history !== undefined) return undefined
    if (!req.useRAG) return DISABLED
    if (this.#o.knowledge.hasChunksNow(tenant.id) !== false) return undefined
    const query = retrievalQuery(req)
    if (query === undefined || query.trim() === '') return { query: query ?? null, reason: 'empty_query' }
    return { query, reason: req.ragQuery === undefined && asksNothing(query) ? 'small_talk' : 'no_files' }
  }

  async #prepare(
    tenant: Tenant,
    req: ChatRequest,
    authorization: string,
    cancel: Cancel,
    plain: PlainRetrieval | undefined,
  ): Promise<PreparedChat> {
    const o = this.#o
    const window = (await o.catalog.contextLength(req.model, authorization, cancel)) ?? o.defaultContextLength
    if (plain !== undefined) return plainPlan(o, req, window, plain)
    const usable = o.counter.usableWindow(req.model, window)
    const reserve = replyReserve(req, usable, o.defaultMaxTokens)
    const model = req.model
    const extraTokens = requestExtraTokens(o.counter, req)
    const { system, other } = splitRequest(req.messages)

    // Read enough to recognise a client that resends its whole history (at least its length), then align.
    const readLimit = o.maxHistoryMessages > 0 ? Math.max(o.maxHistoryMessages, other.length + 2) : 0
    const stored =
      req.history !== undefined
        ? req.history.slice(Math.max(0, req.history.length - readLimit))
        : req.sessionId === undefined
          ? []
          : await o.sessions.history(tenant.id, req.sessionId, readLimit)
    // A session that reads back empty may be new: refused now if the plan has no session left, not after the upstream
    // was paid for a reply that could not be saved. A running session never pays for this (quotas.ts says the cost).
    if (stored.length === 0 && req.history === undefined && req.sessionId !== undefined && req.saveToMemory)
      await o.quotas?.checkNewSession(tenant, req.sessionId)
    const aligned = alignResent(stored, other)
    let history = stored.slice(0, aligned.history)
    /** The conversation before this request (the tool call its results answer included): where a question may be. */
    const before = history
    const fresh = other.slice(aligned.recognized)
    // Tool results answer the stored assistant message that called the tools: it goes with them, as the request's.
    const last = history.at(-1)
    const anchor = fresh[0]?.role === 'tool' && last !== undefined && hasToolCalls(last.message) ? last : undefined
    if (anchor !== undefined) history = history.slice(0, -1)
    const sent = anchor === undefined ? fresh : [anchor.message, ...fresh]
    const violation = checkPairing(sent)
    if (violation !== undefined) {
      const at = violation.index - (anchor === undefined ? 0 : 1)
      throw invalidParam(at < 0 ? 'messages' : `messages[${system.length + aligned.recognized + at}].${violation.field}`, violation.message)
    }

    const query = req.useRAG ? retrievalQuery(req, before) : undefined
    let hits: SearchHit[] = []
    let found = 0
    let bestRelevance: number | null = null
    let reason: NotRetrieved | undefined
    if (!req.useRAG) reason = 'disabled'
    else if (query === undefined || query.trim() === '') reason = 'empty_query'
    // A turn that asks nothing ("thanks!", "ok") searches for nothing; a `ragQuery` the caller chose always searches.
    else if (req.ragQuery === undefined && asksNothing(query)) reason = 'small_talk'
    else {
      const searched = await o.knowledge.search(tenant.id, query, o.ragTopK, 'hybrid', cancel)
      found = searched.length
      // A file the request quotes whole is not quoted again in pieces: the gate judges the other files' chunks.
      const inPrompt = quotedFileIds(req.messages)
      const ranked = inPrompt.size === 0 ? searched : searched.filter((h) => !inPrompt.has(h.file_id))
      const relevant = o.knowledge.relevant(tenant.id, query, ranked, o.relevanceGate ?? DEFAULT_RELEVANCE_GATE)
      hits = relevant.hits
      if (ranked.length > 0) bestRelevance = relevant.best
      if (found > 0 && ranked.length === 0) reason = 'in_prompt'
      else reason = relevant.reason === 'no_match' && !(await o.knowledge.hasChunks(tenant.id)) ? 'no_files' : relevant.reason
    }

    // Request messages are counted once here and again by the packer: memoized per message object.
    const counted = new Map<ChatMessage, Tokens>()
    const messageTokens = (m: ChatMessage): Tokens => {
      let n = counted.get(m)
      if (n === undefined) counted.set(m, (n = o.counter.messageTokens(m, model)))
      return n
    }
    const historyMessageTokens = (m: StoredMessage): Tokens => o.counter.storedMessageTokens(m, model)
    const ragBudget = Math.min(o.ragMaxTokens, Math.floor(usable * o.ragBudgetShare))
    // The chunks' counts are o200k's: a cl100k model's count of the block is its own.
    const chunkCountsApply = o.counter.encodingFor(model) === STORED_ENCODING

    // Recall searches (async) before packing (sync), and only when the history cannot fit whole: the common case
    // pays one pass over stored counts.
    // A read limited to maxHistoryMessages may have left older messages out: they count as not fitting.
    const older =
      req.history !== undefined
        ? req.history.length - stored.length + (req.olderMessages ?? 0)
        : req.sessionId !== undefined && stored.length >= readLimit
          ? Math.max(0, ((await o.sessions.get(tenant.id, req.sessionId))?.messageCount ?? 0) - stored.length)
          : 0
    let recalled: RecallCandidates | undefined
    const recall = o.recall
    // MAX_HISTORY_MESSAGES=0 asks for no history at all: recall does not bring it back either.
    if (recall !== undefined && req.sessionId !== undefined && o.maxHistoryMessages > 0 && history.length + older > 0) {
      let fixed = o.counter.chatOverhead(model) + extraTokens + reserve + (hits.length > 0 ? ragBudget : 0)
      for (const m of system) fixed += messageTokens(m)
      for (const m of sent) fixed += messageTokens(m)
      let historyTokens = 0
      for (const m of history) historyTokens += historyMessageTokens(m)
      // The retrieval's query when it searched (the same function of the same request), else made here.
      const recallQuery = query ?? retrievalQuery(req, before)
      if ((fixed + historyTokens > usable || older > 0) && recallQuery !== undefined && !asksNothing(recallQuery)) {
        // About the block's room (the retrieval block may take less than its budget): sizes the candidate list.
        const room = Math.floor((usable - fixed) * (1 - recall.recentShare))
        recalled = await recall.service.search(tenant.id, req.sessionId, recallQuery, room, cancel)
      }
    }

    // The block the packer took (it selects once when the block's room is fixed): remembered for the next request.
    let chosen: SentBlock | undefined
    const packWith = (candidates: readonly SearchHit[]): ReturnType<typeof pack> => pack({
      window: usable,
      reserve,
      extraTokens,
      requestSystem: system,
      requestOther: sent,
      history,
      olderMessages: older,
      maxHistoryMessages: o.maxHistoryMessages,
      historyStep: o.historyStep,
      retrieval:
        candidates.length === 0
          ? undefined
          : {
              candidates,
              budget: ragBudget,
              render: (selected) => {
                const chosen = selected.map((i) => candidates[i] as SearchHit)
                if (!chunkCountsApply) return renderContextMessage(chosen)
                // The block's count summed from the chunks' stored (o200k) counts, remembered for the packer's count.
                const { message, tokens } = renderCounted(chosen)
                counted.set(message, o.counter.messageTokensFromContent(tokens, model))
                return message
              },
            },
      recall:
        recall === undefined || recalled === undefined
          ? undefined
          : {
              recentShare: recall.recentShare,
              maxTokens: recall.service.maxTokens,
              select: (ctx) => {
                const block = recall.service.select(recalled, ctx, model)
                // A round that finds nothing leaves the packer with the block it had.
                if (block !== undefined) chosen = { seqs: block.seqs, oldestRecentSeq: ctx.oldestRecentSeq, before: block.before }
                return block && { message: block.message, messages: block.seqs.length, seqs: block.seqs, tokens: block.tokens, ...(block.before === undefined ? {} : { before: block.before }) }
              },
            },
      messageTokens,
      historyMessageTokens,
      chatOverhead: o.counter.chatOverhead(model),
    })
    let result = packWith(hits)
    // A file a history turn that made it in quotes whole (messages/quoted-file.ts) is not quoted again in pieces: packed
    // once more without its chunks. The history only gains room, so that turn stays in.
    if (result.selectedChunks.length > 0) {
      const quoted = quotedFileIds(result.messages)
      if (quoted.size > 0 && result.selectedChunks.some((i) => quoted.has((hits[i] as SearchHit).file_id))) {
        hits = hits.filter((h) => !quoted.has(h.file_id))
        if (hits.length === 0) reason = 'in_prompt'
        result = packWith(hits)
      }
    }

    if (recall !== undefined && req.sessionId !== undefined && req.countOnly !== true)
      recall.service.sent(tenant.id, req.sessionId, result.recalledMessages > 0 ? chosen : undefined)
    const usedHits = result.selectedChunks.map((i) => hits[i] as SearchHit)
    const metadata: Metadata = {
      memory: {
        sessionId: req.sessionId ?? null,
        historyMessages: result.includedHistory + (anchor === undefined ? 0 : 1),
        recalledMessages: result.recalledMessages,
        recognizedMessages: aligned.recognized,
      },
      rag: {
        enabled: req.useRAG,
        resultsFound: found,
        query: query ?? null,
        sources: usedHits.map((h) => ({
          file_id: h.file_id,
          filename: h.filename,
          metadata: h.metadata,
          chunk_index: h.chunk_index,
          score: h.score,
          relevance: h.relevance,
          ...(h.focused === true ? { focused: true } : {}),
        })),
        reason: usedHits.length > 0 ? null : (reason ?? 'no_room'),
        bestRelevance,
      },
      context: {
        totalTokens: result.totalTokens,
        includedMessages: system.length + sent.length + result.includedHistory,
        includedChunks: result.includedChunks,
        truncated: result.truncated,
        window: usable,
        reserved: reserve,
        stablePrefixTokens:
          // A count is not a prompt sent: it neither shares a prefix with the last one nor becomes the next one's.
          req.sessionId === undefined || req.countOnly === true
            ? 0
            : this.#prefix.observe(
                sessionKey(tenant.id, req.sessionId),
                `${model}\u0000${extraTokens > 0 ? JSON.stringify([req.passthrough.tools, req.passthrough.functions, req.passthrough.response_format]) : ''}`,
                extraTokens,
                result.messages,
                result.messageTokens,
              ),
      },
    }
    let messages = result.messages
    if (o.promptCache !== 'off' && needsBreakpoints(model) && !clientMarksCache(req.passthrough, req.messages))
      messages = withBreakpoints(messages, system.length, result.stableMessages)
    const saving: Saving = { fresh, replaceFrom: aligned.replaceFrom }
    // References to what is already built: the trace costs a request a few fields (it is serialised after the response).
    const trace: PromptTrace = {
      messages,
      messageTokens: result.messageTokens,
      parts: {
        system: system.length,
        history: result.includedHistory,
        recall: result.recalledMessages > 0 ? 1 : 0,
        excerpts: result.includedChunks > 0 ? 1 : 0,
      },
      sources: metadata.rag.sources,
      recalledMessages: result.recalledMessages,
      leftOut: {
        historyMessages: Math.max(0, history.length + older - result.includedHistory - result.recalledMessages),
        chunks: Math.max(0, found - usedHits.length),
        retrievalReason: metadata.rag.reason,
      },
      totalTokens: result.totalTokens,
      window: usable,
      sessionId: req.sessionId ?? null,
    }
    return { messages, metadata, countedTokens: result.totalTokens, saving, excerpts: usedHits, trace }
  }

  async save(tenant: Tenant, req: ChatRequest, prepared: PreparedChat, reply: ChatMessage): Promise<void> {
    if (req.sessionId === undefined) return
    const saving = prepared.saving as Saving | undefined
    const fresh = saving?.fresh ?? req.messages
    const toSave = fresh.filter((m) => m.role !== 'system' && m.role !== 'developer')
    toSave.push(reply)
    await this.#o.sessions.appendExchange(tenant.id, req.sessionId, toSave, {
      replaceFrom: saving?.replaceFrom,
      ...(this.#o.quotas ? { bounds: this.#o.quotas.sessionBounds(tenant.plan) } : {}),
    })
  }

  observeUsage(model: string, counted: Tokens, usage: Usage | undefined): void {
    const reported = usage?.prompt_tokens
    if (typeof reported === 'number' && reported > 0 && counted > 0) this.#o.counter.observe(model, counted, reported)
  }
}
