/**
 * Index namespaces in PostgreSQL (`index_meta`, `vectors`, `index_log`): the committed state every replica's
 * in-memory indexes are built from and catch up from, the same records as LMDB's IndexRecords (file-repo.ts).
 *
 * Writers to one namespace queue on a transaction-level advisory lock on its name (taken before its meta is read, so
 * two replicas never allocate the same labels or write the same version); readers take no lock: a statement sees the
 * meta, vectors and log of the same committed transactions (read committed), and the version tells what it saw.
 */
import { INDEX_LOG_KEEP, type IndexChange, type IndexLogEntry, type IndexMeta, type IndexRecordsReader } from '../interface.js'
import { decodeVector, encodeVector, metaAfterAdd, metaAfterRemove } from '../index-meta.js'
import { prepared, type Pg, type Queryable } from './pool.js'

/** Every search's read of the namespace's committed state (a primary-key read): prepared once per connection. */
// As text, parsed here: the held connection's read takes one text value (pool.ts `readText`).
const META = prepared('index_meta_text', 'SELECT meta::text AS value FROM index_meta WHERE namespace = $1')

/** Rows per page when a whole namespace is read (an index load): a few MB of vectors per round trip. */
export const PAGE_ROWS = 2_000

/**
 * The first key of the two-key advisory locks on namespaces. The single-bigint key space the migrations lock in is a
 * separate one (PostgreSQL keeps the two apart), so this only has to differ from other two-key users: there are none.
 */
const NAMESPACE_LOCK_CLASS = 23

export class PgIndexRecords implements IndexRecordsReader {
  readonly #pg: Pg

  constructor(pg: Pg) {
    this.#pg = pg
  }

  async meta(namespace: string): Promise<IndexMeta | undefined> {
    const text = await this.#pg.readText('index_meta', META, namespace)
    return typeof text === 'string' ? (JSON.parse(text) as IndexMeta) : undefined
  }

  async namespaces(prefix: string): Promise<string[]> {
    const rows = await this.#pg.query<{ namespace: string }>(
      'index_namespaces',
      'SELECT namespace FROM index_meta WHERE starts_with(namespace, $1) ORDER BY namespace',
      [prefix],
    )
    return rows.map((r) => r.namespace)
  }

  async *vectors(namespace: string): AsyncIterable<{ label: number; vector: Float32Array }> {
    for (let after = -1; ; ) {
      const rows = await this.#pg.query<{ label: number; vector: Buffer }>(
        'index_vectors',
        'SELECT label, vector FROM vectors WHERE namespace = $1 AND label > $2 ORDER BY label LIMIT $3',
        [namespace, after, PAGE_ROWS],
      )
      for (const r of rows) yield { label: r.label, vector: decodeVector(r.vector) }
      if (rows.length < PAGE_ROWS) return
      after = (rows.at(-1) as { label: number }).label
    }
  }

  async vectorsAt(namespace: string, labels: readonly number[]): Promise<Map<number, Float32Array>> {
    const out = new Map<number, Float32Array>()
    if (labels.length === 0) return out
    const rows = await this.#pg.query<{ label: number; vector: Buffer }>(
      'index_vectors_at',
      'SELECT label, vector FROM vectors WHERE namespace = $1 AND label = ANY($2::int[])',
      [namespace, labels],
    )
    for (const r of rows) out.set(r.label, decodeVector(r.vector))
    return out
  }

  async changes(namespace: string, from: number, to: number): Promise<IndexLogEntry[] | undefined> {
    if (from > to) return []
    const rows = await this.#pg.query<{ change: IndexLogEntry }>(
      'index_changes',
      'SELECT change FROM index_log WHERE namespace = $1 AND version BETWEEN $2 AND $3 ORDER BY version',
      [namespace, from, to],
    )
    // Versions are contiguous; any missing one was cut from the kept window.
    return rows.length === to - from + 1 ? rows.map((r) => r.change) : undefined
  }
}

/** Inside a transaction: queue behind other writers to `namespace` (any replica), then read its meta. */
export async function lockNamespace(c: Queryable, namespace: string): Promise<IndexMeta | undefined> {
  await c.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [NAMESPACE_LOCK_CLASS, namespace])
  const res = await c.query<{ meta: IndexMeta }>('SELECT meta FROM index_meta WHERE namespace = $1', [namespace])
  return res.rows[0]?.meta
}

/** Inside the transaction that locked `namespace`: store `vectors` under new labels, bump the meta, log the change. */
export async function addInTxn(
  c: Queryable,
  namespace: string,
  before: IndexMeta | undefined,
  vectors: readonly Float32Array[],
  embedderId: string,
  refs: ReadonlyArray<readonly (string | number)[]>,
): Promise<IndexChange> {
  const first = before?.nextLabel ?? 0
  const labels = vectors.map((_, i) => first + i)
  if (vectors.length > 0)
    await c.query('INSERT INTO vectors (namespace, label, vector) SELECT $1, * FROM unnest($2::int[], $3::bytea[])', [
      namespace,
      labels,
      vectors.map(encodeVector),
    ])
  const meta = metaAfterAdd(before, vectors.length, vectors[0]?.length ?? 0, embedderId)
  await writeMeta(c, namespace, meta, { add: labels.map((l, i) => [l, [...(refs[i] ?? [])]]) })
  return { fromVersion: before?.version ?? 0, meta, labels }
}

/** Inside the transaction that locked `namespace`: delete `labels`' vectors, bump the meta, log the change. */
export async function removeInTxn(c: Queryable, namespace: string, before: IndexMeta | undefined, labels: readonly number[]): Promise<IndexChange> {
  if (labels.length > 0) await c.query('DELETE FROM vectors WHERE namespace = $1 AND label = ANY($2::int[])', [namespace, labels])
  const meta = metaAfterRemove(before, labels.length)
  await writeMeta(c, namespace, meta, { remove: [...labels] })
  return { fromVersion: before?.version ?? 0, meta, labels: [...labels] }
}

/**
 * The new meta and its log entry, and the entry that fell out of the kept window forgotten: one statement (a round
 * trip inside the writer's transaction, which holds the namespace's lock), its parts touching different rows. The
 * entry is deleted by its key, not as a range from the namespace's first version (versions grow by one per write, so
 * one entry leaves the window per write): a range walks every deleted and not yet vacuumed entry before it (migration 7,
 * append-exchange-sql.ts).
 */
async function writeMeta(c: Queryable, namespace: string, meta: IndexMeta, entry: IndexLogEntry): Promise<void> {
  await c.query(
    `WITH m AS (
       INSERT INTO index_meta (namespace, meta) VALUES ($1, $2::jsonb) ON CONFLICT (namespace) DO UPDATE SET meta = EXCLUDED.meta
     ), l AS (
       INSERT INTO index_log (namespace, version, change) VALUES ($1, $3, $4::jsonb)
     )
     DELETE FROM index_log WHERE namespace = $1 AND version = $5`,
    [namespace, JSON.stringify(meta), meta.version, JSON.stringify(entry), meta.version - INDEX_LOG_KEEP],
  )
}
