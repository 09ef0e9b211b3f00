/**
 * Conversations' own records in PostgreSQL (`conversations`: tenant, id → created_at, metadata). Their items are the
 * session with the same id (session-store.ts); the caller deletes both, as with LMDB (conversation-repo.ts).
 */
import type { ConversationRecord, ConversationStore } from '../interface.js'
import { storableId } from '../ids.js'
import { ms, type Pg, type Row } from './pool.js'
import { jsonb } from './jsonb.js'

export class PgConversationStore implements ConversationStore {
  readonly #pg: Pg

  constructor(pg: Pg) {
    this.#pg = pg
  }

  async ensure(tenant: string, record: ConversationRecord): Promise<ConversationRecord> {
    if (!storableId(record.id)) throw new RangeError(`conversation id ${JSON.stringify(record.id.slice(0, 40))} cannot be stored`)
    // Insert if new, else read what is there: one statement each way, the first writer's record wins.
    const rows = await this.#pg.query(
      'conversation_ensure',
      `WITH ins AS (
         INSERT INTO conversations (tenant, id, created_at, metadata) VALUES ($1, $2, $3, $4::jsonb)
         ON CONFLICT (tenant, id) DO NOTHING RETURNING id, created_at, metadata)
       SELECT id, created_at, metadata FROM ins
       UNION ALL SELECT id, created_at, metadata FROM conversations WHERE tenant = $1 AND id = $2
       LIMIT 1`,
      [tenant, record.id, record.createdAt, jsonb(record.metadata)],
    )
    const r = rows[0]
    if (r === undefined) throw new Error('conversation neither inserted nor found')
    return toRecord(r)
  }

  async get(tenant: string, id: string): Promise<ConversationRecord | undefined> {
    if (!storableId(id)) return undefined
    const rows = await this.#pg.query('conversation_get', 'SELECT id, created_at, metadata FROM conversations WHERE tenant = $1 AND id = $2', [
      tenant,
      id,
    ])
    return rows[0] === undefined ? undefined : toRecord(rows[0])
  }

  async update(tenant: string, id: string, metadata: Readonly<Record<string, string>>): Promise<ConversationRecord | undefined> {
    if (!storableId(id)) return undefined
    const rows = await this.#pg.query(
      'conversation_update',
      'UPDATE conversations SET metadata = $3::jsonb WHERE tenant = $1 AND id = $2 RETURNING id, created_at, metadata',
      [tenant, id, jsonb(metadata)],
    )
    return rows[0] === undefined ? undefined : toRecord(rows[0])
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    if (!storableId(id)) return false
    const rows = await this.#pg.query('conversation_delete', 'DELETE FROM conversations WHERE tenant = $1 AND id = $2 RETURNING 1 AS gone', [
      tenant,
      id,
    ])
    return rows.length > 0
  }
}

function toRecord(r: Row): ConversationRecord {
  if (typeof r.id !== 'string') throw new Error('corrupt conversation record')
  return { id: r.id, createdAt: ms(r.created_at), metadata: (r.metadata as Record<string, string> | null) ?? {} }
}
