/**
 * Request traces in PostgreSQL (`traces`: tenant, created_at, id → the trace as JSON text), so a tenant's requests are
 * listed the same through every replica. A batch is one transaction: one insert over arrays (`unnest`), then each of
 * its tenants' rows beyond the newest `keep` cut in one statement (a walk of `keep` index entries per tenant).
 *
 * Traces are diagnostics (trace-recorder.ts): a batch commits without waiting for the WAL flush, as LMDB's trace writes
 * resolve at commit, not at the flush. A crash may lose the last batches, never part of one, and never anything else:
 * a later durable commit (an exchange's) flushes the WAL up to itself, batches before it included.
 *
 * The trace is `text`, not `jsonb`: nothing queries inside it, and jsonb refuses the `\u0000` escape a message may
 * hold, which would lose the whole batch. Tenant first in every key and every WHERE.
 */
import { storableId } from '../ids.js'
import type { RequestTrace, TraceStore } from '../interface.js'
import type { Pg } from './pool.js'

export class PgTraceStore implements TraceStore {
  readonly #pg: Pg

  constructor(pg: Pg) {
    this.#pg = pg
  }

  async append(traces: readonly { tenant: string; trace: RequestTrace }[], keep: number): Promise<void> {
    if (traces.length === 0) return
    await this.#pg.transaction('trace_append', async (c) => {
      await c.query(
        `INSERT INTO traces (tenant, created_at, id, session_id, trace)
         SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[]) ON CONFLICT DO NOTHING`,
        [
          traces.map((t) => t.tenant),
          traces.map((t) => t.trace.createdAt),
          traces.map((t) => t.trace.id),
          traces.map((t) => t.trace.sessionId),
          traces.map((t) => JSON.stringify(t.trace)),
        ],
      )
      await c.query(
        `DELETE FROM traces t USING (
           SELECT x.tenant, k.created_at, k.id FROM unnest($1::text[]) AS x(tenant)
           CROSS JOIN LATERAL (
             SELECT created_at, id FROM traces WHERE tenant = x.tenant ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT 1
           ) k
         ) cut
         WHERE t.tenant = cut.tenant AND (t.created_at, t.id) <= (cut.created_at, cut.id)`,
        [[...new Set(traces.map((t) => t.tenant))], keep],
      )
      // Diagnostics, not durable (trace-recorder.ts): committed without waiting for the WAL flush, as LMDB commits
      // them, so a batch's COMMIT is not a second fsync beside the exchanges' own on every FLUSH_MS.
    }, { durable: false })
  }

  async list(tenant: string, limit: number): Promise<RequestTrace[]> {
    const rows = await this.#pg.query<{ trace: string }>(
      'trace_list',
      'SELECT trace FROM traces WHERE tenant = $1 ORDER BY created_at DESC, id DESC LIMIT $2',
      [tenant, Math.max(0, Math.floor(limit))],
    )
    return rows.map((r) => JSON.parse(r.trace) as RequestTrace)
  }

  async get(tenant: string, id: string): Promise<RequestTrace | undefined> {
    if (!storableId(id)) return undefined
    const rows = await this.#pg.query<{ trace: string }>(
      'trace_get',
      'SELECT trace FROM traces WHERE tenant = $1 AND id = $2 ORDER BY created_at LIMIT 1',
      [tenant, id],
    )
    const r = rows[0]
    return r === undefined ? undefined : (JSON.parse(r.trace) as RequestTrace)
  }

  async deleteSession(tenant: string, sessionId: string): Promise<number> {
    const rows = await this.#pg.query('trace_delete_session', 'DELETE FROM traces WHERE tenant = $1 AND session_id = $2 RETURNING 1 AS gone', [
      tenant,
      sessionId,
    ])
    return rows.length
  }
}
