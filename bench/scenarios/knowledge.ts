/**
 * A knowledge base of 100k chunks (10k with --quick), retrieval on: every request runs the hybrid search (BM25 +
 * HNSW, fused) over the tenant's chunks, packs the best into the prompt as a system message, and relays. A second
 * pair of arms adds a 200-message session (memory and RAG on together).
 *
 * The knowledge base is built once through KnowledgeBase.ingest (the code behind POST /api/v1/files) with the
 * gateway's default chunking and local embedder, and cached under $TMPDIR/recallgate-bench-cache/ for later runs.
 * Baselines: the exact prompts recallgate built (captured from the mock) sent direct to the mock.
 * `--ab DIR`: another build's gateway on the same DATA_DIR (the same knowledge base) with a session of its own, as two
 * more arms (`before rag`, `before rag+session`), and
 * rows of this build's gateway CPU per request against it.
 */
import { chatRequest } from '../../src/cli/bench.js'
import { Corpus } from '../lib/corpus.js'
import { arm, armProblems, latencyRow } from '../lib/arm-report.js'
import { describeArms, interleave, type Arm } from '../lib/interleave.js'
import { cachedKnowledgeBase } from '../lib/kb-cache.js'
import { BENCH_KEY, callJson, capturedUpstreamBody, chatBody, PROVIDER_KEY, startStack, type ScenarioContext } from '../lib/stack.js'
import { mb, ratio, us } from '../lib/stats.js'
import type { Row } from '../lib/table.js'
import type { ScenarioResult } from './relay.js'
import { SESSION_MESSAGES, seedSession } from './session.js'

interface ChatReply {
  _metadata: { memory: { historyMessages: number }; rag: { resultsFound: number }; context: { includedChunks: number; totalTokens: number } }
}

