/**
 * The Responses API's server-side state, over the store contract (storage/interface.ts): walking a
 * `previous_response_id` chain into a history, resolving `item_reference`s, and the record a finished turn is stored as.
 * Knows nothing of HTTP; errors are the registry's (a chain that cannot be walked is the caller's 400).
 */
import { randomFillSync } from 'node:crypto'
import { gatewayError, invalidParam } from '../errors.js'
import { LRUCache } from 'lru-cache'
import type { ResponseStore, SessionStore, StoredItem, StoredResponse } from '../storage/interface.js'
import { hasToolCalls } from '../messages/pairing.js'
import { storedMessage } from '../messages/stored-message.js'
import type { ChatMessage, StoredMessage, Tokens } from '../types.js'
import type { ResponseItem } from './items.js'

/** Ids' randomness, drawn from the system 256 ids at a time. */
const ID_BYTES = 12
const pool = Buffer.allocUnsafe(ID_BYTES * 256)
let pooled = pool.length

/**
 * `resp_…`, `msg_…`, `fc_…`: 24 hex digits of randomness, as long as OpenAI's own ids are unique. From a pool, as
 * node's randomUUID does: a `randomBytes` call per id was 6 % of the gateway's CPU on the Responses path at 32
 * connections (a streamed response takes three or more ids; bench/scenarios/responses.ts with --profile).
 */
export function newId(prefix: string): string {
  if (pooled === pool.length) {
    randomFillSync(pool)
    pooled = 0
  }
  const id = pool.toString('hex', pooled, pooled + ID_BYTES)
  pooled += ID_BYTES
  return `${prefix}_${id}`
}

export interface Chain {
  /** The chain's turns as chat messages, oldest first (frozen, with their token counts). */
  history: readonly StoredMessage[]
  /** Turns beyond `maxTurns` that were not read: they count as older messages that do not fit. */
  olderMessages: number
  /** The calls the newest turn ended with (call ids of its function and custom tool calls): the input must answer each. */
  pendingCalls: readonly string[]
}

/** A walked chain as the cache keeps it: with the ids of its turns, to check that none has been deleted since. */
interface CachedChain extends Chain {
  /** The responses the chain is made of, oldest first. */
  readonly ids: readonly string[]
  /** The tenant's count of deleted responses (ResponseStore.deletions) read before the chain was last checked whole. */
  readonly deletions: number
}

/**
 * Walked chains by their newest response, per process: a chained request reads its parent's chain from here and only
 * checks that its turns still exist (one indexed existence check per turn, no record decoded), instead of reading and
 * decoding every ancestor and freezing its messages anew. Measured on a 50-turn chain (bench/scenarios/responses.ts):
 * the walk made a chained request 1.42× a 50-turn session's time. The frozen messages are shared with every later
 * request, so their JSON is made once (chat/upstream-body.ts), as a session's are.
 *
 * Stored responses never change, only disappear: a cached chain is right exactly as long as all of its turns exist.
 * Every use reads the tenant's count of deleted responses, kept by the store whichever process or replica deletes
 * (so a delete counts from the next request on). While it is what it was when the chain was checked, no turn can be
 * gone; once it has moved, `countExisting` checks the chain's turns (one existence check each) and the cache entry
 * takes the new count. The one read replaced those checks on every use: on a 50-turn chain they were a fifth of the
 * request's CPU (50 key encodings and lookups in LMDB). Bounded by the messages it holds in all (`maxMessages`),
 * oldest used first out.
 */
export class ChainCache {
  readonly #lru: LRUCache<string, CachedChain>

  constructor(maxMessages: number) {
    this.#lru = new LRUCache({ maxSize: maxMessages, sizeCalculation: (c) => Math.max(1, c.history.length) })
  }

  get(tenant: string, id: string): CachedChain | undefined {
    return this.#lru.get(`${tenant}\u0000${id}`)
  }

