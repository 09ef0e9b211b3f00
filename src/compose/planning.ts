/** The planner part of the gateway: per-plan quotas and the chat planner over memory, retrieval, recall and packing. */
import { Planner } from '../chat/planner.js'
import type { Config } from '../config.js'
import type { TokenCounter } from '../context/tokenizer.js'
import { Quotas } from '../quotas/quotas.js'
import type { SessionStore } from '../storage/interface.js'
import type { ModelCatalog } from '../upstream/model-catalog.js'
import type { Indexes } from './indexes.js'

export function createPlanning(opts: {
  config: Config
  counter: TokenCounter
  sessions: SessionStore
  indexes: Indexes
  catalog: ModelCatalog
}): { planner: Planner; quotas: Quotas } {
  const { config, counter, sessions, catalog } = opts
  const { knowledge, recall } = opts.indexes
  const quotas = new Quotas({ plans: config.quotas, files: knowledge, sessions })
  const planner = new Planner({
    quotas,
    counter,
    sessions,
    knowledge,
    catalog,
    defaultContextLength: config.defaultContextLength,
    defaultMaxTokens: config.defaultMaxTokens,
    maxHistoryMessages: config.maxHistoryMessages,
    historyStep: config.historyStep,
    promptCache: config.promptCache,
    ragBudgetShare: config.ragBudgetShare,
    ragMaxTokens: config.ragMaxTokens,
    ragTopK: config.ragTopK,
    relevanceGate: { minRelevance: config.ragMinRelevance, fullRelevance: config.ragFullRelevance, hitFloor: config.ragChunkMinRelevance, scoreRatio: config.ragScoreRatio, marginalHits: config.ragMarginalHits, focusNeighbours: config.ragFocusNeighbours },
    ...(recall ? { recall: { service: recall, recentShare: config.recallRecentShare } } : {}),
  })
  return { planner, quotas }
}