export async function knowledgeScenario(ctx: ScenarioContext): Promise<ScenarioResult> {
  const chunks = ctx.quick ? 10_000 : 100_000
  const label = `knowledge base, ${chunks / 1000}k chunks`
  const { dataDir } = await cachedKnowledgeBase(BENCH_KEY, chunks, (l) => ctx.log(`knowledge: ${l}`))

  const loadStarted = performance.now()
  const stack = await startStack({
    dataDir,
    cpuProfDir: ctx.cpuProfDir,
    abDist: ctx.abDist,
    abSameDataDir: true,
    env: {
      MAX_SESSION_MESSAGES: String(SESSION_MESSAGES),
      // The corpus is made-up words, so its question holds too little of any chunk to pass the relevance gate: gate
      // off, so every request pays for retrieving and packing the chunks (the case this scenario times).
      RAG_MIN_RELEVANCE: '0',
      RAG_FULL_RELEVANCE: '0',
      // Nor does the score ratio cut how many chunks are packed: the work timed stays what it was before the ratio.
      RAG_SCORE_RATIO: '0',
      // Nor each chunk's own relevance floor (RAG_CHUNK_MIN_RELEVANCE): with it, one chunk of the eight reached the
      // prompt here (the made-up words again) and the scenario timed packing one excerpt instead of the budget's worth.
      RAG_CHUNK_MIN_RELEVANCE: '0',
    },
  })
  const loadSeconds = (performance.now() - loadStarted) / 1000
  const problems: string[] = []
  const sessionId = 'bench-kb-session'
  const beforeSessionId = 'bench-kb-session-before'
  try {
    const idleRss = (await stack.gateway.stats()).rss
    const corpus = new Corpus(42)
    const question = `What does the documentation say about ${corpus.sentence(10)}`
    const first = (await callJson(stack.origins.gateway, 'POST', '/api/v1/chat/completions', chatBody(question))) as ChatReply
    if (first._metadata.rag.resultsFound === 0 || first._metadata.context.includedChunks === 0)
      problems.push(`knowledge: retrieval found nothing (${JSON.stringify(first._metadata.rag)})`)
    const kbPrompt = await capturedUpstreamBody(stack)

    ctx.log(`knowledge: seeding a ${SESSION_MESSAGES}-message session`)
    await seedSession(stack, sessionId, question)
    const withSession = (await callJson(stack.origins.gateway, 'POST', '/api/v1/chat/completions', chatBody(question, { sessionId }))) as ChatReply
    const bothPrompt = await capturedUpstreamBody(stack)
    if (withSession._metadata.memory.historyMessages === 0) problems.push('knowledge: the session added no history')

    const req = (body: Record<string, unknown>) => chatRequest({ basePath: '/api/v1', serviceKey: BENCH_KEY, providerKey: PROVIDER_KEY, body })
    const arms: Arm[] = [
      { name: 'direct rag', origin: stack.origins.mock, request: req(kbPrompt) },
      { name: 'recallgate rag', origin: stack.origins.gateway, request: req(chatBody(question)), proc: stack.gateway },
      { name: 'direct rag+session', origin: stack.origins.mock, request: req(bothPrompt) },
      { name: 'recallgate rag+session', origin: stack.origins.gateway, request: req(chatBody(question, { sessionId })), proc: stack.gateway },
    ]
    const before = stack.before
    if (before !== undefined) {
      // The other build loads the same index, and answers from a session of its own seeded the same way: sharing one
      // session, each process applied the other's saved exchanges from the change log on every request and each build
      // rewrote the session's recall files its own way, which read as 1.03-1.21x in one build's rag+session CPU while
      // the same two builds on separate DATA_DIRs were equal (1.008x; docs/benchmarks.md, "Twelfth round").
      await callJson(before.url, 'POST', '/api/v1/chat/completions', chatBody(question))
      await seedSession(stack, beforeSessionId, question)
      arms.push(
        { name: 'before rag', origin: before.url, request: req(chatBody(question)), proc: before },
        { name: 'before rag+session', origin: before.url, request: req(chatBody(question, { sessionId: beforeSessionId })), proc: before },
      )
    }
    const rounds = ctx.quick ? 4 : 8
    const batch = ctx.quick ? 50 : 80
    ctx.log(`knowledge: serial, ${rounds} rounds × ${batch} requests per arm`)
    const m = await interleave(arms, { rounds, batch: { connections: 1, requests: batch }, warmup: { connections: 1, requests: 100 }, afterWarmup: () => stack.profileStart() })
    if (ctx.verbose) ctx.log(describeArms('knowledge, serial', m))
    problems.push(...armProblems('knowledge', m))
    const busyRss = (await stack.gateway.stats()).rss
    const rows: Row[] = [
      latencyRow(m, {
        scenario: label,
        measure: `serial p50, RAG on (${first._metadata.context.includedChunks} chunks in prompt)`,
        arm: 'recallgate rag',
        baseline: 'direct rag',
        baselineLabel: 'direct, same prompt',
        p: 0.5,
        targetMs: 2,
      }),
      latencyRow(m, { scenario: label, measure: 'serial p99, RAG on', arm: 'recallgate rag', baseline: 'direct rag', p: 0.99 }),
      latencyRow(m, {
        scenario: label,
        measure: `serial p50, RAG + ${SESSION_MESSAGES}-message session`,
        arm: 'recallgate rag+session',
        baseline: 'direct rag+session',
        baselineLabel: 'direct, same prompt',
        p: 0.5,
        targetMs: 2,
      }),
      ...(before === undefined
        ? []
        : (['rag', 'rag+session'] as const).map((kind): Row => {
            const cpu = (name: string): number => arm(m, name).cpuUsPerRequest
            const r = cpu(`recallgate ${kind}`) / cpu(`before ${kind}`)
            return { scenario: label, measure: `gateway CPU per request, ${kind}, this build ÷ --ab build`, baseline: `before ${us(cpu(`before ${kind}`) / 1000)}`, value: us(cpu(`recallgate ${kind}`) / 1000), delta: ratio(r), target: '' }
          })),
      {
        scenario: label,
        measure: `gateway RSS (index load ${loadSeconds.toFixed(1)} s)`,
        baseline: '',
        value: `${mb(idleRss)} idle, ${mb(busyRss)} after`,
        delta: '',
        target: '',
      },
    ]
    return { rows, problems }
  } finally {
    await callJson(stack.origins.gateway, 'DELETE', `/api/v1/sessions/${sessionId}`).catch(() => undefined)
    if (stack.before !== undefined) await callJson(stack.origins.gateway, 'DELETE', `/api/v1/sessions/${beforeSessionId}`).catch(() => undefined)
    await stack.close()
  }
}
