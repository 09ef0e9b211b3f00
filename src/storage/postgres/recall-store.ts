/**
 * Long-term recall's records in PostgreSQL (the RecallStore contract): each session's namespace in the tables the
 * knowledge base uses (`vectors`, `index_meta`, `index_log`: index-records.ts), `recall_docs` (namespace, seq → label
 * and the rendered line's tokens) and `recall_owners` (namespace → tenant, session id). Written by PgSessionStore's
 * hooks in the save's and the delete's own transaction (after the session row lock, then the namespace's), so a turn
 * is indexed exactly when it is saved and its session's delete takes every record with it; every replica's loaded
 * recall index catches up from the namespace's change log before it searches.
 */
import { startsOver } from '../index-meta.js'
import type { AfterCommit, RecallIndexer, RecallPrepared, RecallStore, RecallWrite, StoredMessage } from '../interface.js'
import { indexable } from '../recall-indexable.js'
import type { Tokens } from '../../types.js'
import { addInTxn, lockNamespace, PgIndexRecords, removeInTxn } from './index-records.js'
import type { Pg, Queryable } from './pool.js'
import type { PgSessionStore } from './session-store.js'

export class PgRecallStore implements RecallStore {
  readonly #pg: Pg
  readonly #sessions: PgSessionStore
  readonly index: PgIndexRecords

  constructor(pg: Pg, sessions: PgSessionStore) {
    this.#pg = pg
    this.#sessions = sessions
    this.index = new PgIndexRecords(pg)
  }

  async owner(ns: string): Promise<{ tenant: string; sessionId: string } | undefined> {
    const rows = await this.#pg.query<{ tenant: string; session_id: string }>(
      'recall_owner',
      'SELECT tenant, session_id FROM recall_owners WHERE namespace = $1',
      [ns],
    )
    const r = rows[0]
    return r === undefined ? undefined : { tenant: r.tenant, sessionId: r.session_id }
  }

  async labels(ns: string): Promise<Map<number, number>> {
    const rows = await this.#pg.query<{ seq: string; label: number }>('recall_labels', 'SELECT seq, label FROM recall_docs WHERE namespace = $1 ORDER BY seq', [ns])
    return new Map(rows.map((r) => [Number(r.seq), r.label]))
  }

  async lines(ns: string, seqs: readonly number[]): Promise<Map<number, Tokens>> {
    if (seqs.length === 0) return new Map()
    const rows = await this.#pg.query<{ seq: string; line: number }>(
      'recall_lines',
      'SELECT seq, line FROM recall_docs WHERE namespace = $1 AND seq = ANY($2::bigint[])',
      [ns, seqs],
    )
    return new Map(rows.map((r) => [Number(r.seq), r.line]))
  }

  messagesAt(tenant: string, sessionId: string, seqs: Iterable<number>): Promise<Map<number, StoredMessage>> {
    return this.#sessions.messagesAt(tenant, sessionId, seqs)
  }

  attach(indexer: RecallIndexer): void {
    this.#sessions.onAppendPrepared<RecallPrepared | undefined>(
      (_tenant, _sessionId, messages) => indexer.prepare(messages),
      async (c, tenant, sessionId, saved, pruned, prepared) => {
        const write = await this.#write(c, indexer, tenant, sessionId, saved, pruned, prepared)
        return () => indexer.saved(write)
      },
    )
    this.#sessions.onDelete(async (c, tenant, sessionId): Promise<AfterCommit> => {
      const ns = indexer.namespaceOf(tenant, sessionId)
      await lockNamespace(c, ns)
      await drop(c, ns)
      indexer.deleted(ns)
      return () => indexer.deleted(ns)
    })
  }

  /** Inside the save's transaction, which holds the session's row lock. */
  async #write(
    c: Queryable,
    indexer: RecallIndexer,
    tenant: string,
    sessionId: string,
    saved: StoredMessage[],
    pruned: Pick<StoredMessage, 'seq'>[],
    prepared: RecallPrepared | undefined,
  ): Promise<RecallWrite> {
    const ns = indexer.namespaceOf(tenant, sessionId)
    const docs = prepared === undefined ? [] : indexable(saved, pruned, prepared)
    const write: RecallWrite = { namespace: ns, dropped: false, gone: pruned.map((m) => m.seq) }
    if (docs.length === 0 && pruned.length === 0) return write
    let before = await lockNamespace(c, ns)
    if (prepared !== undefined && startsOver(before, indexer.embedderId, prepared.vectors[0]?.length ?? 0)) {
      await drop(c, ns)
      before = undefined
      write.dropped = true
    } else if (pruned.length > 0) {
      const gone = await c.query<{ label: number }>('DELETE FROM recall_docs WHERE namespace = $1 AND seq = ANY($2::bigint[]) RETURNING label', [
        ns,
        write.gone,
      ])
      if (gone.rows.length > 0) {
        write.removed = await removeInTxn(c, ns, before, gone.rows.map((r) => r.label))
        before = write.removed.meta
      }
    }
    if (docs.length > 0) {
      await c.query('INSERT INTO recall_owners (namespace, tenant, session_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [ns, tenant, sessionId])
      const change = await addInTxn(c, ns, before, docs.map((d) => d.vector), indexer.embedderId, docs.map((d) => [d.m.seq]))
      await c.query('INSERT INTO recall_docs (namespace, seq, label, line) SELECT $1, * FROM unnest($2::bigint[], $3::int[], $4::int[])', [
        ns,
        docs.map((d) => d.m.seq),
        change.labels,
        docs.map((d) => d.line),
      ])
      write.added = { change, docs: docs.map((d, i) => ({ seq: d.m.seq, label: change.labels[i] as number, text: d.m.text, vector: d.vector })) }
    }
    return write
  }
}

/** Every record of a recall namespace (the caller holds its lock). */
async function drop(c: Queryable, ns: string): Promise<void> {
  for (const table of ['vectors', 'index_log', 'index_meta', 'recall_docs', 'recall_owners'])
    await c.query(`DELETE FROM ${table} WHERE namespace = $1`, [ns])
}
