/**
 * Long-term recall's records in LMDB (the RecallStore contract), beside IndexRecords' `vectors` and ['index', ns]:
 *   meta ['recall', ns]       → { tenant, sessionId }  (who owns the namespace: the index source reads its messages)
 *   meta ['recall', ns, seq]  → { label, line }        (the message's label, and the o200k tokens of its rendered line)
 * Written by SessionRepo hooks inside the save's and the delete's own transaction (synchronously: LMDB's write
 * transaction cannot await), so a turn is indexed exactly when it is saved. Labels are mapped, not assumed equal to
 * seqs, so messages that were never indexed (saved while RECALL was off, or whose embedding failed) leave gaps.
 */
import { IndexRecords } from './file-repo.js'
import { startsOver } from './index-meta.js'
import { indexable } from './recall-indexable.js'
import type { AfterCommit, RecallIndexer, RecallPrepared, RecallStore, RecallWrite, StoredMessage } from './interface.js'
import type { SessionRepo } from './session-repo.js'
import type { Key, Store } from './store.js'
import type { Tokens } from '../types.js'

interface RecallDoc {
  label: number
  line: Tokens
}

interface Owner {
  tenant: string
  sessionId: string
}

const MAX_SEQ = Number.MAX_SAFE_INTEGER
const ownerKey = (ns: string): Key => ['recall', ns]
const docKey = (ns: string, seq: number): Key => ['recall', ns, seq]

export class RecallRepo implements RecallStore {
  readonly #store: Store
  readonly #sessions: SessionRepo
  readonly index: IndexRecords

  constructor(store: Store, sessions: SessionRepo) {
    this.#store = store
    this.#sessions = sessions
    this.index = new IndexRecords(store)
  }

  owner(ns: string): Owner | undefined {
    return this.#store.meta.get(ownerKey(ns)) as Owner | undefined
  }

  labels(ns: string): Map<number, number> {
    const out = new Map<number, number>()
    for (const { key, value } of this.#store.meta.getRange({ start: docKey(ns, 0), end: docKey(ns, MAX_SEQ) }))
      out.set((key as [string, string, number])[2], (value as RecallDoc).label)
    return out
  }

  lines(ns: string, seqs: readonly number[]): Map<number, Tokens> {
    const out = new Map<number, Tokens>()
    for (const seq of seqs) {
      const doc = this.#store.meta.get(docKey(ns, seq)) as RecallDoc | undefined
      if (doc !== undefined) out.set(seq, doc.line)
    }
    return out
  }

  messagesAt(tenant: string, sessionId: string, seqs: Iterable<number>): Map<number, StoredMessage> {
    return this.#sessions.messagesAt(tenant, sessionId, seqs)
  }

  attach(indexer: RecallIndexer): void {
    this.#sessions.onAppendPrepared<RecallPrepared | undefined>(
      (_tenant, _sessionId, messages) => indexer.prepare(messages),
      (tenant, sessionId, saved, pruned, prepared) => {
        const write = this.#write(indexer, indexer.namespaceOf(tenant, sessionId), tenant, sessionId, saved, pruned, prepared)
        return () => indexer.saved(write)
      },
    )
    this.#sessions.onDelete((tenant, sessionId): AfterCommit | void => {
      const ns = indexer.namespaceOf(tenant, sessionId)
      if (this.index.meta(ns) === undefined && this.owner(ns) === undefined) return undefined
      this.#drop(ns)
      indexer.deleted(ns)
      return () => indexer.deleted(ns)
    })
  }

  /** Inside the append transaction. */
  #write(
    indexer: RecallIndexer,
    ns: string,
    tenant: string,
    sessionId: string,
    saved: StoredMessage[],
    pruned: StoredMessage[],
    prepared: RecallPrepared | undefined,
  ): RecallWrite {
    const meta = this.#store.meta
    const write: RecallWrite = { namespace: ns, dropped: false, gone: pruned.map((m) => m.seq) }
    const dimension = prepared?.vectors[0]?.length ?? 0
    if (prepared !== undefined && startsOver(this.index.meta(ns), indexer.embedderId, dimension)) {
      this.#drop(ns)
      write.dropped = true
    } else if (pruned.length > 0) {
      const labels: number[] = []
      for (const m of pruned) {
        const doc = meta.get(docKey(ns, m.seq)) as RecallDoc | undefined
        if (doc === undefined) continue
        labels.push(doc.label)
        meta.remove(docKey(ns, m.seq))
      }
      if (labels.length > 0) write.removed = this.index.removeInTxn(ns, labels)
    }
    const docs = prepared === undefined ? [] : indexable(saved, pruned, prepared)
    if (docs.length > 0 && prepared !== undefined) {
      if (meta.get(ownerKey(ns)) === undefined) meta.put(ownerKey(ns), { tenant, sessionId } satisfies Owner)
      const change = this.index.addInTxn(ns, docs.map((d) => d.vector), indexer.embedderId, () => undefined, docs.map((d) => [d.m.seq]))
      docs.forEach((d, i) => {
        meta.put(docKey(ns, d.m.seq), { label: change.labels[i] as number, line: d.line } satisfies RecallDoc)
      })
      write.added = { change, docs: docs.map((d, i) => ({ seq: d.m.seq, label: change.labels[i] as number, text: d.m.text, vector: d.vector })) }
    }
    return write
  }

  #drop(ns: string): void {
    const meta = this.#store.meta
    this.index.dropInTxn(ns)
    for (const key of meta.getKeys({ start: docKey(ns, 0), end: docKey(ns, MAX_SEQ) })) meta.remove(key)
    meta.remove(ownerKey(ns))
  }
}
