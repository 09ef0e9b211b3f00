/**
 * Long-term recall: a session's older turns come back when they matter, not only while they are recent.
 *
 * Indexing: every saved message is a document of its session's namespace in the one ranking engine
 * (search-index.ts: BM25 + HNSW), written by the store's hooks in the same transaction as the save (the RecallStore
 * contract: storage/recall-repo.ts in LMDB, storage/postgres/recall-store.ts): embeddings (async) are computed in the
 * prepare step, before the transaction; the vectors, the namespace meta, its change log and the seq → label mapping
 * are written inside it; the loaded indexes are patched after the commit. Pruned messages are unindexed in their
 * pruning transaction; deleting a session drops its namespace in the delete transaction. Another process sharing the
 * store (a replica on the same PostgreSQL) catches its loaded index up from the change log before it searches.
 *
 * The namespace is a hash of (tenant, sessionId): fixed length whatever the ids, and per tenant, so a search can only
 * ever rank the caller's own session.
 *
 * Request time (only when the history does not fit): `search` ranks the session's turns for the query (BM25 with
 * each turn's adjacent turns' scores added, neighbour-scores.ts; vectors fused by RRF when the embedder is a learned
 * one; vector hits below a similarity floor are ignored, so an unrelated question recalls nothing) and prefetches
 * them with their neighbours; `select` (synchronous, called by the packer with the room it has) builds the block
 * (recall-block.ts) and returns it with its exact token count, worked out from line counts stored at save time
 * instead of tokenizing the recalled turns again (o200k models; others get one exact count of the rendered block).
 * With `keepTop` (RECALL_KEEP_TOP), the block each session last sent is remembered (per process, bounded) and sent
 * again, unchanged, while it still holds the query's best hits: a provider can then cache it (README, Prompt caching,
 * for what that gains and what it costs recall).
 */
import { join } from 'node:path'
import { LRUCache } from 'lru-cache'
import { STORED_ENCODING, type TokenCounter } from '../context/tokenizer.js'
import { BLOCK_ROLE } from '../context/block-role.js'
import type { RecallIndexer, RecallPrepared, RecallStore, RecallWrite } from '../storage/interface.js'
import { sessionKey } from '../storage/session-id.js'
import { namespaceHash } from '../retrieval/namespace-hash.js'
import type { ChatMessage, Tokens } from '../types.js'
import { messageText } from '../messages/text.js'
import type { ScoredLabel } from '../retrieval/bm25.js'
import type { Cancel, Embedder } from '../retrieval/embedder.js'
import { reciprocalRankFusion } from '../retrieval/fusion.js'
import { neighbourSmoothed } from './neighbour-scores.js'
import { SearchIndex, type IndexHit } from '../retrieval/search-index.js'
import type { HnswParams } from '../retrieval/vector-index.js'
import { recallTurn, renderLine, selectBlock, type BlockCounting, type Neighbours, type RecallCandidates, type RecallTurn, type SentBlock } from './recall-block.js'

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
  /**
   * The session's previous block is sent again, unchanged (so the provider's cache covers it), while the recent window
   * has not moved and the block holds this many of the query's best hits; 0 selects a new block for every request.
   */
  keepTop: number
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
  keepTop: 0,
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
  /** Where saved turns are indexed; its save and delete hooks are attached here (storage/open-stores.ts). */
  records: RecallStore
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
  /** Whether the disk has room for a graph file of this many bytes (SearchIndexOptions.cacheRoom). */
  cacheRoom?: (bytes: number) => Promise<boolean>
}

export interface RecallBlock {
  message: ChatMessage
  /** Seqs of the recalled turns, ascending. */
  seqs: number[]
  /** Exact tokens `message` adds to the chat for the model it was selected for (framing included). */
  tokens: Tokens
  /** The seq of the history message it goes before (context/packer.ts); absent: after the history. */
  before: number | undefined
}

/** Long queries (a pasted document) are cut: ranking cost grows with query terms. */
const MAX_QUERY_CHARS = 2000

