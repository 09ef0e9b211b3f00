/**
 * A session of 200 messages, memory on (and retrieval on, the default, with no files): every request reads the
 * session's history, packs it with exact token counts, relays, then saves the exchange durably before answering.
 * MAX_SESSION_MESSAGES=200 keeps the session at 200 messages (each save prunes the two oldest), and every turn repeats
 * the same question, so the prompt sent upstream is identical on every request: the steady state of a long chat.
 *
 * Baseline: that same 201-message prompt (captured from the mock) sent direct to the mock, so both arms cost the mock
 * the same. A third arm with `saveToMemory: false` separates reading + packing from the durable write.
 */
import { chatRequest } from '../../src/cli/bench.js'
import { Corpus } from '../lib/corpus.js'
import { arm, armProblems, latencyRow } from '../lib/arm-report.js'
import { describeArms, interleave } from '../lib/interleave.js'
import { BENCH_KEY, callJson, capturedUpstreamBody, chatBody, PROVIDER_KEY, startStack, type ScenarioContext, type Stack } from '../lib/stack.js'
import { us } from '../lib/stats.js'
import type { Row } from '../lib/table.js'
import type { ScenarioResult } from './relay.js'

export const SESSION_MESSAGES = 200

/** Fill `sessionId` with SESSION_MESSAGES messages through the gateway itself (one exchange per request). */
export async function seedSession(stack: Stack, sessionId: string, question: string, extra: Record<string, unknown> = {}): Promise<void> {
  for (let i = 0; i < SESSION_MESSAGES / 2; i++) await callJson(stack.origins.gateway, 'POST', '/api/v1/chat/completions', chatBody(question, { sessionId, ...extra }))
  const s = (await callJson(stack.origins.gateway, 'GET', `/api/v1/sessions/${encodeURIComponent(sessionId)}`)) as { messages: unknown[] }
  if (s.messages.length !== SESSION_MESSAGES) throw new Error(`session holds ${s.messages.length} messages, expected ${SESSION_MESSAGES}`)
}

export async function sessionScenario(ctx: ScenarioContext): Promise<ScenarioResult> {
  const stack = await startStack({ cpuProfDir: ctx.cpuProfDir, env: { MAX_SESSION_MESSAGES: String(SESSION_MESSAGES) } })
  const problems: string[] = []
  try {
    const question = new Corpus(7).sentence(12)
    const sessionId = 'bench-session-200'
    ctx.log(`session: seeding ${SESSION_MESSAGES} messages`)
    await seedSession(stack, sessionId, question)
    const res = (await callJson(stack.origins.gateway, 'POST', '/api/v1/chat/completions', chatBody(question, { sessionId }))) as {
      _metadata: { memory: { historyMessages: number }; context: { totalTokens: number } }
    }
    const upstream = await capturedUpstreamBody(stack)
    const sent = (upstream.messages as unknown[]).length
    if (res._metadata.memory.historyMessages !== SESSION_MESSAGES || sent !== SESSION_MESSAGES + 1)
      problems.push(`session: expected ${SESSION_MESSAGES} history messages upstream, got ${res._metadata.memory.historyMessages} (${sent} sent)`)

    const req = (body: Record<string, unknown>) => chatRequest({ basePath: '/api/v1', serviceKey: BENCH_KEY, providerKey: PROVIDER_KEY, body })
    const arms = [
      { name: 'direct', origin: stack.origins.mock, request: req(upstream) },
      { name: 'recallgate', origin: stack.origins.gateway, request: req(chatBody(question, { sessionId })), proc: stack.gateway },
      {
        name: 'recallgate read-only',
        origin: stack.origins.gateway,
        request: req(chatBody(question, { sessionId, saveToMemory: false })),
        proc: stack.gateway,
      },
    ]
    const rounds = ctx.quick ? 4 : 8
    const batch = ctx.quick ? 60 : 100
    ctx.log(`session: serial, ${rounds} rounds × ${batch} requests per arm (prompt of ${res._metadata.context.totalTokens} tokens)`)
    const m = await interleave(arms, { rounds, batch: { connections: 1, requests: batch }, warmup: { connections: 1, requests: 200 }, afterWarmup: () => stack.profileStart() })
    if (ctx.verbose) ctx.log(describeArms('session, serial', m))
    problems.push(...armProblems('session', m))
    const after = (await callJson(stack.origins.gateway, 'GET', `/api/v1/sessions/${encodeURIComponent(sessionId)}`)) as { messages: unknown[] }
    if (after.messages.length !== SESSION_MESSAGES) problems.push(`session: holds ${after.messages.length} messages after the run`)

    const label = `session of ${SESSION_MESSAGES} messages`
    const rows: Row[] = [
      latencyRow(m, {
        scenario: label,
        measure: 'serial p50, memory + RAG on, saved',
        arm: 'recallgate',
        baseline: 'direct',
        baselineLabel: 'direct, same prompt',
        p: 0.5,
        targetMs: 2,
      }),
      latencyRow(m, { scenario: label, measure: 'serial p99, memory + RAG on, saved', arm: 'recallgate', baseline: 'direct', p: 0.99 }),
      latencyRow(m, { scenario: label, measure: 'serial p50, saveToMemory false', arm: 'recallgate read-only', baseline: 'direct', p: 0.5 }),
      {
        scenario: label,
        measure: 'gateway CPU per request: saved / read-only',
        baseline: '',
        value: `${us(arm(m, 'recallgate').cpuUsPerRequest / 1000)} / ${us(arm(m, 'recallgate read-only').cpuUsPerRequest / 1000)}`,
        delta: '',
        target: '',
      },
    ]
    return { rows, problems }
  } finally {
    await stack.close()
  }
}
