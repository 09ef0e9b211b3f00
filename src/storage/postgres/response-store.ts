/**
 * Stored responses in PostgreSQL: `responses` (the StoredResponse's fields as columns, its item lists and echo as
 * jsonb) and `response_items` (tenant, item id → response id, for `item_reference`), written in one transaction so a
 * response is retrievable exactly when its items resolve (as response-repo.ts does in LMDB).
 */
import type { ResponseStore, StoredItem, StoredResponse } from '../interface.js'
import { ms, type Pg, type Row } from './pool.js'
import { storableId } from '../ids.js'
import { jsonb, nullableJsonb } from './jsonb.js'

const COLUMNS = `id, created_at, completed_at, model, status, previous_response_id, conversation_id, input, output, messages,
  usage, error, incomplete_details, echo`

export class PgResponseStore implements ResponseStore {
  readonly #pg: Pg

  constructor(pg: Pg) {
    this.#pg = pg
  }

  async save(tenant: string, r: StoredResponse): Promise<void> {
    const itemIds = [...r.input, ...r.output].map((i) => i.id)
    await this.#pg.transaction('response_save', async (c) => {
      await c.query(
        `INSERT INTO responses (tenant, ${COLUMNS})
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10::jsonb, $11::jsonb, $12::jsonb, $13::jsonb, $14::jsonb, $15::jsonb)
         ON CONFLICT (tenant, id) DO UPDATE SET created_at = EXCLUDED.created_at, completed_at = EXCLUDED.completed_at,
           model = EXCLUDED.model, status = EXCLUDED.status, previous_response_id = EXCLUDED.previous_response_id,
           conversation_id = EXCLUDED.conversation_id, input = EXCLUDED.input, output = EXCLUDED.output,
           messages = EXCLUDED.messages, usage = EXCLUDED.usage, error = EXCLUDED.error,
           incomplete_details = EXCLUDED.incomplete_details, echo = EXCLUDED.echo`,
        [
          tenant,
          r.id,
          r.createdAt,
          r.completedAt,
          r.model,
          r.status,
          r.previousResponseId,
          r.conversationId,
          jsonb(r.input),
          jsonb(r.output),
          jsonb(r.messages),
          nullableJsonb(r.usage),
          nullableJsonb(r.error),
          nullableJsonb(r.incompleteDetails),
          jsonb(r.echo),
        ],
      )
      // An item id sent again in a later response points at that one from now on (as in LMDB).
      if (itemIds.length > 0)
        await c.query(
          `INSERT INTO response_items (tenant, item_id, response_id) SELECT $1, i, $2 FROM unnest($3::text[]) AS i
           ON CONFLICT (tenant, item_id) DO UPDATE SET response_id = EXCLUDED.response_id`,
          [tenant, r.id, [...new Set(itemIds)]],
        )
    })
  }

  async get(tenant: string, id: string): Promise<StoredResponse | undefined> {
    if (!storableId(id)) return undefined
    const rows = await this.#pg.query('response_get', `SELECT ${COLUMNS} FROM responses WHERE tenant = $1 AND id = $2`, [tenant, id])
    return rows[0] === undefined ? undefined : toResponse(rows[0])
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    if (!storableId(id)) return false
    return this.#pg.transaction('response_delete', async (c) => {
      const gone = await c.query('DELETE FROM responses WHERE tenant = $1 AND id = $2 RETURNING 1', [tenant, id])
      if (gone.rowCount === 0) return false
      // Only the entries that still point at this response (response_items_by_response, migration 2).
      await c.query('DELETE FROM response_items WHERE tenant = $1 AND response_id = $2', [tenant, id])
      return true
    })
  }

  async countExisting(tenant: string, ids: readonly string[]): Promise<number> {
    const valid = ids.filter(storableId)
    if (valid.length === 0) return 0
    const rows = await this.#pg.query('response_count', 'SELECT count(*)::int AS n FROM responses WHERE tenant = $1 AND id = ANY($2::text[])', [tenant, valid])
    return Number(rows[0]?.n ?? 0)
  }

  async deletions(tenant: string): Promise<number> {
    // Counted by the trigger of migration 8 on every deleted row.
    const rows = await this.#pg.query('response_deletions', 'SELECT n FROM response_deletions WHERE tenant = $1', [tenant])
    return Number(rows[0]?.n ?? 0)
  }

  async findItem(tenant: string, itemId: string): Promise<StoredItem | undefined> {
    if (!storableId(itemId)) return undefined
    const rows = await this.#pg.query(
      'response_item',
      `SELECT r.input, r.output FROM response_items i JOIN responses r ON r.tenant = i.tenant AND r.id = i.response_id
       WHERE i.tenant = $1 AND i.item_id = $2`,
      [tenant, itemId],
    )
    const r = rows[0]
    if (r === undefined) return undefined
    const find = (list: unknown): StoredItem | undefined => (Array.isArray(list) ? (list as StoredItem[]).find((i) => i.id === itemId) : undefined)
    return find(r.output) ?? find(r.input)
  }
}

function toResponse(r: Row): StoredResponse {
  if (typeof r.id !== 'string' || !Array.isArray(r.input) || !Array.isArray(r.output) || !Array.isArray(r.messages))
    throw new Error('corrupt stored response record')
  return {
    id: r.id,
    createdAt: ms(r.created_at),
    completedAt: r.completed_at === null ? null : ms(r.completed_at),
    model: String(r.model),
    status: String(r.status),
    previousResponseId: (r.previous_response_id as string | null) ?? null,
    conversationId: (r.conversation_id as string | null) ?? null,
    input: r.input as StoredItem[],
    output: r.output as StoredItem[],
    messages: r.messages as StoredResponse['messages'],
    usage: (r.usage as StoredResponse['usage']) ?? null,
    error: (r.error as StoredResponse['error']) ?? null,
    incompleteDetails: (r.incomplete_details as StoredResponse['incompleteDetails']) ?? null,
    echo: (r.echo as StoredResponse['echo']) ?? {},
  }
}
