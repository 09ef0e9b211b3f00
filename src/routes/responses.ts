/**
 * /api/v1/responses/{id}: retrieve, delete, list input items, cancel. Only what `store: true` kept exists here, and
 * only for the tenant that made it: anything else is OpenAI's 404.
 */
import { tenantOf } from '../http/tenant.js'
import { unixSeconds } from '../types.js'
import { gatewayError, invalidParam } from '../errors.js'
import { sendJson } from '../http/respond.js'
import type { Handler, RequestContext } from '../http/server.js'
import { responseObject } from '../responses/output.js'
import type { ResponseStore, StoredItem, StoredResponse } from '../storage/interface.js'
import type { Tenant } from '../types.js'
import { listPage } from './list-page.js'


export function responseRoutes(responses: ResponseStore) {
  const load = async (ctx: RequestContext): Promise<{ tenant: Tenant; rec: StoredResponse }> => {
    const tenant = tenantOf(ctx)
    const id = ctx.params.id ?? ''
    const rec = await responses.get(tenant.id, id)
    if (rec === undefined) throw gatewayError('not_found', { message: `Response with id '${id}' not found.` })
    return { tenant, rec }
  }

  const get: Handler = async (ctx) => {
    const { rec } = await load(ctx)
    sendJson(ctx.res, 200, wireResponse(rec))
  }

  const del: Handler = async (ctx) => {
    const { tenant, rec } = await load(ctx)
    await responses.delete(tenant.id, rec.id)
    sendJson(ctx.res, 200, { id: rec.id, object: 'response', deleted: true })
  }

  /** This response's own input items (references resolved), newest first by default, as OpenAI lists them. */
  const inputItems: Handler = async (ctx) => {
    const { rec } = await load(ctx)
    sendJson(ctx.res, 200, listPage<StoredItem>(rec.input.map(listedItem), ctx.query, (i) => i.id))
  }

  const cancel: Handler = async (ctx) => {
    await load(ctx)
    throw invalidParam('id', 'Only responses created with background=true can be cancelled; recallgate runs none in the background.')
  }

  return { get, del, inputItems, cancel }
}

/** Item types whose `status` OpenAI fills in when it lists items (optional when a client sends them). */
const LISTED_WITH_STATUS: ReadonlySet<string> = new Set(['message', 'function_call', 'function_call_output', 'reasoning'])

/** An input item as listed: with a status, `completed` unless the client sent one (the item was whole when it ran). */
function listedItem(item: StoredItem): StoredItem {
  return LISTED_WITH_STATUS.has(item.type) && (item.status === undefined || item.status === null) ? { ...item, status: 'completed' } : item
}

/** A stored response as the Response object the SDKs parse. */
export function wireResponse(rec: StoredResponse): Record<string, unknown> {
  return responseObject({
    id: rec.id,
    createdAt: unixSeconds(rec.createdAt),
    model: rec.model,
    status: rec.status as Parameters<typeof responseObject>[0]['status'],
    output: [...rec.output],
    usage: rec.usage as Parameters<typeof responseObject>[0]['usage'],
    error: rec.error,
    incompleteDetails: rec.incompleteDetails,
    echo: rec.echo,
    previousResponseId: rec.previousResponseId,
    conversationId: rec.conversationId,
    completedAt: rec.completedAt === null ? null : unixSeconds(rec.completedAt),
  })
}

