/**
 * Conversations' own records in LMDB: [tenant, conversationId] → { id, createdAt, metadata }. A conversation's items
 * are the messages of the session with the same id (storage/session-repo.ts), so deleting one deletes both: the
 * caller (routes/conversations.ts) deletes the session too.
 */
import type { ConversationRecord, ConversationStore } from './interface.js'
import type { Store } from './store.js'

export class ConversationRepo implements ConversationStore {
  readonly #store: Store

  constructor(store: Store) {
    this.#store = store
  }

  async ensure(tenant: string, record: ConversationRecord): Promise<ConversationRecord> {
    const db = this.#store.conversations
    return this.#store.durable(() => {
      const existing = asRecord(db.get([tenant, record.id]))
      if (existing !== undefined) return existing
      db.put([tenant, record.id], record)
      return record
    })
  }

  get(tenant: string, id: string): ConversationRecord | undefined {
    return asRecord(this.#store.conversations.get([tenant, id]))
  }

  async update(tenant: string, id: string, metadata: Readonly<Record<string, string>>): Promise<ConversationRecord | undefined> {
    const db = this.#store.conversations
    return this.#store.durable(() => {
      const existing = asRecord(db.get([tenant, id]))
      if (existing === undefined) return undefined
      const next = { ...existing, metadata }
      db.put([tenant, id], next)
      return next
    })
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    const db = this.#store.conversations
    return this.#store.durable(() => {
      if (db.get([tenant, id]) === undefined) return false
      db.remove([tenant, id])
      return true
    })
  }
}

function asRecord(v: unknown): ConversationRecord | undefined {
  if (v === undefined) return undefined
  const r = v as Partial<ConversationRecord> | null
  if (r === null || typeof r !== 'object' || typeof r.id !== 'string' || typeof r.createdAt !== 'number')
    throw new Error('corrupt conversation record')
  return { id: r.id, createdAt: r.createdAt, metadata: r.metadata ?? {} }
}
