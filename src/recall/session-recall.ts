/**
 * Long-term recall: a session's older turns come back when they matter, not only while they are recent.
 *
 * Indexing: every saved message is a document of its session's namespace in the one ranking engine
 * (search-index.ts: BM25 + HNSW), written by SessionRepo hooks in the same transaction as the save: embeddings (async)
 * are computed in the hook's prepare step, before the transaction; the vectors, the namespace meta and the
 * seq → label mapping are written inside it; the loaded indexes are patched after the commit. Pruned messages are
 * unindexed in their pruning transaction; deleting a session drops its namespace in the delete transaction.
 *
 * LMDB records (beside IndexRecords' `vectors` and ['index', ns]):
 *   meta ['recall', ns]       → { tenant, sessionId }  (who owns the namespace: the index source reads its messages)
 *   meta ['recall', ns, seq]  → { label, line }        (the message's label, and the o200k tokens of its rendered line)
 * The namespace is a hash of (tenant, sessionId): fixed length whatever the ids, and per tenant, so a search can only
 * ever rank the caller's own session. Labels are mapped, not assumed equal to seqs, so messages that were never
 * indexed (saved while RECALL was off, or whose embedding failed) leave gaps instead of shifting every later label.
 *
 * Request time (only when the history does not fit): `search` ranks the session's turns for the query (BM25 with
 * each turn's adjacent turns' scores added, neighbour-scores.ts; vectors fused by RRF when the embedder is a learned
 * one; vector hits below a similarity floor are ignored, so an unrelated question recalls nothing) and prefetches
 * them with their neighbours; `select` (synchronous, called by the packer with the room it has) builds the block
 * (recall-block.ts) and returns it with its exact token count, worked out from line counts stored at save time
 * instead of tokenizing the recalled turns again (o200k models; others get one exact count of the rendered block).
 */
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { LRUCache } from 'lru-cache'
import { STORED_ENCODING, type TokenCounter } from '../context/tokenizer.js'
import { BLOCK_ROLE } from '../context/block-role.js'
import { IndexRecords } from '../storage/file-repo.js'
import type { AfterCommit, SessionRepo, StoredMessage } from '../storage/session-repo.js'
import type { Key, Store } from '../storage/store.js'
import type { ChatMessage, Tokens } from '../types.js'
import { messageText } from '../messages/text.js'
import type { ScoredLabel } from '../retrieval/bm25.js'
import type { Embedder } from '../retrieval/embedder.js'
import { reciprocalRankFusion } from '../retrieval/fusion.js'
import { neighbourSmoothed } from './neighbour-scores.js'
import { SearchIndex, type IndexHit } from '../retrieval/search-index.js'
import type { HnswParams } from '../retrieval/vector-index.js'
import { recallTurn, renderLine, selectBlock, type BlockCounting, type Neighbours, type RecallCandidates, type RecallTurn } from './recall-block.js'

export { RECALL_PREAMBLE, type RecallCandidates } from './recall-block.js'

export interface RecallTuning {
  /**
   * Most turns read from each ranking (BM25, vectors) before fusion; fewer when the block's room is small (one per
   * `tokensPerCandidate` of room): candidates beyond what the room can hold cost time and change nothing.
   */
  candidates: number
  tokensPerCandidate: Tokens
  /** Weight of the vector ranking in RRF (BM25's is 1). */
  vectorWeight: number
  /** RRF's k. */
  rrfK: number
  /** Vector hits below this cosine similarity are not candidates (BM25 hits always share a term with the query). */
  minSimilarity: number
  /** Context recalled with each hit: its user/assistant partner ('pair'), both adjacent turns, or none. */
  neighbours: Neighbours
  /** Weight of the adjacent turns' BM25 scores in a turn's own (neighbour-scores.ts); 0 ranks turns alone. */
  neighbourWeight: number
  /** How many BM25 hits are read per candidate kept, so that neighbours' scores are known when smoothing. */
  lexicalDepth: number
}

/** Chosen with bench/memory-eval.ts (LoCoMo, 4,096-token window); the figures are in its header. */
export const DEFAULT_RECALL_TUNING: Omit<RecallTuning, 'vectorWeight'> = {
  candidates: 100,
  tokensPerCandidate: 60,
  rrfK: 60,
  minSimilarity: 0.3,
  neighbours: 'both',
  neighbourWeight: 0.5,
  lexicalDepth: 4,
}