export class SessionRecall implements RecallIndexer {
  readonly #records: RecallStore
  readonly #embedder: Embedder
  readonly #counter: TokenCounter
  readonly #index: SearchIndex
  readonly #maxTokens: Tokens
  readonly #tuning: RecallTuning
  readonly #onError: (err: unknown, what: string) => void
  /** o200k counts of the fixed pieces (preamble, fences, headers), by text: few distinct strings. */
  readonly #pieceTokens = new Map<string, Tokens>()
  /**
   * Line counts by seq for recently searched sessions: the same as stored (a seq's content never changes while its
   * namespace lives; a dropped namespace drops its map), kept here because reading ~120 small records per search
   * measured ~0.3 ms, the largest share of recall's latency. Bounded like the loaded indexes.
   */
  readonly #lines: LRUCache<string, Map<number, Tokens>>
  /** namespaceOf is a SHA-256 (~20 µs): remembered for recently used sessions. */
  readonly #namespaces = new LRUCache<string, string>({ max: 4096 })
  /** The block each recently active session's last request sent (`keepTop`), by session key. */
  readonly #sent = new LRUCache<string, SentBlock>({ max: 4096 })

  /** The most a recall block takes (RECALL_MAX_TOKENS), framing included. */
  get maxTokens(): Tokens {
    return this.#maxTokens
  }

  get embedderId(): string {
    return this.#embedder.id
  }