  set(tenant: string, id: string, chain: CachedChain): void {
    // A chain larger than the whole cache is not cached (lru-cache would refuse it anyway).
    if (chain.history.length <= this.#lru.maxSize) this.#lru.set(`${tenant}\u0000${id}`, chain)
  }

  delete(tenant: string, id: string): void {
    this.#lru.delete(`${tenant}\u0000${id}`)
  }
}

/**
 * The context a chained request continues: each ancestor's turn (its input, then its output), oldest first. Walking
 * parent pointers (not a session) is what makes forks work: two responses chained off one parent each see only their
 * own branch. At most `maxTurns` ancestors are read; an unknown, deleted, unstored or other tenant's id anywhere
 * in the walk is OpenAI's `previous_response_not_found`. The walk stops at the first ancestor whose chain is cached
 * (and whole: every turn of it still stored).
 */
export async function walkChain(responses: ResponseStore, tenant: string, id: string, maxTurns: number, cache?: ChainCache): Promise<Chain> {
  const turns: StoredResponse[] = []
  let base: CachedChain | undefined
  let next: string | null = id
  let olderMessages = 0
  const seen = new Set<string>()
  // Read before anything of the chain is: a delete after this read moves the count past what is cached with it.
  const deletions = cache === undefined ? 0 : await responses.deletions(tenant)
  while (next !== null) {
    if (seen.has(next)) break // a cycle cannot be built through the API; a damaged store must not loop forever
    seen.add(next)
    const cached = turns.length < maxTurns ? cache?.get(tenant, next) : undefined
    if (cached !== undefined && turns.length + cached.ids.length <= maxTurns) {
      if (cached.deletions === deletions) {
        base = cached
        break
      }
      if ((await responses.countExisting(tenant, cached.ids)) === cached.ids.length) {
        base = { ...cached, deletions }
        cache?.set(tenant, next, base)
        break
      }
      // A turn of it was deleted since: walk (the chain now ends where that turn was).
      cache?.delete(tenant, next)
    }
    const rec: StoredResponse | undefined = await responses.get(tenant, next)
    if (rec === undefined) {
      if (turns.length === 0) throw previousNotFound(id)
      // An ancestor deleted after its child was made: the child's context ends there, as OpenAI's does.
      break
    }
    if (turns.length === maxTurns) {
      olderMessages += rec.messages.length
      next = rec.previousResponseId
      continue
    }
    turns.push(rec)
    next = rec.previousResponseId
  }
  turns.reverse()
  const history: StoredMessage[] = base === undefined ? [] : [...base.history]
  const ids: string[] = base === undefined ? [] : [...base.ids]
  for (const turn of turns) {
    for (const m of turn.messages) history.push(storedMessage(history.length, m.message, m.tokens, turn.createdAt))
    ids.push(turn.id)
  }
  const last = turns.at(-1)
  const pendingCalls: string[] = []
  if (last === undefined) pendingCalls.push(...(base?.pendingCalls ?? []))
  for (const item of last?.output ?? []) {
    if ((item.type === 'function_call' || item.type === 'custom_tool_call') && typeof item.call_id === 'string') pendingCalls.push(item.call_id)
  }
  const chain: CachedChain = { history, olderMessages, pendingCalls, ids, deletions }
  // A chain cut at maxTurns shifts by a turn with every new one: only whole chains are kept.
  if (olderMessages === 0 && turns.length > 0) cache?.set(tenant, id, chain)
  return chain
}

/**
 * OpenAI's checks on the calls of a request's context, in its words and naming `input` (the chat planner's own check
 * would name `messages[i]`, which a Responses client never sent):
 * - every call the context ended with (`pendingCalls`: the previous response's, or a conversation's newest message's)
 *   and every call of the input is answered by an output in the input ("No tool output found for function call
 *   call_…"); packing would otherwise drop the unanswered call silently and the model would answer as if it had never
 *   asked;
 * - every output answers a call of the input before it or a pending one ("No tool call found for function call output
 *   with call_id call_…").
 * `pendingCalls` undefined: the context is a chat session named by `sessionId`, followed as chat follows it (a client
 * that resends its history may regenerate a turn that ended with calls); only the input's own calls are checked here,
 * the rest by the planner.
 */
export function checkCallPairs(input: readonly ResponseItem[], pendingCalls: readonly string[] | undefined): void {
  const called = new Set<string>(pendingCalls)
  const answered = new Set<string>()
  for (const item of input) {
    if (typeof item.call_id !== 'string') continue
    if (item.type === 'function_call' || item.type === 'custom_tool_call') called.add(item.call_id)
    else if (item.type === 'function_call_output' || item.type === 'custom_tool_call_output') {
      if (pendingCalls !== undefined && !called.has(item.call_id))
        throw invalidParam('input', `No tool call found for function call output with call_id ${item.call_id}.`)
      answered.add(item.call_id)
    }
  }
  for (const id of called) {
    if (!answered.has(id)) throw invalidParam('input', `No tool output found for function call ${id}.`)
  }
}

/**
 * The calls a conversation's (session's) newest message made: nothing can have answered them, since answers come after
 * them. One message read; the planner reads the history again to pack it.
 */
export async function sessionPendingCalls(sessions: SessionStore, tenant: string, sessionId: string): Promise<string[]> {
  const last = (await sessions.history(tenant, sessionId, 1)).at(-1)?.message
  return last !== undefined && hasToolCalls(last) ? (last.tool_calls ?? []).map((c) => c.id) : []
}

export function previousNotFound(id: string): Error {
  return gatewayError('previous_response_not_found', {
    message: `Previous response with id '${id}' not found.`,
    param: 'previous_response_id',
  })
}

/**
 * Replace each `item_reference` with the item it names, from any of the tenant's stored responses (an item of the
 * chain is one of them). An id that names nothing is a 400 naming the input item.
 */
export async function resolveReferences(input: readonly ResponseItem[], responses: ResponseStore, tenant: string): Promise<ResponseItem[]> {
  const out: ResponseItem[] = []
  for (const [i, item] of input.entries()) {
    if (item.type !== 'item_reference') {
      out.push(item)
      continue
    }
    const id = typeof item.id === 'string' ? item.id : ''
    const found = await responses.findItem(tenant, id)
    if (found === undefined) throw invalidParam(`input[${i}].id`, `Item with id '${id}' not found.`)
    out.push(found as ResponseItem)
  }
  return out
}

/** An item as stored: every stored item has an id (normalizeInput gives one to items that came without). */
export function storedItems(items: readonly ResponseItem[]): StoredItem[] {
  return items.map((i) => ({ ...i, id: typeof i.id === 'string' && i.id !== '' ? i.id : newId('item') }) as StoredItem)
}

/** The turn as chat messages with their stored token counts, what the next chained request's history is made of. */
export function turnMessages(
  messages: readonly ChatMessage[],
  count: (m: ChatMessage) => Tokens,
): { message: ChatMessage; tokens: Tokens }[] {
  // System and developer items of an input are inherited through a chain (they are items, as in OpenAI's API); only
  // `instructions` are not, and the caller leaves them out.
  return messages.map((m) => ({ message: m, tokens: count(m) }))
}
