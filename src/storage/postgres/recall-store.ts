/**
 * Long-term recall's records in PostgreSQL (the RecallStore contract): each session's namespace in the tables the
 * knowledge base uses (`vectors`, `index_meta`, `index_log`: index-records.ts), `recall_docs` (namespace, seq → label
 * and the rendered line's tokens) and `recall_owners` (namespace → tenant, session id). Written in the save's own
 * statement (recallgate_append_exchange, append-exchange-sql.ts: after the session row lock, then the namespace's;
 * this module gives it its arguments) and by a hook in the delete's transaction, so a turn is indexed exactly when it
 * is saved and its session's delete takes every record with it; every replica's loaded recall index catches up from
 * the namespace's change log before it searches.
 */
import { encodeVector, newEpoch } from '../index-meta.js'
import type { AfterCommit, RecallIndexer, RecallPrepared, RecallStore, RecallWrite, StoredMessage } from '../interface.js'
import { indexable } from '../recall-indexable.js'
import { isZeroVector } from '../../retrieval/zero-vector.js'
import type { Tokens } from '../../types.js'
import { lockNamespace, PgIndexRecords } from './index-records.js'
import type { Pg, Queryable } from './pool.js'
import type { PgRecallResult, PgSessionStore } from './session-store.js'

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
    this.#sessions.onSave<RecallPrepared | undefined>({
      prepare: (_tenant, _sessionId, messages) => indexer.prepare(messages),
      args: (tenant, sessionId, prepared) => ({
        namespace: indexer.namespaceOf(tenant, sessionId),
        embedderId: indexer.embedderId,
        dimension: prepared?.vectors[0]?.length ?? 0,
        epoch: newEpoch(),
        // A zero vector has no index terms (the cosine graph cannot place it): not indexed (recall-indexable.ts).
        vectors: prepared === undefined ? null : prepared.vectors.map((v) => (isZeroVector(v) ? null : encodeVector(v))),
        lines: prepared?.lines ?? null,
      }),
      saved: (args, result, saved, pruned, prepared) => indexer.saved(recallWrite(args.namespace, result, saved, pruned, prepared)),
    })
    this.#sessions.onDelete(async (c, tenant, sessionId): Promise<AfterCommit> => {
      const ns = indexer.namespaceOf(tenant, sessionId)
      await lockNamespace(c, ns)
      await drop(c, ns)
      indexer.deleted(ns)
      return () => indexer.deleted(ns)
    })
  }
}

/**
 * What a save's statement did to the namespace, for the loaded index to follow: the added docs are those
 * `indexable` picks, in order, which is how the statement picked them (a new message with a vector, not pruned at
 * once). Were the two ever to disagree, the loaded index is dropped instead (it reloads from what was committed).
 */
function recallWrite(
  ns: string,
  r: PgRecallResult,
  saved: StoredMessage[],
  pruned: Pick<StoredMessage, 'seq'>[],
  prepared: RecallPrepared | undefined,
): RecallWrite {
  const write: RecallWrite = { namespace: ns, dropped: r.dropped, gone: pruned.map((m) => m.seq) }
  if (r.removed !== null) write.removed = r.removed
  if (r.added !== null) {
    const docs = prepared === undefined ? [] : indexable(saved, pruned, prepared)
    if (docs.length !== r.added.count) return { namespace: ns, dropped: true, gone: write.gone }
    const { fromVersion, meta, firstLabel } = r.added
    const labels = docs.map((_, i) => firstLabel + i)
    write.added = {
      change: { fromVersion, meta, labels },
      docs: docs.map((d, i) => ({ seq: d.m.seq, label: labels[i] as number, text: d.m.text, vector: d.vector })),
    }
  }
  return write
}

/** Every record of a recall namespace (the caller holds its lock). */
async function drop(c: Queryable, ns: string): Promise<void> {
  for (const table of ['vectors', 'index_log', 'index_meta', 'recall_docs', 'recall_owners'])
    await c.query(`DELETE FROM ${table} WHERE namespace = $1`, [ns])
}
