/**
 * /api/v1/conversations: OpenAI's Conversations API over recallgate's sessions. A conversation IS a session: its
 * items are the session's messages (listed through items.ts's mapping), so `/sessions/{id}`, a chat's `sessionId`,
 * `x-session-id` and `conversation` on a response all see one thread, with one retention and one export. The
 * conversation's own record keeps only what a session lacks (metadata; created_at when made empty).
 *
 * Item ids are derived from the message's position in the session (`msg_s12_0`, `fc_s13_1`): stable across reads
 * without storing anything beside the message, which goes upstream exactly as saved.
 */
import type { Quotas } from '../quotas/quotas.js'
import { tenantOf } from '../http/tenant.js'
import { unixSeconds } from '../types.js'
import { normalizeSessionId } from '../http/session-id.js'
import { gatewayError, invalidParam } from '../errors.js'
import { readJsonObject } from '../http/body.js'
import { sendJson } from '../http/respond.js'
import type { Handler, RequestContext } from '../http/server.js'
import { itemsToMessages, messagesToItems, normalizeInput, type ResponseItem } from '../responses/items.js'
import { metadataField } from '../responses/request.js'
import { newId } from '../responses/state.js'
import type { ConversationRecord, ConversationStore, SessionBounds, SessionStore } from '../storage/interface.js'
import type { ChatMessage, StoredMessage, Tenant, Tokens } from '../types.js'
import { FileQuoter, type FileTexts } from '../chat/file-inputs.js'
import type { Cancel } from '../retrieval/embedder.js'
import { namesInputFiles, resolveInputFiles } from '../responses/input-files.js'
import { listPage } from './list-page.js'

/** OpenAI's bound on items added in one call. */
const MAX_ITEMS_PER_CALL = 20

export interface ConversationRoutesOptions {
  maxBodyBytes: number
  maxSessionIdLength: number
  now: () => number
  /** The session (its thread) was deleted: what belongs to it goes too (request traces). */
  onDeleted?: (tenant: string, sessionId: string) => Promise<void>
  /** The tenant's plan's quotas: a conversation's items are a session's messages, bounded alike. */
  quotas?: Pick<Quotas, 'checkNewSession' | 'sessionBounds'>
  /**
   * The caller's files, for an `input_file` item part naming one by id: the part is saved as the file's text, as a
   * response's input is sent (responses/input-files.ts). No model is named here, so `window` is the largest the
   * upstream lists; a later response on a model whose window cannot hold the turn leaves it out of its prompt.
   */
  files?: { texts: FileTexts; window: (authorization: string | undefined, cancel: Cancel) => Promise<Tokens> }
}

