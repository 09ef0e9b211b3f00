/** /api/v1/sessions: list, read and delete a tenant's sessions. Times on the wire are unix seconds, as in OpenAI's API. */
import { tenantOf } from '../http/tenant.js'
import { unixSeconds } from '../types.js'
import { gatewayError, invalidParam } from '../errors.js'
import { normalizeSessionId } from '../http/session-id.js'
import { sendJson } from '../http/respond.js'
import type { Handler, RequestContext } from '../http/server.js'
import type { SessionStore } from '../storage/interface.js'
import type { Tenant } from '../types.js'



function sessionId(ctx: RequestContext, maxLength: number): string {
  // Normalised as chat requests normalise it (NFC, trimmed), so the id a user types finds the session it named.
  const id = normalizeSessionId(ctx.params.id ?? '', 'id')
  if (id.length > maxLength) throw invalidParam('id', `session id must be at most ${maxLength} characters`)
  return id
}

export function sessionRoutes(
  sessions: SessionStore,
  opts: { maxSessionIdLength: number; onDeleted?: (tenant: string, sessionId: string) => Promise<void> },
) {
  const list: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    const rawLimit = ctx.query.get('limit')
    let limit = 20
    if (rawLimit !== null) {
      if (!/^\d+$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > 100) {
        throw invalidParam('limit', 'limit must be a whole number from 1 to 100')
      }
      limit = Number(rawLimit)
    }
    const after = ctx.query.get('after') ?? undefined
    // `after` is a session id; a longer one cannot name any session (and would not fit an LMDB key).
    if (after !== undefined && after.length > opts.maxSessionIdLength) {
      throw invalidParam('after', `after must be a session id of at most ${opts.maxSessionIdLength} characters`)
    }
    const page = await sessions.list(tenant.id, { limit, after })
    sendJson(ctx.res, 200, {
      object: 'list',
      data: page.data.map((s) => ({
        id: s.id,
        object: 'session',
        created_at: unixSeconds(s.createdAt),
        updated_at: unixSeconds(s.updatedAt),
        message_count: s.messageCount,
      })),
      first_id: page.data[0]?.id ?? null,
      last_id: page.data.at(-1)?.id ?? null,
      has_more: page.hasMore,
    })
  }

  const get: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    const id = sessionId(ctx, opts.maxSessionIdLength)
    const info = await sessions.get(tenant.id, id)
    if (info === undefined) throw gatewayError('not_found', { message: `No session with id ${JSON.stringify(id)}`, param: 'id' })
    const messages = await sessions.history(tenant.id, id)
    sendJson(ctx.res, 200, {
      id,
      object: 'session',
      // Each message as the client will see it next time (tool calls, parts, reasoning), plus when it was saved.
      messages: messages.map((m) => ({ ...m.message, created_at: unixSeconds(m.createdAt) })),
      created_at: unixSeconds(info.createdAt),
      updated_at: unixSeconds(info.updatedAt),
    })
  }

  const del: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    const id = sessionId(ctx, opts.maxSessionIdLength)
    const existed = await sessions.delete(tenant.id, id)
    if (!existed) throw gatewayError('not_found', { message: `No session with id ${JSON.stringify(id)}`, param: 'id' })
    await opts.onDeleted?.(tenant.id, id)
    sendJson(ctx.res, 200, { id, object: 'session', deleted: true })
  }

  return { list, get, del }
}
