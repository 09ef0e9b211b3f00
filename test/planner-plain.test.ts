/**
 * A request with no session, no history and nothing to retrieve (`useRAG: false`, or a tenant without files on a store
 * that answers at once) takes the planner's short path. What it sends upstream and what it reports (`_metadata`, the
 * trace, the count learned from) must be what the general path gives the same request: the general path is reached
 * with the same messages and an empty given history.
 */
import t from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { Planner } from '../src/chat/planner.js'
import { validateChat, type ChatRequest } from '../src/chat/validate.js'
import { TokenCounter } from '../src/context/tokenizer.js'
import type { KnowledgeBase, SearchHit } from '../src/knowledge/knowledge-base.js'
import { relevantHits, type RelevanceGate } from '../src/knowledge/relevance.js'
import type { SessionStore } from '../src/storage/interface.js'
import type { ModelCatalog } from '../src/upstream/model-catalog.js'
import type { Tenant } from '../src/types.js'

const counter = new TokenCounter({ margins: { anthropic: 0.15, '*': 0 } })
const tenant: Tenant = { id: 'tenant-a', plan: 'free' } as Tenant

/**
 * A tenant without files, as the knowledge base answers for one: nothing found, nothing relevant, no chunks.
 * `sync`: the store answers `hasChunksNow` (embedded), else only through the async path (a database).
 */
function noFiles(sync: boolean): KnowledgeBase {
  return {
    hasChunksNow: () => (sync ? false : undefined),
    hasChunks: () => Promise.resolve(false),
    search: () => Promise.resolve([]),
    relevant: (_tenant: string, _query: string, ranked: readonly SearchHit[], gate: RelevanceGate) => ({ ...relevantHits(ranked, gate) }),
  } as unknown as KnowledgeBase
}

/** `listed`: the model list is cached (the short path answers synchronously), else it is still being fetched. */
function planner(window: number, listed = true, knowledge?: KnowledgeBase): Planner {
  // Neither path reads a session for these requests (nor, without `knowledge`, the knowledge base): any use throws.
  const unused = new Proxy({}, { get: () => () => Promise.reject(new Error('not used by a plain request')) })
  return new Planner({
    counter,
    sessions: unused as SessionStore,
    knowledge: knowledge ?? (unused as KnowledgeBase),
    catalog: { contextLength: () => Promise.resolve(window), knownContextLength: () => (listed ? { window } : undefined) } as unknown as ModelCatalog,
    defaultContextLength: 128_000,
    defaultMaxTokens: 4096,
    maxHistoryMessages: 50,
    ragBudgetShare: 0.25,
    ragMaxTokens: 4000,
    ragTopK: 8,
  })
}

async function outcome(p: Planner, req: ChatRequest): Promise<unknown> {
  try {
    const { messages, metadata, countedTokens, excerpts, trace } = await p.prepare(tenant, req, 'Bearer x', {})
    return { messages, metadata, countedTokens, excerpts, trace }
  } catch (err) {
    const e = err as { code?: string; param?: string; message: string }
    return { error: e.code, param: e.param, message: e.message }
  }
}