export function conversationRoutes(sessions: SessionStore, conversations: ConversationStore, o: ConversationRoutesOptions) {
  const bounded = (tenant: Tenant): { bounds?: SessionBounds } => (o.quotas ? { bounds: o.quotas.sessionBounds(tenant.plan) } : {})
  const idOf = (ctx: RequestContext): string => {
    const id = normalizeSessionId(ctx.params.id ?? '', 'conversation_id')
    if (id.length > o.maxSessionIdLength) throw invalidParam('conversation_id', `conversation ids are at most ${o.maxSessionIdLength} characters`)
    return id
  }

  /** The conversation as OpenAI shows it: its record, or a session made through chat (no metadata of its own). */
  const find = async (tenant: Tenant, id: string): Promise<ConversationRecord> => {
    const rec = await conversations.get(tenant.id, id)
    if (rec !== undefined) return rec
    const session = await sessions.get(tenant.id, id)
    if (session === undefined) throw gatewayError('not_found', { message: `Conversation with id '${id}' not found.` })
    return { id, createdAt: session.createdAt, metadata: {} }
  }

  const create: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    const body = await readJsonObject(ctx.req, o.maxBodyBytes)
    const metadata = metadataField(body.metadata)
    const messages = body.items === undefined || body.items === null ? [] : await conversationMessages(ctx, tenant, body.items, 'items')
    const id = newId('conv')
    // Checked before the record is made, so a refused create leaves nothing behind.
    if (messages.length > 0) await o.quotas?.checkNewSession(tenant, id)
    const rec = await conversations.ensure(tenant.id, { id, createdAt: o.now(), metadata })
    if (messages.length > 0) await sessions.appendExchange(tenant.id, rec.id, messages, bounded(tenant))
    sendJson(ctx.res, 200, wire(rec))
  }

  const get: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    sendJson(ctx.res, 200, wire(await find(tenant, idOf(ctx))))
  }

  const update: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    const id = idOf(ctx)
    const body = await readJsonObject(ctx.req, o.maxBodyBytes)
    const metadata = metadataField(body.metadata)
    const existing = await find(tenant, id)
    // A session made through chat gets its conversation record on its first metadata update.
    await conversations.ensure(tenant.id, existing)
    const rec = await conversations.update(tenant.id, id, metadata)
    sendJson(ctx.res, 200, wire(rec ?? { ...existing, metadata }))
  }

  const del: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    const id = idOf(ctx)
    // One thread: deleting the conversation deletes its session's messages too (unlike OpenAI, which keeps the items).
    const hadSession = await sessions.delete(tenant.id, id)
    const hadRecord = await conversations.delete(tenant.id, id)
    if (!hadSession && !hadRecord) throw gatewayError('not_found', { message: `Conversation with id '${id}' not found.` })
    await o.onDeleted?.(tenant.id, id)
    sendJson(ctx.res, 200, { id, object: 'conversation.deleted', deleted: true })
  }

  const listItems: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    const id = idOf(ctx)
    await find(tenant, id)
    const items = sessionItems(await sessions.history(tenant.id, id))
    sendJson(ctx.res, 200, listPage(items, ctx.query, itemId))
  }

  const addItems: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    const id = idOf(ctx)
    const body = await readJsonObject(ctx.req, o.maxBodyBytes)
    await find(tenant, id)
    const messages = await conversationMessages(ctx, tenant, body.items, 'items')
    if (messages.length === 0) throw invalidParam('items', 'items must hold at least one item')
    const saved = await sessions.appendExchange(tenant.id, id, messages, bounded(tenant))
    const data = sessionItems(saved)
    sendJson(ctx.res, 200, { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: false })
  }

  const getItem: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    const id = idOf(ctx)
    await find(tenant, id)
    const item = sessionItems(await sessions.history(tenant.id, id)).find((i) => i.id === ctx.params.item)
    if (item === undefined) throw gatewayError('not_found', { message: `Item with id '${ctx.params.item ?? ''}' not found.` })
    sendJson(ctx.res, 200, item)
  }

  /**
   * Removes the message the item belongs to (a function call's item removes the assistant message that made the
   * call: its results stay and are left out of prompts as unanswered, as packing leaves any orphan out). The
   * messages after it are written back in the same transaction, so positions stay contiguous.
   */
  const deleteItem: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    const id = idOf(ctx)
    const rec = await find(tenant, id)
    const history = await sessions.history(tenant.id, id)
    const at = history.findIndex((m) => sessionItems([m]).some((i) => i.id === ctx.params.item))
    const target = history[at]
    if (target === undefined) throw gatewayError('not_found', { message: `Item with id '${ctx.params.item ?? ''}' not found.` })
    await sessions.appendExchange(
      tenant.id,
      id,
      history.slice(at + 1).map((m) => m.message),
      { replaceFrom: target.seq, ...bounded(tenant) },
    )
    sendJson(ctx.res, 200, wire(rec))
  }

  /** Items sent to a conversation, as the messages its session keeps (user, assistant and tool turns). */
  const conversationMessages = async (ctx: RequestContext, tenant: Tenant, raw: unknown, param: string): Promise<ChatMessage[]> => {
    const items = conversationItems(raw, param)
    const files = o.files
    const resolved =
      files !== undefined && namesInputFiles(items)
        ? await resolveInputFiles(items, new FileQuoter(files.texts, tenant.id, await files.window(ctx.req.headers.authorization, ctx)), param)
        : items
    return itemsToMessages(resolved).filter((m) => m.role !== 'system' && m.role !== 'developer')
  }

  return { create, get, update, del, listItems, addItems, getItem, deleteItem }
}

/** A session's messages as conversation items, with ids derived from each message's position. */
export function sessionItems(messages: readonly StoredMessage[]): ResponseItem[] {
  const out: ResponseItem[] = []
  for (const m of messages) {
    let k = 0
    out.push(...messagesToItems([m.message], { newId: (prefix) => `${prefix}_s${m.seq}_${k++}`, status: 'completed' }))
  }
  return out
}

/** Items sent to a conversation, checked: what a conversation keeps, and at most OpenAI's number per call. */
function conversationItems(raw: unknown, param: string): ResponseItem[] {
  if (!Array.isArray(raw)) throw invalidParam(param, `${param} must be an array of items`)
  if (raw.length > MAX_ITEMS_PER_CALL) throw invalidParam(param, `${param} holds at most ${MAX_ITEMS_PER_CALL} items per call`)
  const items = normalizeInput(raw, { newId })
  for (const [i, item] of items.entries()) {
    if (item.type === 'item_reference') throw invalidParam(`${param}[${i}]`, 'item references cannot be added to a conversation')
    if (item.type === 'message' && (item.role === 'system' || item.role === 'developer')) {
      throw invalidParam(`${param}[${i}].role`, 'a conversation keeps user, assistant and tool items; send system text as `instructions`')
    }
  }
  return items
}

const itemId = (i: ResponseItem): string => i.id ?? ''

function wire(rec: ConversationRecord): Record<string, unknown> {
  return { id: rec.id, object: 'conversation', created_at: unixSeconds(rec.createdAt), metadata: rec.metadata }
}

