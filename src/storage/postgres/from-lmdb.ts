/**
 * `recallgate migrate --from-lmdb DIR`: copy an embedded deployment's keys, sessions and messages, stored responses
 * (with their item index), conversations, usage rows, request traces, knowledge base (files, chunks, vectors and
 * each tenant's index meta) and long-term recall's index from its LMDB environment into PostgreSQL, in one transaction (all or nothing). Rows
 * already in PostgreSQL are kept (ON CONFLICT DO NOTHING), so a second run copies nothing twice.
 * Run it with the gateway stopped: LMDB is read as one snapshot per database, not one for the whole copy.
 *
 * A tenant's knowledge base is copied whole or not at all: labels are allocated per namespace, so files uploaded to
 * PostgreSQL meanwhile (another epoch of the namespace) would collide with the copied ones. Such a tenant is left out
 * and counted (`skippedTenants`); its files can be uploaded again.
 */
import { tenantIdFor } from '../../auth/service-keys.js'
import type { ChunkRow, FileRow, IndexMeta, StoredResponse } from '../interface.js'
import type { Store } from '../store.js'
import { storedTraces } from '../trace-repo.js'
import type { Pg, Queryable } from './pool.js'
import { jsonb, nullableJsonb } from './jsonb.js'

export interface CopyCounts {
  keys: number
  sessions: number
  messages: number
  responses: number
  conversations: number
  usage: number
  traces: number
  files: number
  chunks: number
  /** Tenants whose knowledge base PostgreSQL already had under another epoch: not copied. */
  skippedTenants: number
  /** Saved turns indexed for long-term recall. */
  recallTurns: number
}

/** The namespace prefixes of the knowledge base (knowledge-base.ts) and of long-term recall (session-recall.ts). */
const FILES_NS = 'files:'
const RECALL_NS = 'recall:'

/** Rows per INSERT: large enough to cost few round trips, small enough to stay far from the parameter limit. */
const BATCH = 500

export async function copyFromLmdb(store: Store, pg: Pg): Promise<CopyCounts> {
  return pg.transaction('copy_from_lmdb', async (c) => {
    const counts: CopyCounts = { keys: 0, sessions: 0, messages: 0, responses: 0, conversations: 0, usage: 0, traces: 0, files: 0, chunks: 0, skippedTenants: 0, recallTurns: 0 }
    counts.keys = await batched(c, store.keys.getRange(), (v) => {
      const r = v.value as { id: string; hash: string; tenant?: string; plan: string; label?: string; createdAt: number; revokedAt?: number }
      // A record from before tenants had their own id keeps the one derived from its hash (key-repo.ts reads it so).
      return [r.hash, r.id, r.tenant ?? tenantIdFor(r.hash), r.plan, r.label ?? null, r.createdAt, r.revokedAt ?? null]
    }, 'keys (hash, id, tenant, plan, label, created_at, revoked_at)', '')
    counts.sessions = await batched(c, store.sessions.getRange(), (v) => {
      const [tenant, id] = v.key as [string, string]
      const r = v.value as { createdAt: number; updatedAt: number; nextSeq: number; count: number }
      return [tenant, id, r.createdAt, r.updatedAt, r.nextSeq, r.count]
    }, 'sessions (tenant, session_id, created_at, updated_at, next_seq, count)', '')
    counts.messages = await batched(c, store.messages.getRange(), (v) => {
      const [tenant, id, seq] = v.key as [string, string, number]
      const r = v.value as { message?: unknown; role?: string; content?: string; tokens: number; createdAt: number }
      // Records written before agent messages were `{role, content}` (session-repo.ts reads them the same way).
      const message = r.message ?? { role: r.role, content: r.content }
      return [tenant, id, seq, jsonb(message), r.tokens, r.createdAt]
    }, 'messages (tenant, session_id, seq, message, tokens, created_at)', '::jsonb', 3)
    counts.conversations = await batched(c, store.conversations.getRange(), (v) => {
      const [tenant] = v.key as [string, string]
      const r = v.value as { id: string; createdAt: number; metadata?: Record<string, string> }
      return [tenant, r.id, r.createdAt, jsonb(r.metadata ?? {})]
    }, 'conversations (tenant, id, created_at, metadata)', '::jsonb', 3)
    counts.usage = await batched(c, store.usage.getRange(), (v) => {
      const [tenant, day, model] = v.key as [string, string, string]
      const r = v.value as { requests: number; inputTokens: number; outputTokens: number; cachedTokens: number }
      return [tenant, day, model, r.requests, r.inputTokens, r.outputTokens, r.cachedTokens]
    }, 'usage (tenant, day, model, requests, input_tokens, output_tokens, cached_tokens)', '')
    for (const { key, value } of store.responses.getRange()) {
      const [tenant] = key as [string, string]
      const r = value as StoredResponse
      const ins = await c.query(
        `INSERT INTO responses (tenant, id, created_at, completed_at, model, status, previous_response_id, conversation_id,
           input, output, messages, usage, error, incomplete_details, echo)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10::jsonb, $11::jsonb, $12::jsonb, $13::jsonb, $14::jsonb, $15::jsonb)
         ON CONFLICT DO NOTHING`,
        [tenant, r.id, r.createdAt, r.completedAt, r.model, r.status, r.previousResponseId, r.conversationId, jsonb(r.input),
          jsonb(r.output), jsonb(r.messages), nullableJsonb(r.usage), nullableJsonb(r.error), nullableJsonb(r.incompleteDetails),
          jsonb(r.echo ?? {})],
      )
      counts.responses += ins.rowCount ?? 0
    }
    await batched(c, store.items.getRange(), (v) => {
      const [tenant, itemId] = v.key as [string, string]
      return [tenant, itemId, v.value as string]
    }, 'response_items (tenant, item_id, response_id)', '')
    counts.traces = await batched(c, storedTraces(store), ({ tenant, trace: r }) => [tenant, r.createdAt, r.id, r.sessionId, JSON.stringify(r)],
      'traces (tenant, created_at, id, session_id, trace)', '')
    await copyKnowledgeBase(store, c, counts)
    await copyRecall(store, c, counts)
    return counts
  })
}

