/**
 * /api/v1/requests: the caller's recent request traces (what the console's requests view shows). The list carries
 * the summary; one trace carries the messages exactly as sent upstream, each labelled with the part of the prompt it
 * was (system, kept history, recalled turns, excerpts with their files and scores, the request itself) and its
 * tokens, and what was left out and why.
 */
import { tenantOf } from '../http/tenant.js'
import { unixSeconds } from '../types.js'
import { gatewayError, invalidParam } from '../errors.js'
import { sendJson } from '../http/respond.js'
import type { Handler, RequestContext } from '../http/server.js'
import type { RequestTrace, TraceStore } from '../storage/interface.js'
import type { TraceRecorder } from '../traces/trace-recorder.js'
import type { Tenant } from '../types.js'


export function requestRoutes(traces: TraceStore, recorder: TraceRecorder) {
  const list: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    const raw = ctx.query.get('limit')
    let limit = 100
    if (raw !== null) {
      if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 1000) throw invalidParam('limit', 'limit must be a whole number from 1 to 1000')
      limit = Number(raw)
    }
    // What this process recorded and has not written yet is part of the answer (read your own requests).
    await recorder.flush()
    const data = (await traces.list(tenant.id, Math.min(limit, recorder.keep))).map(summary)
    sendJson(ctx.res, 200, { object: 'list', data, enabled: recorder.enabled })
  }

  const get: Handler = async (ctx) => {
    const tenant = tenantOf(ctx)
    const id = ctx.params.id ?? ''
    await recorder.flush()
    const t = await traces.get(tenant.id, id)
    if (t === undefined) throw gatewayError('not_found', { message: `No request trace with id ${JSON.stringify(id)}`, param: 'id' })
    sendJson(ctx.res, 200, { ...summary(t), parts: labelled(t), left_out: t.leftOut, recalled_messages: t.recalledMessages, window: t.window })
  }

  return { list, get }
}

function summary(t: RequestTrace): Record<string, unknown> {
  return {
    id: t.id,
    object: 'request',
    created_at: unixSeconds(t.createdAt),
    route: t.route,
    model: t.model,
    session_id: t.sessionId,
    stream: t.stream,
    status: t.status,
    duration_ms: Math.round(t.durationMs * 10) / 10,
    prompt_tokens: t.promptTokens,
    completion_tokens: t.completionTokens,
    cached_tokens: t.cachedTokens,
    total_tokens_packed: t.totalTokens,
    error: t.error,
  }
}

/** The trace's messages in order, each with the part of the prompt it was. */
export function labelled(t: RequestTrace): Array<Record<string, unknown>> {
  const { system, history, recall, excerpts } = t.parts
  const out: Array<Record<string, unknown>> = []
  const messages = JSON.parse(t.messagesJson) as unknown[]
  for (const [i, message] of messages.entries()) {
    let part = 'request'
    if (i < system) part = 'system'
    else if (i < system + history) part = 'history'
    else if (i < system + history + recall) part = 'recall'
    else if (i < system + history + recall + excerpts) part = 'excerpts'
    out.push({
      part,
      tokens: t.messageTokens[i] ?? null,
      message,
      ...(part === 'excerpts' ? { sources: t.sources } : {}),
      ...(part === 'recall' ? { recalled_messages: t.recalledMessages } : {}),
    })
  }
  return out
}

