/**
 * The Responses API's server-side state, over the store contract (storage/interface.ts): walking a
 * `previous_response_id` chain into a history, resolving `item_reference`s, and the record a finished turn is stored as.
 * Knows nothing of HTTP; errors are the registry's (a chain that cannot be walked is the caller's 400).
 */
import { randomFillSync } from 'node:crypto'
import { gatewayError, invalidParam } from '../errors.js'
import type { ResponseStore, StoredItem, StoredResponse } from '../storage/interface.js'
import { storedMessage } from '../storage/session-repo.js'
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
  history: StoredMessage[]
  /** Turns beyond `maxTurns` that were not read: they count as older messages that do not fit. */
  olderMessages: number
  /** Every item of the chain by id, for `item_reference`s to what the chain already holds. */
  items: Map<string, StoredItem>
  /** The calls the newest turn ended with (call ids of its function and custom tool calls): the input must answer each. */
  pendingCalls: string[]
}

/**
 * The context a chained request continues: each ancestor's turn (its input, then its output), oldest first. Walking
 * parent pointers (not a session) is what makes forks work: two responses chained off one parent each see only their
 * own branch. At most `maxTurns` ancestors are read; an unknown, deleted, unstored or other tenant's id anywhere
 * in the walk is OpenAI's `previous_response_not_found`.
 */
export async function walkChain(responses: ResponseStore, tenant: string, id: string, maxTurns: number): Promise<Chain> {
  const turns: StoredResponse[] = []
  let next: string | null = id
  let olderMessages = 0
  const seen = new Set<string>()
  while (next !== null) {
    if (seen.has(next)) break // a cycle cannot be built through the API; a damaged store must not loop forever
    seen.add(next)
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
  const history: StoredMessage[] = []
  const items = new Map<string, StoredItem>()
  for (const turn of turns) {
    for (const m of turn.messages) history.push(storedMessage(history.length, m.message, m.tokens, turn.createdAt))
    for (const item of turn.input) items.set(item.id, item)
    for (const item of turn.output) items.set(item.id, item)
  }
  const last = turns.at(-1)
  const pendingCalls: string[] = []
  for (const item of last?.output ?? []) {
    if ((item.type === 'function_call' || item.type === 'custom_tool_call') && typeof item.call_id === 'string') pendingCalls.push(item.call_id)
  }
  return { history, olderMessages, items, pendingCalls }
}

/**
 * OpenAI's check on a chained request: every call the previous response ended with is answered in the new input
 * ("No tool output found for function call call_…"). Packing would otherwise drop the unanswered call silently and
 * the model would answer as if it had never asked.
 */
export function checkPendingCalls(chain: Chain, input: readonly ResponseItem[]): void {
  if (chain.pendingCalls.length === 0) return
  const answered = new Set<string>()
  for (const item of input) {
    if ((item.type === 'function_call_output' || item.type === 'custom_tool_call_output') && typeof item.call_id === 'string') answered.add(item.call_id)
  }
  for (const id of chain.pendingCalls) {
    if (!answered.has(id)) throw invalidParam('input', `No tool output found for function call ${id}.`)
  }
}

export function previousNotFound(id: string): Error {
  return gatewayError('previous_response_not_found', {
    message: `Previous response with id '${id}' not found.`,
    param: 'previous_response_id',
  })
}

/**
 * Replace each `item_reference` with the item it names: from the chain first (no read), else from any of the
 * tenant's stored responses. An id that names nothing is a 400 naming the input item.
 */
export async function resolveReferences(
  input: readonly ResponseItem[],
  responses: ResponseStore,
  tenant: string,
  chain: ReadonlyMap<string, StoredItem> | undefined,
): Promise<ResponseItem[]> {
  const out: ResponseItem[] = []
  for (const [i, item] of input.entries()) {
    if (item.type !== 'item_reference') {
      out.push(item)
      continue
    }
    const id = typeof item.id === 'string' ? item.id : ''
    const found = chain?.get(id) ?? (await responses.findItem(tenant, id))
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
