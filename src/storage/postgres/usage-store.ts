/**
 * Usage in PostgreSQL (`usage`: tenant, day, model → requests and token sums). A batch is one upsert statement over
 * arrays (`unnest`), its entries merged per row first: ON CONFLICT cannot touch the same row twice in one statement.
 */
import type { UsageEntry, UsageRow, UsageStore } from '../interface.js'
import type { Pg, Row } from './pool.js'

export class PgUsageStore implements UsageStore {
  readonly #pg: Pg

  constructor(pg: Pg) {
    this.#pg = pg
  }

  async add(entries: readonly UsageEntry[]): Promise<void> {
    const merged = new Map<string, { tenant: string; date: string; model: string; r: number; i: number; o: number; c: number }>()
    for (const e of entries) {
      const k = `${e.tenant}\0${e.date}\0${e.model}`
      const m = merged.get(k) ?? { tenant: e.tenant, date: e.date, model: e.model, r: 0, i: 0, o: 0, c: 0 }
      m.r += e.requests
      m.i += e.inputTokens
      m.o += e.outputTokens
      m.c += e.cachedTokens
      merged.set(k, m)
    }
    if (merged.size === 0) return
    const rows = [...merged.values()]
    await this.#pg.query(
      'usage_add',
      `INSERT INTO usage (tenant, day, model, requests, input_tokens, output_tokens, cached_tokens)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[])
       ON CONFLICT (tenant, day, model) DO UPDATE SET
         requests = usage.requests + EXCLUDED.requests,
         input_tokens = usage.input_tokens + EXCLUDED.input_tokens,
         output_tokens = usage.output_tokens + EXCLUDED.output_tokens,
         cached_tokens = usage.cached_tokens + EXCLUDED.cached_tokens`,
      [
        rows.map((r) => r.tenant),
        rows.map((r) => r.date),
        rows.map((r) => r.model),
        rows.map((r) => r.r),
        rows.map((r) => r.i),
        rows.map((r) => r.o),
        rows.map((r) => r.c),
      ],
    )
  }

  async list(tenant: string, range: { from?: string; to?: string }): Promise<UsageRow[]> {
    const rows = await this.#pg.query(
      'usage_list',
      `SELECT day, model, requests, input_tokens, output_tokens, cached_tokens FROM usage
       WHERE tenant = $1 AND ($2::text IS NULL OR day >= $2) AND ($3::text IS NULL OR day <= $3)
       ORDER BY day, model`,
      [tenant, range.from ?? null, range.to ?? null],
    )
    return rows.map(toRow)
  }
}

function toRow(r: Row): UsageRow {
  if (typeof r.day !== 'string' || typeof r.model !== 'string') throw new Error('corrupt usage row')
  return {
    date: r.day,
    model: r.model,
    requests: Number(r.requests),
    inputTokens: Number(r.input_tokens),
    outputTokens: Number(r.output_tokens),
    cachedTokens: Number(r.cached_tokens),
  }
}
