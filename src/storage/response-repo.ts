/**
 * Stored responses (the Responses API's `store: true`) in LMDB, scoped by tenant:
 *
 *   responses  [tenant, responseId]  → StoredResponse (this turn's input and output items, and the same turn as chat
 *                                      messages with token counts)
 *   items      [tenant, itemId]      → responseId (where an item lives, so an `item_reference` resolves in one read)
 *   meta       ['response-deletions', tenant] → how many of the tenant's responses were ever deleted
 *
 * A response and its item index entries are written in one durable unit: a response is retrievable and chainable
 * exactly when its items resolve, also after kill -9.
 */
import type { ResponseStore, StoredItem, StoredResponse } from './interface.js'
import { storableId } from './ids.js'
import type { Store } from './store.js'

export class ResponseRepo implements ResponseStore {
  readonly #store: Store

  constructor(store: Store) {
    this.#store = store
  }

  async save(tenant: string, response: StoredResponse): Promise<void> {
    const { responses, items } = this.#store
    await this.#store.durable(() => {
      responses.put([tenant, response.id], response)
      for (const item of response.input) items.put([tenant, item.id], response.id)
      for (const item of response.output) items.put([tenant, item.id], response.id)
    })
  }

  get(tenant: string, id: string): StoredResponse | undefined {
    if (!storableId(id)) return undefined
    return asStoredResponse(this.#store.responses.get([tenant, id]))
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    if (!storableId(id)) return false
    const { responses, items } = this.#store
    return this.#store.durable(() => {
      const rec = asStoredResponse(responses.get([tenant, id]))
      if (rec === undefined) return false
      // An item id sent again in a later response points at that one now: only this response's entries go.
      for (const item of [...rec.input, ...rec.output]) if (items.get([tenant, item.id]) === id) items.remove([tenant, item.id])
      responses.remove([tenant, id])
      this.#store.meta.put(deletionsKey(tenant), this.#deletions(tenant) + 1)
      return true
    })
  }

  deletions(tenant: string): number {
    // In a fresh snapshot (Store.freshReads): a cached chain must see another process's delete from the next request
    // on, whoever calls this and whenever.
    this.#store.freshReads()
    return this.#deletions(tenant)
  }

  #deletions(tenant: string): number {
    const n = this.#store.meta.get(deletionsKey(tenant))
    return typeof n === 'number' ? n : 0
  }

  countExisting(tenant: string, ids: readonly string[]): number {
    const { responses } = this.#store
    let n = 0
    for (const id of ids) if (storableId(id) && responses.doesExist([tenant, id])) n++
    return n
  }

  findItem(tenant: string, itemId: string): StoredItem | undefined {
    if (!storableId(itemId)) return undefined
    const owner = this.#store.items.get([tenant, itemId])
    if (typeof owner !== 'string') return undefined
    const rec = this.get(tenant, owner)
    if (rec === undefined) return undefined
    return rec.output.find((i) => i.id === itemId) ?? rec.input.find((i) => i.id === itemId)
  }
}

const deletionsKey = (tenant: string): [string, string] => ['response-deletions', tenant]

/** A record read back, checked for the fields every reader relies on (a corrupt one is an error, not a guess). */
function asStoredResponse(v: unknown): StoredResponse | undefined {
  if (v === undefined) return undefined
  const r = v as Partial<StoredResponse> | null
  if (
    r === null ||
    typeof r !== 'object' ||
    typeof r.id !== 'string' ||
    !Array.isArray(r.input) ||
    !Array.isArray(r.output) ||
    !Array.isArray(r.messages)
  ) {
    throw new Error('corrupt stored response record')
  }
  return r as StoredResponse
}
