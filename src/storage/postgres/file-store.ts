/**
 * The knowledge base in PostgreSQL (`files`, `chunks`, and the namespace records of index-records.ts), with LMDB's
 * guarantees (file-repo.ts): a file is inserted or deleted with its chunks, vectors, namespace meta and change log
 * entry in one transaction that resolves after COMMIT, so a replica that reads the new version finds every row of it;
 * writers to one tenant's namespace queue on its lock, from any replica. Tenant first in every key and every WHERE.
 *
 * A chunk's record (`jsonb`) is the ChunkRow, its label included; a file's is the public file object.
 */
import type { FileChunk, FileRow, FileStore, IndexChange, InsertFileOptions, ChunkRow } from '../interface.js'
import { storableId } from '../ids.js'
import { addInTxn, lockNamespace, PAGE_ROWS, PgIndexRecords, removeInTxn } from './index-records.js'
import type { Pg, Row } from './pool.js'
import { jsonb } from './jsonb.js'

interface ChunkRecordRow extends Row {
  file_id: string
  chunk_index: number
  record: ChunkRow
}

export class PgFileStore implements FileStore {
  readonly #pg: Pg
  readonly index: PgIndexRecords

  constructor(pg: Pg) {
    this.#pg = pg
    this.index = new PgIndexRecords(pg)
  }

  async getFile(tenant: string, id: string): Promise<FileRow | undefined> {
    if (!storableId(id)) return undefined
    const rows = await this.#pg.query('file_get', 'SELECT record FROM files WHERE tenant = $1 AND file_id = $2', [tenant, id])
    return rows[0]?.record as FileRow | undefined
  }

  async listFiles(tenant: string): Promise<FileRow[]> {
    const rows = await this.#pg.query('file_list', 'SELECT record FROM files WHERE tenant = $1 ORDER BY created_at, file_id', [tenant])
    return rows.map((r) => r.record as FileRow)
  }

  async chunksAt(tenant: string, refs: ReadonlyArray<readonly [fileId: string, index: number]>): Promise<Array<FileChunk | undefined>> {
    if (refs.length === 0) return []
    const rows = await this.#pg.query<ChunkRecordRow & { file: FileRow }>(
      'chunks_at',
      `SELECT c.file_id, c.chunk_index, c.record, f.record AS file
       FROM unnest($2::text[], $3::int[]) AS r(file_id, chunk_index)
       JOIN chunks c ON c.tenant = $1 AND c.file_id = r.file_id AND c.chunk_index = r.chunk_index
       JOIN files f ON f.tenant = $1 AND f.file_id = r.file_id`,
      [tenant, refs.map((r) => r[0]), refs.map((r) => r[1])],
    )
    const found = new Map<string, FileChunk>()
    for (const r of rows) found.set(`${r.file_id}\u0000${r.chunk_index}`, { fileId: r.file_id, index: r.chunk_index, chunk: r.record, file: r.file })
    return refs.map(([fileId, index]) => found.get(`${fileId}\u0000${index}`))
  }

  /**
   * Page by page in key order, each page's files read once. Pages are separate statements: a change committed between
   * two of them moves the namespace's version, which the loading index checks afterwards (and then loads again).
   */
  async *tenantChunks(tenant: string): AsyncIterable<FileChunk> {
    const files = new Map<string, FileRow>()
    let after: [string, number] | undefined
    for (;;) {
      const rows = await this.#pg.query<ChunkRecordRow>(
        'tenant_chunks',
        `SELECT file_id, chunk_index, record FROM chunks
         WHERE tenant = $1 AND ($2::text IS NULL OR (file_id, chunk_index) > ($2, $3))
         ORDER BY file_id, chunk_index LIMIT $4`,
        [tenant, after?.[0] ?? null, after?.[1] ?? 0, PAGE_ROWS],
      )
      const unknown = [...new Set(rows.map((r) => r.file_id))].filter((id) => !files.has(id))
      if (unknown.length > 0) {
        const found = await this.#pg.query<{ file_id: string; record: FileRow }>(
          'tenant_files',
          'SELECT file_id, record FROM files WHERE tenant = $1 AND file_id = ANY($2::text[])',
          [tenant, unknown],
        )
        for (const f of found) files.set(f.file_id, f.record)
      }
      for (const r of rows) {
        const file = files.get(r.file_id)
        if (file !== undefined) yield { fileId: r.file_id, index: r.chunk_index, chunk: r.record, file }
      }
      const last = rows.at(-1)
      if (last === undefined || rows.length < PAGE_ROWS) return
      after = [last.file_id, last.chunk_index]
      // Files of earlier pages are not asked for again (keys are in file order): keep the map to the current one.
      for (const id of files.keys()) if (id !== last.file_id) files.delete(id)
    }
  }

  async insertFile(opts: InsertFileOptions): Promise<IndexChange> {
    const { tenant, file, chunks, vectors } = opts
    if (vectors.length !== chunks.length) throw new RangeError('insertFile: one vector per chunk')
    return this.#pg.transaction('file_insert', async (c) => {
      const before = await lockNamespace(c, opts.namespace)
      opts.check(before, vectors.length)
      const change = await addInTxn(c, opts.namespace, before, vectors, opts.embedderId, chunks.map((_, i) => [file.id, i]))
      // Ids are random; a repeat (only possible with an injected random source) must not overwrite a file.
      const ins = await c.query(
        'INSERT INTO files (tenant, file_id, record, created_at) VALUES ($1, $2, $3::jsonb, $4) ON CONFLICT DO NOTHING',
        [tenant, file.id, jsonb(file), file.created_at],
      )
      if (ins.rowCount !== 1) throw new Error(`insertFile: ${file.id} already exists`)
      await c.query(
        `INSERT INTO chunks (tenant, file_id, chunk_index, record)
         SELECT $1, $2, n - 1, r::jsonb FROM unnest($3::text[]) WITH ORDINALITY AS x(r, n)`,
        [tenant, file.id, chunks.map((ch, i) => jsonb({ ...ch, label: change.labels[i] as number } satisfies ChunkRow))],
      )
      opts.onChange?.(change)
      return change
    })
  }

  async deleteFile(tenant: string, namespace: string, id: string, onChange?: (change: IndexChange) => void): Promise<IndexChange | undefined> {
    if (!storableId(id)) return undefined
    return this.#pg.transaction('file_delete', async (c) => {
      const before = await lockNamespace(c, namespace)
      const gone = await c.query<{ label: number }>(
        `DELETE FROM chunks WHERE tenant = $1 AND file_id = $2 RETURNING (record->>'label')::int AS label`,
        [tenant, id],
      )
      const file = await c.query('DELETE FROM files WHERE tenant = $1 AND file_id = $2', [tenant, id])
      if (file.rowCount !== 1) return undefined
      const change = await removeInTxn(c, namespace, before, gone.rows.map((r) => r.label))
      onChange?.(change)
      return change
    })
  }
}
