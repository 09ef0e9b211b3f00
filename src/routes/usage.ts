/**
 * GET /api/v1/usage: the caller's own usage per model per UTC day (requests, input, output and cached tokens), from
 * the store; `from` and `to` (`YYYY-MM-DD`, inclusive) narrow it. Only the caller's tenant is ever read.
 */
import { gatewayError, invalidParam } from '../errors.js'
import { sendJson } from '../http/respond.js'
import type { Handler } from '../http/server.js'
import type { UsageStore } from '../storage/interface.js'
import type { UsageRecorder } from '../usage/usage-recorder.js'
import type { Quotas } from '../quotas/quotas.js'

/**
 * `quotas` (when given) adds the caller's plan and each quota's `limit` (null: none) and `used` beside the rows: one
 * listing of its files and one pass over its sessions per call (quotas/quotas.ts).
 */
export function usageHandler(usage: UsageStore, recorder: UsageRecorder, quotas?: Pick<Quotas, 'report'>): Handler {
  return async (ctx) => {
    const tenant = ctx.tenant
    if (tenant === undefined) throw gatewayError('missing_service_key')
    const from = day(ctx.query.get('from'), 'from')
    const to = day(ctx.query.get('to'), 'to')
    if (from !== undefined && to !== undefined && from > to) throw invalidParam('from', 'from must not be after to')
    // What this process has recorded and not yet written is part of the answer (read your own usage).
    await recorder.flush()
    const rows = await usage.list(tenant.id, { ...(from !== undefined ? { from } : {}), ...(to !== undefined ? { to } : {}) })
    const report = await quotas?.report(tenant)
    sendJson(ctx.res, 200, {
      ...(report ? { plan: report.plan, quotas: report.quotas } : {}),
      object: 'list',
      data: rows.map((r) => ({
        date: r.date,
        model: r.model,
        requests: r.requests,
        input_tokens: r.inputTokens,
        output_tokens: r.outputTokens,
        cached_tokens: r.cachedTokens,
      })),
    })
  }
}

function day(raw: string | null, param: string): string | undefined {
  if (raw === null) return undefined
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(raw)
  // A real calendar day: 2026-02-30 would read as March in Date and match nothing, which hides the typo.
  const d = m === null ? Number.NaN : Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))
  if (Number.isNaN(d) || new Date(d).toISOString().slice(0, 10) !== raw) {
    throw invalidParam(param, `${param} must be a UTC date as YYYY-MM-DD`)
  }
  return raw
}
