/**
 * The indexes part of the gateway: the embedder, the knowledge base (files → searchable chunks) and long-term recall
 * (saved turns → searchable per session), both over the engine's stores.
 */
import type { Config } from '../config.js'
import type { TokenCounter } from '../context/tokenizer.js'
import { KnowledgeBase } from '../knowledge/knowledge-base.js'
import type { Logger } from '../log.js'
import { SessionRecall, type RecallTuning } from '../recall/session-recall.js'
import { LocalEmbedder, type Embedder } from '../retrieval/embedder.js'
import { OpenAICompatibleEmbedder } from '../retrieval/openai-embedder.js'
import type { Stores } from '../storage/open-stores.js'
import type { Closers } from './closers.js'
import type { ReadinessCheck } from '../routes/ready.js'

export interface Indexes {
  readonly knowledge: KnowledgeBase
  /** Absent with RECALL_ENABLED off. */
  readonly recall: SessionRecall | undefined
  /**
   * Loads tenants' indexes in the background once the server listens (a tenant's first search loads its own). Issue
   * 18: with 100k chunks stored, awaiting this before listening took ≈ 5–8 s.
   */
  warm(): void
  /** With READY_AFTER_WARMUP=1, /readyz's `indexes` entry: `warming` (503) until that preload has finished. */
  readonly readiness: ReadinessCheck[]
}

export function openIndexes(opts: {
  config: Config
  stores: Stores
  counter: TokenCounter
  now: () => number
  logger: Logger
  closers: Closers
  recallTuning: Partial<RecallTuning> | undefined
  /** Whether DATA_DIR's disk has room for a graph file of this many bytes (storage/capacity.ts `roomForCache`). */
  cacheRoom: (bytes: number) => Promise<boolean>
}): Indexes {
  const { config, stores, logger } = opts
  const embedder = createEmbedder(config)
  const knowledge = new KnowledgeBase({
    files: stores.files,
    dataDir: config.dataDir,
    embedder,
    chunkTokens: config.chunkTokens,
    chunkOverlap: config.chunkOverlap,
    phraseWeight: config.ragPhraseWeight,
    maxChunksPerFile: config.maxChunksPerFile,
    maxFreshVectors: config.indexFreshMax,
    clock: opts.now,
    ...(stores.checkFileRoom ? { checkRoom: stores.checkFileRoom } : {}),
    extract: {
      concurrency: config.extract.concurrency,
      timeoutMs: config.extract.timeout,
      maxHeapMb: config.extract.workerMemoryMb,
      maxDecodedBytes: config.extract.maxDecodedBytes,
      maxTextChars: config.extract.maxTextChars,
    },
    // Graph files are a cache of the store: a failed save is worth a warning (the next start rebuilds), not a failed request.
    onIndexSaveError: (err, file) => logger.warn({ err, file }, 'could not save an index file'),
    indexCacheRoom: opts.cacheRoom,
  })
  let warming: Promise<void> = Promise.resolve()
  // Closed before the warm-up is awaited: closing stops it early.
  opts.closers.add(async () => {
    await knowledge.close()
    await warming
  })
  // Off means neither indexing nor searching: turns saved meanwhile are not recallable after turning it back on.
  // Recall indexes saved turns in the save's own transaction, through the store's hooks (storage/open-stores.ts).
  const recall = config.recallEnabled
    ? new SessionRecall({
        records: stores.recall,
        embedder,
        counter: opts.counter,
        dataDir: config.dataDir,
        maxTokens: config.recallMaxTokens,
        maxMessagesPerSession: config.maxSessionMessages,
        maxLoadedSessions: config.recallLoadedSessions,
        tuning: { candidates: config.recallTopK, keepTop: config.recallKeepTop, ...opts.recallTuning },
        onError: (err, what) => logger.warn({ err }, what),
        cacheRoom: opts.cacheRoom,
      })
    : undefined
  if (recall) opts.closers.add(() => recall.close())
  let warmed = false
  const warm = (): void => {
    // A failed preload is done too: the tenants it did not load load on their first search, as without it.
    warming = knowledge
      .init()
      .catch((err: unknown) => logger.warn({ err }, 'could not preload the knowledge base indexes'))
      .finally(() => {
        warmed = true
      })
  }
  const readiness: ReadinessCheck[] = config.readyAfterWarmup
    ? [{ name: 'indexes', required: true, failedAs: 'warming', check: () => (warmed ? Promise.resolve() : Promise.reject(new Error('warming'))) }]
    : []
  return { knowledge, recall, warm, readiness }
}

function createEmbedder(config: Config): Embedder {
  if (config.embeddings === 'local') return new LocalEmbedder()
  return new OpenAICompatibleEmbedder({
    baseUrl: config.embeddingsBaseUrl ?? '',
    model: config.embeddingsModel ?? '',
    apiKey: config.embeddingsApiKey,
  })
}