const text = fc.oneof(fc.lorem({ maxCount: 30 }), fc.string({ maxLength: 80 }), fc.constantFrom('', 'thanks!', 'ok 👍'))
const call = (id: string) => ({ id, type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } })
/** A conversation's turns as a client sends them, tool calls and their results included (and sometimes left unpaired). */
const message = fc.oneof(
  { weight: 4, arbitrary: text.map((content) => ({ role: 'user', content })) },
  { weight: 3, arbitrary: text.map((content) => ({ role: 'assistant', content })) },
  { weight: 1, arbitrary: fc.array(fc.constantFrom('c1', 'c2', 'c3'), { minLength: 1, maxLength: 2 }).map((ids) => ({ role: 'assistant', content: null, tool_calls: [...new Set(ids)].map(call) })) },
  { weight: 1, arbitrary: fc.constantFrom('c1', 'c2', 'c4').map((id) => ({ role: 'tool', tool_call_id: id, content: 'result' })) },
  { weight: 2, arbitrary: text.map((content) => ({ role: 'user', content: [{ type: 'text', text: content }] })) },
)
const body = fc.record(
  {
    model: fc.constantFrom('openai/gpt-4o', 'anthropic/claude-3.5-sonnet', 'openai/gpt-3.5-turbo'),
    system: fc.array(fc.record({ role: fc.constantFrom('system', 'developer'), content: text }), { maxLength: 2 }),
    messages: fc.array(message, { minLength: 1, maxLength: 6 }),
    max_tokens: fc.option(fc.integer({ min: 1, max: 3000 }), { nil: undefined }),
    tools: fc.option(fc.constant([{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }]), { nil: undefined }),
    useRAG: fc.option(fc.boolean(), { nil: undefined }),
    ragQuery: fc.option(fc.constantFrom('', '  ', 'refund policy', 'thanks!'), { nil: undefined }),
  },
  { requiredKeys: ['model', 'system', 'messages'] },
)

t.test('the short path sends and reports what the general path does (random requests, both outcomes)', async (t) => {
  const planners = [true, false].flatMap((listed) => [600, 128_000].flatMap((w) => [planner(w, listed, noFiles(true)), planner(w, listed, noFiles(false))]))
  let plainOk = 0
  let plainRefused = 0
  const reasons = new Set<string>()
  await fc.assert(
    fc.asyncProperty(body, async (b) => {
      const { system, messages, ...rest } = b
      const req = validateChat({ ...rest, messages: [...system, ...messages] }, { maxMessages: 100, maxSessionIdLength: 128 })
      for (const p of planners) {
        const plain = await outcome(p, req)
        const general = await outcome(p, { ...req, history: [] })
        t.same(plain, general)
        const reason = (plain as { metadata?: { rag: { reason: string } } }).metadata?.rag.reason
        if (reason !== undefined) reasons.add(reason)
        if ((plain as { error?: string }).error === undefined) plainOk++
        else plainRefused++
      }
    }),
    { numRuns: 150 },
  )
  // Both outcomes were exercised: packed requests, and refusals (unpaired tool calls, a window too small).
  t.ok(plainOk > 200 && plainRefused > 80, `${plainOk} packed, ${plainRefused} refused`)
  t.same([...reasons].sort(), ['disabled', 'empty_query', 'no_files', 'small_talk'], 'every reason a plain request can have was seen')
})

t.test('with the model list cached, a plain request is planned without an await', async (t) => {
  const req = validateChat({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Which port?' }], useRAG: false }, { maxMessages: 100, maxSessionIdLength: 128 })
  const withRag = validateChat({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Which port?' }] }, { maxMessages: 100, maxSessionIdLength: 128 })
  t.notOk(planner(128_000, true, noFiles(true)).prepare(tenant, withRag, 'Bearer x', {}) instanceof Promise, 'a tenant without files, on a store that answers at once')
  t.ok(planner(128_000, true, noFiles(false)).prepare(tenant, withRag, 'Bearer x', {}) instanceof Promise, 'a store that answers only asynchronously')
  t.notOk(planner(128_000).prepare(tenant, req, 'Bearer x', {}) instanceof Promise)
  t.ok(planner(128_000, false).prepare(tenant, req, 'Bearer x', {}) instanceof Promise, 'the first request waits for the list')
})

t.test('a tenant with files still gets its search', async (t) => {
  const req = validateChat({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Which port does the staging database listen on?' }] }, { maxMessages: 100, maxSessionIdLength: 128 })
  const withFiles = { hasChunksNow: () => true, search: () => Promise.reject(new Error('searched')) } as unknown as KnowledgeBase
  t.match(await outcome(planner(128_000, true, withFiles), req), { message: 'searched' })
})
