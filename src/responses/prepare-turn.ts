/**
 * A Responses request up to the prompt the upstream would get: the body parsed and checked, its context rebuilt from
 * the store (a `previous_response_id` chain, or a conversation, which is a session), item references and files by id
 * resolved, and the chat planner's packing (memory, retrieval, recall, `_metadata`). One path for `POST /responses`
 * (handler.ts), which then calls the upstream, and `POST /responses/input_tokens` (input-tokens.ts), which only counts
 * it: a count that could differ from what the request sends would not be worth having.
 */
import { tenantOf } from '../http/tenant.js'
import { gatewayError, invalidParam } from '../errors.js'
import { readJsonObject } from '../http/body.js'
import { utf8Header } from '../http/utf8-header.js'
import type { RequestContext } from '../http/server.js'
import type { ConversationStore, ResponseStore, SessionStore } from '../storage/interface.js'
import type { ChatMessage, Tenant } from '../types.js'
import type { ChatPlanner, NamedFiles, PreparedChat } from '../chat/handler.js'
import { FileQuoter } from '../chat/file-inputs.js'
import type { ChatRequest } from '../chat/validate.js'
import { namesInputFiles, resolveInputFiles } from './input-files.js'
import { itemsToMessages, type ResponseItem } from './items.js'
import { parseResponsesRequest, type ResponsesRequest } from './request.js'
import { checkCallPairs, newId, sessionPendingCalls, type Chain, type ChainCache, resolveReferences, walkChain } from './state.js'

export interface PrepareTurnOptions {
  planner: ChatPlanner
  responses: ResponseStore
  conversations: ConversationStore
  sessions: SessionStore
  /** Walked `previous_response_id` chains, reused by the next turn (state.ts). */
  chains?: ChainCache
  /** The caller's files, for an `input_file` that names one by id (input-files.ts). */
  files?: NamedFiles
  limits: {
    maxBodyBytes: number
    maxInputItems: number
    maxSessionIdLength: number
    /** Ancestors read when walking a chain; older ones count as history that did not fit. */
    maxChainTurns: number
  }
}

export interface PreparedTurn {
  tenant: Tenant
  r: ResponsesRequest
  /** The client's provider key. */
  authorization: string
  /** The input items with references resolved (what `input_items` lists). */
  inputItems: ResponseItem[]
  /** The same, as chat messages (instructions excluded). */
  inputMessages: ChatMessage[]
  chatReq: ChatRequest
  prepared: PreparedChat
}

/**
 * `countOnly`: the prompt is built to be counted, not sent. The planner then remembers nothing of it for the
 * session's next prompt (ChatRequest.countOnly); nothing here writes to a store either way.
 */
export async function prepareTurn(o: PrepareTurnOptions, ctx: RequestContext, opts: { countOnly?: boolean } = {}): Promise<PreparedTurn> {
  const tenant = tenantOf(ctx)
  const body = await readJsonObject(ctx.req, o.limits.maxBodyBytes)
  const header = ctx.req.headers['x-session-id']
  const r = parseResponsesRequest(body, { maxInputItems: o.limits.maxInputItems, maxSessionIdLength: o.limits.maxSessionIdLength }, {
    newId,
    sessionIdHeader: typeof header === 'string' ? utf8Header(header, 'x-session-id') : undefined,
  })
  ctx.facts.model = r.model
  if (opts.countOnly !== true) ctx.facts.stream = r.stream
  const authorization = ctx.req.headers.authorization
  if (authorization === undefined || authorization.trim() === '') throw gatewayError('missing_provider_key')

  const conversationId = r.conversationId ?? r.sessionId
  if (r.previousResponseId !== undefined && conversationId !== undefined) {
    throw invalidParam(
      r.conversationId !== undefined ? 'conversation' : 'sessionId',
      'previous_response_id cannot be used together with a conversation (or sessionId): choose one of them',
    )
  }
  const chain =
    r.previousResponseId === undefined ? undefined : await walkChain(o.responses, tenant.id, r.previousResponseId, o.limits.maxChainTurns, o.chains)
  if (r.conversationId !== undefined && !(await conversationExists(o, tenant, r.conversationId))) {
    throw gatewayError('not_found', { message: `Conversation with id '${r.conversationId}' not found.`, param: 'conversation' })
  }
  const input = r.input.some((item) => item.type === 'item_reference') ? await resolveReferences(r.input, o.responses, tenant.id) : r.input
  // With neither a chain nor a conversation, the input is the whole context: nothing is pending before it.
  const pendingCalls =
    chain !== undefined
      ? chain.pendingCalls
      : r.conversationId !== undefined
        ? await sessionPendingCalls(o.sessions, tenant.id, r.conversationId)
        : conversationId !== undefined
          ? undefined
          : []
  checkCallPairs(input, pendingCalls)
  const resolved =
    o.files !== undefined && namesInputFiles(input)
      ? await resolveInputFiles(input, new FileQuoter(o.files.texts, tenant.id, await o.files.window(r.model, authorization, ctx)), 'input')
      : input
  const inputMessages = itemsToMessages(resolved)
  const messages: ChatMessage[] =
    r.instructions === null || r.instructions === '' ? inputMessages : [{ role: 'system', content: r.instructions }, ...inputMessages]
  const chatReq = chatRequestOf(r, messages, conversationId, chain, opts.countOnly === true)

  const planned = o.planner.prepare(tenant, chatReq, authorization, ctx)
  const prepared = planned instanceof Promise ? await planned : planned
  return { tenant, r, authorization, inputItems: input, inputMessages, chatReq, prepared }
}

/** The chat the planner packs: the request's messages after the chain's (or the conversation's) history. */
function chatRequestOf(r: ResponsesRequest, messages: ChatMessage[], sessionId: string | undefined, chain: Chain | undefined, countOnly: boolean): ChatRequest {
  return {
    model: r.model,
    messages,
    stream: r.stream,
    maxTokens: r.maxOutputTokens,
    sessionId,
    saveToMemory: r.saveToMemory,
    // `file_search` is the caller's knowledge base, searched as `useRAG` searches it.
    useRAG: r.useRAG || r.fileSearch !== undefined,
    ragQuery: r.ragQuery,
    includeUsage: true,
    passthrough: { model: r.model, ...r.chatFields },
    ...(chain === undefined ? {} : { history: chain.history, olderMessages: chain.olderMessages }),
    ...(countOnly ? { countOnly } : {}),
  }
}

async function conversationExists(o: PrepareTurnOptions, tenant: Tenant, id: string): Promise<boolean> {
  return (await o.conversations.get(tenant.id, id)) !== undefined || (await o.sessions.get(tenant.id, id)) !== undefined
}