/**
 * The namespaces under `prefix` to copy, their meta inserted now: all but those PostgreSQL already holds under another
 * epoch (written there since; copying would collide with their labels), which are counted as skipped. The same epoch
 * is an earlier run of this copy: its rows are there, and the inserts that follow skip them.
 */
async function claimNamespaces(store: Store, c: Queryable, prefix: string): Promise<{ namespaces: string[]; skipped: number }> {
  const namespaces: string[] = []
  let skipped = 0
  for (const { key, value } of store.meta.getRange({ start: ['index', prefix], end: ['index', `${prefix}\uffff`] })) {
    const ns = (key as [string, string])[1]
    const meta = value as IndexMeta
    const there = await c.query<{ meta: IndexMeta }>('SELECT meta FROM index_meta WHERE namespace = $1', [ns])
    const existing = there.rows[0]?.meta
    if (existing !== undefined && existing.epoch !== meta.epoch) {
      skipped++
      continue
    }
    if (existing === undefined) await c.query('INSERT INTO index_meta (namespace, meta) VALUES ($1, $2::jsonb)', [ns, JSON.stringify(meta)])
    namespaces.push(ns)
  }
  return { namespaces, skipped }
}

async function copyVectors(store: Store, c: Queryable, namespaces: readonly string[]): Promise<void> {
  for (const ns of namespaces) {
    await batched(c, store.vectors.getRange({ start: [ns, 0], end: [ns, Number.MAX_SAFE_INTEGER] }), (v) => {
      const [, label] = v.key as [string, number]
      // A copy: LMDB may reuse the buffer it handed out.
      return [ns, label, Buffer.from(v.value as Uint8Array)]
    }, 'vectors (namespace, label, vector)', '')
  }
}

/** Each tenant's files, chunks, vectors and index meta, for the tenants PostgreSQL has no other knowledge base of. */
async function copyKnowledgeBase(store: Store, c: Queryable, counts: CopyCounts): Promise<void> {
  const { namespaces, skipped } = await claimNamespaces(store, c, FILES_NS)
  counts.skippedTenants = skipped
  const tenants = new Set(namespaces.map((ns) => ns.slice(FILES_NS.length)))
  const ofTenants = function* <V extends { key: unknown }>(rows: Iterable<V>): Iterable<V> {
    for (const r of rows) if (tenants.has((r.key as [string])[0])) yield r
  }
  counts.files = await batched(c, ofTenants(store.files.getRange()), (v) => {
    const [tenant, id] = v.key as [string, string]
    const r = v.value as FileRow
    return [tenant, id, jsonb(r), r.created_at]
  }, 'files (tenant, file_id, record, created_at)', '::jsonb', 2)
  counts.chunks = await batched(c, ofTenants(store.chunks.getRange()), (v) => {
    const [tenant, id, index] = v.key as [string, string, number]
    return [tenant, id, index, jsonb(v.value as ChunkRow)]
  }, 'chunks (tenant, file_id, chunk_index, record)', '::jsonb', 3)
  await copyVectors(store, c, namespaces)
}

/**
 * Long-term recall's index of each session (recall-repo.ts: its owner, its turns' labels and line counts, its vectors
 * and meta), so the turns saved before the move stay recallable; a session whose index PostgreSQL already holds under
 * another epoch is left out (its older turns are then packed as history, not recalled).
 */
async function copyRecall(store: Store, c: Queryable, counts: CopyCounts): Promise<void> {
  const { namespaces } = await claimNamespaces(store, c, RECALL_NS)
  for (const ns of namespaces) {
    const owner = store.meta.get(['recall', ns]) as { tenant: string; sessionId: string } | undefined
    if (owner !== undefined)
      await c.query('INSERT INTO recall_owners (namespace, tenant, session_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [ns, owner.tenant, owner.sessionId])
    counts.recallTurns += await batched(c, store.meta.getRange({ start: ['recall', ns, 0], end: ['recall', ns, Number.MAX_SAFE_INTEGER] }), (v) => {
      const [, , seq] = v.key as [string, string, number]
      const doc = v.value as { label: number; line: number }
      return [ns, seq, doc.label, doc.line]
    }, 'recall_docs (namespace, seq, label, line)', '')
  }
  await copyVectors(store, c, namespaces)
}

/**
 * Insert rows in batches of BATCH, skipping those already there; returns how many were inserted. `castAt` (0-based
 * column) gets `cast` appended to its placeholder (jsonb columns).
 */
async function batched<V>(
  c: Queryable,
  source: Iterable<V>,
  row: (v: V) => unknown[],
  target: string,
  cast: string,
  castAt = -1,
): Promise<number> {
  let inserted = 0
  let rows: unknown[][] = []
  const flush = async (): Promise<void> => {
    if (rows.length === 0) return
    const width = rows[0]?.length ?? 0
    const values = rows.map((_, i) => `(${Array.from({ length: width }, (_, j) => `$${i * width + j + 1}${j === castAt ? cast : ''}`).join(', ')})`)
    const res = await c.query(`INSERT INTO ${target} VALUES ${values.join(', ')} ON CONFLICT DO NOTHING`, rows.flat())
    inserted += res.rowCount ?? 0
    rows = []
  }
  for (const v of source) {
    rows.push(row(v))
    if (rows.length === BATCH) await flush()
  }
  await flush()
  return inserted
}