  constructor(o: SessionRecallOptions) {
    this.#records = o.records
    this.#embedder = o.embedder
    this.#counter = o.counter
    this.#maxTokens = o.maxTokens
    this.#tuning = { ...DEFAULT_RECALL_TUNING, vectorWeight: defaultVectorWeight(o.embedder), ...o.tuning }
    this.#lines = new LRUCache({ max: o.maxLoadedSessions ?? 64 })
    this.#onError =
      o.onError ?? ((err, what) => process.emitWarning(`recallgate: ${what}: ${String(err)}`, 'RecallWarning'))
    const records = o.records
    this.#index = new SearchIndex({
      dir: join(o.dataDir, 'recall'),
      embedder: o.embedder,
      maxLoaded: o.maxLoadedSessions ?? 64,
      maxDocsPerNamespace: o.maxMessagesPerSession,
      // Each search asks for exactly the k it needs (SearchIndex reads max(k, candidates) deep).
      candidates: 1,
      // No graph when nothing ranks by vector (the local embedder's default weight 0): each saved turn's insertion into
      // its session's graph, and the graph files' writes and loads, were work no search read.
      graph: this.#tuning.vectorWeight > 0,
      hnsw: o.hnsw,
      onSaveError: (err, file) => this.#onError(err, `saving ${file}`),
      ...(o.cacheRoom ? { cacheRoom: o.cacheRoom } : {}),
      source: {
        meta: (ns) => records.index.meta(ns),
        vectors: (ns) => records.index.vectors(ns),
        changes: (ns, from, to) => records.index.changes(ns, from, to),
        added: async (ns, docs) => {
          const owner = await records.owner(ns)
          if (owner === undefined) return []
          const seqs = docs.flatMap(([, [seq]]) => (typeof seq === 'number' ? [seq] : []))
          const [messages, vectors] = await Promise.all([
            records.messagesAt(owner.tenant, owner.sessionId, seqs),
            records.index.vectorsAt(ns, docs.map(([label]) => label)),
          ])
          return docs.flatMap(([label, [seq]]) => {
            const text = typeof seq === 'number' ? messages.get(seq)?.text : undefined
            const vector = vectors.get(label)
            return text === undefined || vector === undefined ? [] : [{ label, text, vector }]
          })
        },
        async *documents(ns) {
          const owner = await records.owner(ns)
          if (owner === undefined) return
          const labels = await records.labels(ns)
          const messages = await records.messagesAt(owner.tenant, owner.sessionId, labels.keys())
          for (const [seq, label] of labels) {
            const m = messages.get(seq)
            if (m !== undefined) yield { label, ref: [seq], text: m.text }
          }
        },
      },
    })
    records.attach(this)
  }

  /**
   * The session's turns ranked for `query`, with their neighbours prefetched; undefined when nothing matches. `room`
   * is about what the block will get (it is only known exactly when packing).
   */
  async search(tenant: string, sessionId: string, query: string, room: Tokens, cancel: Cancel = {}): Promise<RecallCandidates | undefined> {
    const ns = this.namespaceOf(tenant, sessionId)
    const meta = await this.#records.index.meta(ns)
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
        semantic = bySeq((await this.#index.search(ns, q, k, 'vector', cancel)).filter((h) => h.score >= minSimilarity))
      } catch (err) {
        // The client left: nothing to fall back for.
        if (cancel.signal?.aborted === true) throw err
        this.#onError(err, 'recall vector search (falling back to BM25)')
      }
    }
    const ranked = reciprocalRankFusion([lexical, semantic], { k: rrfK, weights: [1, vectorWeight] }).map((h) => h.label)
    if (ranked.length === 0) return undefined

    const wanted = new Set<number>()
    for (const seq of ranked) for (const s of [seq - 1, seq, seq + 1]) wanted.add(s)
    const previous = this.#tuning.keepTop > 0 ? this.#sent.get(sessionKey(tenant, sessionId)) : undefined
    for (const s of previous?.seqs ?? []) wanted.add(s)
    const messages = await this.#records.messagesAt(tenant, sessionId, wanted)
    const lines = this.#linesOf(ns, meta.epoch)
    const missing = [...messages.keys()].filter((seq) => !lines.has(seq))
    const stored = missing.length === 0 ? undefined : await this.#records.lines(ns, missing)
    const turns = new Map<number, RecallTurn>()
    for (const [seq, m] of messages) {
      let line = lines.get(seq)
      if (line === undefined) {
        // A turn never indexed (saved while recall was off) can still be a neighbour: count its line now.
        line = stored?.get(seq) ?? this.#counter.textTokens(renderLine(m.role, m.text))
        lines.set(seq, line)
      }
      turns.set(seq, recallTurn(m, line))
    }
    return { ranked: ranked.filter((s) => turns.has(s)), turns, ...(previous ? { previous } : {}) }
  }

  /** What the session's request sent (undefined: no block), for the next request's `keepTop`. */
  sent(tenant: string, sessionId: string, block: SentBlock | undefined): void {
    if (this.#tuning.keepTop <= 0) return
    const key = sessionKey(tenant, sessionId)
    if (block === undefined) this.#sent.delete(key)
    else this.#sent.set(key, block)
  }

  /**
   * The recall block for `model` within `room` (and the configured maximum): hits best first, each with its neighbour,
   * older than the recent window and not in it. Undefined when nothing fits.
   */
  select(
    c: RecallCandidates,
    ctx: { room: Tokens; recent: ReadonlySet<number>; oldestRecentSeq: number | undefined; nextSeq?: number },
    model: string,
  ): RecallBlock | undefined {
    const budget = Math.min(ctx.room, this.#maxTokens) - this.#counter.messageTokensFromContent(0, model)
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
    const block = selectBlock(c, { budget, recent: ctx.recent, oldestRecentSeq: ctx.oldestRecentSeq }, this.#tuning.neighbours, counting, this.#tuning.keepTop)
    if (block === undefined) return undefined
    return {
      message: { role: BLOCK_ROLE, content: block.content },
      seqs: block.seqs,
      tokens: this.#counter.messageTokensFromContent(block.tokens, model),
      // Sent again: where it was first sent; new: after the history, then before the turns saved after it.
      before: block.again === true && c.previous !== undefined ? c.previous.before : ctx.nextSeq,
    }
  }


  close(): Promise<void> {
    return this.#index.close()
  }

  namespaceOf(tenant: string, sessionId: string): string {
    const key = sessionKey(tenant, sessionId)
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

  /** Before a save's transaction (RecallIndexer): the messages' embeddings and line counts, or undefined on failure. */
  async prepare(messages: readonly ChatMessage[]): Promise<RecallPrepared | undefined> {
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

  /** Once a save has committed (RecallIndexer): the loaded index and the line cache follow it. */
  saved(write: RecallWrite): void {
    const ns = write.namespace
    try {
      if (write.dropped) this.#forget(ns)
      const { removed, added } = write
      if (removed !== undefined) void this.#index.applyRemove(ns, removed.fromVersion, removed.meta, removed.labels)
      // Whatever epoch they were cached under (at most maxLoadedSessions keys: a scan is cheap).
      if (write.gone.length > 0)
        for (const [key, lines] of this.#lines.entries()) if (key.startsWith(`${ns}\u0000`)) for (const seq of write.gone) lines.delete(seq)
      if (added !== undefined) {
        const docs = added.docs.map((d) => ({ label: d.label, ref: [d.seq], text: d.text, vector: d.vector }))
        void this.#index.applyAdd(ns, added.change.fromVersion, added.change.meta, docs)
      }
    } catch (err) {
      // The store has the change; the in-memory index is rebuilt from it on next use.
      this.#forget(ns)
      this.#onError(err, 'updating a loaded recall index')
    }
  }

  /** Around a session's delete (RecallIndexer). Removing the graph file early is safe: it is only a cache. */
  deleted(namespace: string): void {
    this.#forget(namespace)
  }
}

export function namespaceOf(tenant: string, sessionId: string): string {
  return `recall:${namespaceHash(sessionKey(tenant, sessionId))}`
}