/**
 * The vector ranking's default weight: the embedder's own fusion weight when it claims an equal say (a learned model),
 * else 0. The local hashed embedder (fusionWeight 0.3) only repeats BM25's terms, and on short turns it reorders them
 * for the worse: on LoCoMo (bench/memory-eval.ts) evidence in the prompt was 80.3% at 0, 80.2% at 0.1, 80.0% at 0.3,
 * 78.8% at 1.
 */
export function defaultVectorWeight(embedder: Pick<Embedder, 'fusionWeight'>): number {
  const w = embedder.fusionWeight ?? 1
  return w >= 1 ? w : 0
}

export interface SessionRecallOptions {
  store: Store
  /** Its append and delete hooks are registered here. */
  sessions: SessionRepo
  embedder: Embedder
  counter: TokenCounter
  /** Graph files go to `<dataDir>/recall/`. */
  dataDir: string
  /** Most tokens the recall block may take, framing included (the packer may give it less). */
  maxTokens: Tokens
  /** Documents per namespace: the session repository's per-session message limit. */
  maxMessagesPerSession: number
  /** Sessions whose indexes stay loaded (least recently used evicted). Default 64. */
  maxLoadedSessions?: number
  tuning?: Partial<RecallTuning>
  hnsw?: Partial<HnswParams>
  /**
   * Told when indexing or the vector half of a search fails. The exchange is still saved (its turns are then not
   * recallable) and the search falls back to BM25: recall is an aid, never a reason to fail a chat. Default: a
   * process warning.
   */
  onError?: (err: unknown, what: string) => void
}

export interface RecallBlock {
  message: ChatMessage
  /** Seqs of the recalled turns, ascending. */
  seqs: number[]
  /** Exact tokens `message` adds to the chat for the model it was selected for (framing included). */
  tokens: Tokens
}

interface RecallDoc {
  label: number
  line: Tokens
}

interface Owner {
  tenant: string
  sessionId: string
}

interface Prepared {
  vectors: Float32Array[]
  lines: Tokens[]
}

/** Long queries (a pasted document) are cut: ranking cost grows with query terms. */
const MAX_QUERY_CHARS = 2000
const MAX_SEQ = Number.MAX_SAFE_INTEGER

export class SessionRecall {
  readonly #store: Store
  readonly #sessions: SessionRepo
  readonly #embedder: Embedder
  readonly #counter: TokenCounter
  readonly #records: IndexRecords
  readonly #index: SearchIndex
  readonly #maxTokens: Tokens
  readonly #tuning: RecallTuning
  readonly #onError: (err: unknown, what: string) => void
  /** o200k counts of the fixed pieces (preamble, fences, headers), by text: few distinct strings. */
  readonly #pieceTokens = new Map<string, Tokens>()
  /**
   * Line counts by seq for recently searched sessions: the same as in LMDB (a seq's content never changes while its
   * namespace lives; a dropped namespace drops its map), kept here because reading ~120 small records per search
   * measured ~0.3 ms, the largest share of recall's latency. Bounded like the loaded indexes.
   */
  readonly #lines: LRUCache<string, Map<number, Tokens>>
  /** namespaceOf is a SHA-256 (~20 µs): remembered for recently used sessions. */
  readonly #namespaces = new LRUCache<string, string>({ max: 4096 })

  /** The most a recall block takes (RECALL_MAX_TOKENS), framing included. */
  get maxTokens(): Tokens {
    return this.#maxTokens
  }

  constructor(o: SessionRecallOptions) {
    this.#store = o.store
    this.#sessions = o.sessions
    this.#embedder = o.embedder
    this.#counter = o.counter
    this.#records = new IndexRecords(o.store)
    this.#maxTokens = o.maxTokens
    this.#tuning = { ...DEFAULT_RECALL_TUNING, vectorWeight: defaultVectorWeight(o.embedder), ...o.tuning }
    this.#lines = new LRUCache({ max: o.maxLoadedSessions ?? 64 })
    this.#onError =
      o.onError ?? ((err, what) => process.emitWarning(`recallgate: ${what}: ${String(err)}`, 'RecallWarning'))
    const meta = o.store.meta
    const sessions = o.sessions
    this.#index = new SearchIndex({
      dir: join(o.dataDir, 'recall'),
      embedder: o.embedder,
      maxLoaded: o.maxLoadedSessions ?? 64,
      maxDocsPerNamespace: o.maxMessagesPerSession,
      // Each search asks for exactly the k it needs (SearchIndex reads max(k, candidates) deep).
      candidates: 1,
      hnsw: o.hnsw,
      onSaveError: (err, file) => this.#onError(err, `saving ${file}`),
      source: {
        meta: (ns) => this.#records.meta(ns),
        vectors: (ns) => this.#records.vectors(ns),
        changes: (ns, from, to) => this.#records.changes(ns, from, to),
        vector: (ns, label) => this.#records.vector(ns, label),
        document(ns, ref) {
          const owner = meta.get(ownerKey(ns)) as Owner | undefined
          const seq = ref[0]
          if (owner === undefined || typeof seq !== 'number') return undefined
          return sessions.messagesAt(owner.tenant, owner.sessionId, [seq]).get(seq)?.text
        },
        *documents(ns) {
          const owner = meta.get(ownerKey(ns)) as Owner | undefined
          if (owner === undefined) return
          const labels = new Map<number, number>()
          for (const { key, value } of meta.getRange({ start: docKey(ns, 0), end: docKey(ns, MAX_SEQ) }))
            labels.set((key as [string, string, number])[2], (value as RecallDoc).label)
          const messages = sessions.messagesAt(owner.tenant, owner.sessionId, labels.keys())
          for (const [seq, label] of labels) {
            const m = messages.get(seq)
            if (m !== undefined) yield { label, ref: [seq], text: m.text }
          }
        },
      },
    })
    sessions.onAppendPrepared<Prepared | undefined>(
      (_tenant, _sessionId, messages) => this.#prepare(messages),
      (tenant, sessionId, saved, pruned, prepared) => this.#write(tenant, sessionId, saved, pruned, prepared),
    )
    sessions.onDelete((tenant, sessionId) => this.#delete(tenant, sessionId))
  }

  /**
   * The session's turns ranked for `query`, with their neighbours prefetched; undefined when nothing matches. `room`
   * is about what the block will get (it is only known exactly when packing).
   */
  async search(tenant: string, sessionId: string, query: string, room: Tokens): Promise<RecallCandidates | undefined> {
    const ns = this.#namespaceOf(tenant, sessionId)
    const meta = this.#records.meta(ns)
    if (meta === undefined || meta.count === 0 || query.trim() === '' || room <= 0) return undefined
    const q = query.slice(0, MAX_QUERY_CHARS)
    const { candidates, tokensPerCandidate, minSimilarity, rrfK, vectorWeight, neighbourWeight, lexicalDepth } = this.#tuning
    const k = Math.max(1, Math.min(candidates, Math.ceil(Math.min(room, this.#maxTokens) / tokensPerCandidate)))
    // Rankings are fused by seq (unique within the session), so a neighbour that matched nothing can be a candidate.
    const bySeq = (hits: IndexHit[]): ScoredLabel[] => hits.map((h) => ({ label: h.ref[0] as number, score: h.score }))
    const depth = neighbourWeight > 0 ? k * Math.max(1, lexicalDepth) : k
    const lexical = neighbourSmoothed(bySeq(await this.#index.search(ns, q, depth, 'bm25')), neighbourWeight, k)
    let semantic: ScoredLabel[] = []
    if (vectorWeight > 0) {
      try {
        semantic = bySeq((await this.#index.search(ns, q, k, 'vector')).filter((h) => h.score >= minSimilarity))
      } catch (err) {
        this.#onError(err, 'recall vector search (falling back to BM25)')
      }
    }
    const ranked = reciprocalRankFusion([lexical, semantic], { k: rrfK, weights: [1, vectorWeight] }).map((h) => h.label)
    if (ranked.length === 0) return undefined

    const wanted = new Set<number>()
    for (const seq of ranked) for (const s of [seq - 1, seq, seq + 1]) wanted.add(s)
    const messages = this.#sessions.messagesAt(tenant, sessionId, wanted)
    const lines = this.#linesOf(ns, meta.epoch)
    const turns = new Map<number, RecallTurn>()
    for (const [seq, m] of messages) {
      let line = lines.get(seq)
      if (line === undefined) {
        const doc = this.#store.meta.get(docKey(ns, seq)) as RecallDoc | undefined
        // A turn never indexed (saved while recall was off) can still be a neighbour: count its line now.
        line = doc?.line ?? this.#counter.textTokens(renderLine(m.role, m.text))
        lines.set(seq, line)
      }
      turns.set(seq, recallTurn(m, line))
    }
    return { ranked: ranked.filter((s) => turns.has(s)), turns }
  }

  /**
   * The recall block for `model` within `room` (and the configured maximum): hits best first, each with its neighbour,
   * older than the recent window and not in it. Undefined when nothing fits.
   */
  select(
    c: RecallCandidates,
    ctx: { room: Tokens; recent: ReadonlySet<number>; oldestRecentSeq: number | undefined },
    model: string,
  ): RecallBlock | undefined {
    const budget = Math.min(ctx.room, this.#maxTokens) - this.#counter.messageTokensFromContent(BLOCK_ROLE, 0, model)
    if (budget <= 0) return undefined
    let counting: BlockCounting
    if (this.#counter.encodingFor(model) === STORED_ENCODING) counting = { piece: (text) => this.#piece(text), line: (t) => t.line }
    else {
      const lines = new Map<number, Tokens>()
      const count = (text: string): Tokens => this.#counter.textTokens(text, model)
      counting = {
        piece: count,
        line: (t) => {
          let n = lines.get(t.seq)
          if (n === undefined) lines.set(t.seq, (n = count(renderLine(t.role, t.content))))
          return n
        },
        whole: count,
      }
    }
    const block = selectBlock(c, { budget, recent: ctx.recent, oldestRecentSeq: ctx.oldestRecentSeq }, this.#tuning.neighbours, counting)
    if (block === undefined) return undefined
    return {
      message: { role: BLOCK_ROLE, content: block.content },
      seqs: block.seqs,
      tokens: this.#counter.messageTokensFromContent(BLOCK_ROLE, block.tokens, model),
    }
  }

  /** Save changed graphs now (also done a few seconds after changes and on close). */
  flush(): Promise<void> {
    return this.#index.flush()
  }

  close(): Promise<void> {
    return this.#index.close()
  }

  #namespaceOf(tenant: string, sessionId: string): string {
    // Session ids cannot contain NUL (checkSessionId), so this key is unambiguous.
    const key = `${tenant}\u0000${sessionId}`
    let ns = this.#namespaces.get(key)
    if (ns === undefined) this.#namespaces.set(key, (ns = namespaceOf(tenant, sessionId)))
    return ns
  }

  /**
   * Keyed by the namespace's epoch too: a session deleted and recreated by another process sharing the store reuses
   * its seqs for other messages, under a new epoch.
   */
  #linesOf(ns: string, epoch: string | undefined): Map<number, Tokens> {
    const key = `${ns}\u0000${epoch ?? ''}`
    let lines = this.#lines.get(key)
    if (lines === undefined) this.#lines.set(key, (lines = new Map()))
    return lines
  }

  /** Forget a namespace in memory (after its records were dropped). */
  #forget(ns: string): void {
    this.#index.drop(ns)
    // At most maxLoadedSessions keys: a scan is cheap, and deletes are rare.
    for (const key of [...this.#lines.keys()]) if (key.startsWith(`${ns}\u0000`)) this.#lines.delete(key)
  }

  #piece(text: string): Tokens {
    let n = this.#pieceTokens.get(text)
    if (n === undefined) {
      n = this.#counter.textTokens(text)
      // Headers are per minute: bound the memo rather than let it grow with every date ever recalled.
      if (this.#pieceTokens.size >= 4096) this.#pieceTokens.clear()
      this.#pieceTokens.set(text, n)
    }
    return n
  }

  async #prepare(messages: readonly ChatMessage[]): Promise<Prepared | undefined> {
    const texts = messages.map(messageText)
    let vectors: Float32Array[]
    try {
      vectors = await this.#embedder.embed(texts)
    } catch (err) {
      this.#onError(err, 'embedding saved messages for recall (they are saved but not recallable)')
      return undefined
    }
    const dimension = vectors[0]?.length ?? 0
    if (vectors.length !== messages.length || vectors.some((v) => v.length !== dimension)) {
      this.#onError(new Error(`${vectors.length} vectors for ${messages.length} messages`), 'embedding saved messages for recall')
      return undefined
    }
    return { vectors, lines: messages.map((m, i) => this.#counter.textTokens(renderLine(m.role, texts[i] as string))) }
  }

  /** Inside the append transaction. */
  #write(tenant: string, sessionId: string, saved: StoredMessage[], pruned: StoredMessage[], prepared: Prepared | undefined): AfterCommit | void {
    const ns = this.#namespaceOf(tenant, sessionId)
    const meta = this.#store.meta
    const steps: AfterCommit[] = []
    const before = this.#records.meta(ns)
    const dimension = prepared?.vectors[0]?.length ?? 0
    // Vectors of another embedder cannot be searched together with ours: start the session's index over.
    if (prepared !== undefined && before !== undefined && before.count > 0 && (before.embedderId !== this.#embedder.id || before.dimension !== dimension)) {
      this.#dropInTxn(ns)
      steps.push(() => this.#forget(ns))
    } else if (pruned.length > 0) {
      const labels: number[] = []
      for (const m of pruned) {
        const doc = meta.get(docKey(ns, m.seq)) as RecallDoc | undefined
        if (doc === undefined) continue
        labels.push(doc.label)
        meta.remove(docKey(ns, m.seq))
      }
      if (labels.length > 0) {
        const change = this.#records.removeInTxn(ns, labels)
        // applyRemove and applyAdd never reject: a failure unloads the namespace (reloaded from LMDB) and is reported.
        steps.push(() => void this.#index.applyRemove(ns, change.fromVersion, change.meta, change.labels))
      }
      steps.push(() => {
        const lines = this.#lines.get(`${ns}\u0000${this.#records.meta(ns)?.epoch ?? ''}`)
        for (const m of pruned) lines?.delete(m.seq)
      })
    }
    if (prepared !== undefined) {
      // Saved and pruned at once (the session's limit) is the same object; a rewind's replaced messages are others.
      const gone = new Set<StoredMessage>(pruned)
      // A message without index terms has a zero vector, which the cosine graph cannot place: it stays unindexed.
      const docs = saved
        .map((m, i) => ({ m, vector: prepared.vectors[i] as Float32Array, line: prepared.lines[i] as Tokens }))
        .filter((d) => !gone.has(d.m) && !isZero(d.vector))
      if (docs.length > 0) {
        if (meta.get(ownerKey(ns)) === undefined) meta.put(ownerKey(ns), { tenant, sessionId } satisfies Owner)
        const refs = docs.map((d) => [d.m.seq])
        const change = this.#records.addInTxn(ns, docs.map((d) => d.vector), this.#embedder.id, () => undefined, refs)
        docs.forEach((d, i) => {
          meta.put(docKey(ns, d.m.seq), { label: change.labels[i] as number, line: d.line } satisfies RecallDoc)
        })
        const indexed = docs.map((d, i) => ({ label: change.labels[i] as number, ref: [d.m.seq], text: d.m.text, vector: d.vector }))
        steps.push(() => void this.#index.applyAdd(ns, change.fromVersion, change.meta, indexed))
      }
    }
    if (steps.length === 0) return undefined
    return () => {
      try {
        for (const step of steps) step()
      } catch (err) {
        // LMDB has the change; the in-memory index is rebuilt from it on next use.
        this.#forget(ns)
        this.#onError(err, 'updating a loaded recall index')
      }
    }
  }

  /** Inside the delete transaction. */
  #delete(tenant: string, sessionId: string): AfterCommit | void {
    const ns = this.#namespaceOf(tenant, sessionId)
    if (this.#records.meta(ns) === undefined && this.#store.meta.get(ownerKey(ns)) === undefined) return undefined
    this.#dropInTxn(ns)
    // Unloaded now and again after the commit (a search in between reloads the committed, not yet deleted, state).
    // Removing the graph file early is safe either way: it is only a cache of LMDB.
    this.#forget(ns)
    return () => this.#forget(ns)
  }

  #dropInTxn(ns: string): void {
    const meta = this.#store.meta
    this.#records.dropInTxn(ns)
    for (const key of meta.getKeys({ start: docKey(ns, 0), end: docKey(ns, MAX_SEQ) })) meta.remove(key)
    meta.remove(ownerKey(ns))
  }
}

export function namespaceOf(tenant: string, sessionId: string): string {
  return `recall:${createHash('sha256').update(tenant).update('\u0000').update(sessionId).digest('hex').slice(0, 40)}`
}

const ownerKey = (ns: string): Key => ['recall', ns]
const docKey = (ns: string, seq: number): Key => ['recall', ns, seq]

function isZero(v: Float32Array): boolean {
  for (let i = 0; i < v.length; i++) if (v[i] !== 0) return false
  return true
}
