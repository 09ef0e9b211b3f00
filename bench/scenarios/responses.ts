/**
 * The Responses API against the chat path it is bridged to, in one run, arms interleaved (issue 22):
 *   - the same small request as a chat completion and as a Responses request (`store: false`, no session, no
 *     retrieval), serial: added p50 latency, and for streams the added time to the first token: the first chat chunk
 *     with text in `delta.content` against the first `response.output_text.delta`. Neither counts what comes before
 *     the model's first text: the chat stream's role chunk (`content: ""`, relayed as soon as it arrives) and the
 *     Responses stream's `created`/`in_progress` events (sent before the upstream answers). Until 2026-11-26 the chat
 *     arm was timed at its first `data:`, the role chunk: one upstream write ahead of any text;
 *   - 32 connections: the gateway's CPU per request, Responses over chat;
 *   - a 50-turn `previous_response_id` chain against a 50-turn session (50 exchanges each, seeded through the gateway),
 *     each asked once more without saving (`store: false` / `saveToMemory: false`), serial.
 * A Responses request also pays a `store: true` save by default; that arm is reported on its own.
 */
import { chatRequest, type LoadRequest } from '../../src/cli/bench.js'
import { arm, armProblems, latencyRow } from '../lib/arm-report.js'
import { describeArms, interleave } from '../lib/interleave.js'
import { BENCH_KEY, callJson, chatBody, MODEL, PROVIDER_KEY, startStack, type ScenarioContext } from '../lib/stack.js'
import { quantile, ratio, signedUs, us } from '../lib/stats.js'
import type { Row } from '../lib/table.js'
import { FIRST_TOKEN_GAP_MS, MESSAGE, type ScenarioResult } from './relay.js'

const TURNS = 50
const RESPONSES_MARKS = { first: 'response.output_text.delta', done: 'event: response.completed' }
/** A chat chunk carrying text (the role chunk's `"content":""` does not match). */
const CHAT_MARKS = { first: /"content":"[^"]/, done: 'data: [DONE]' }

function responsesRequest(body: Record<string, unknown>): LoadRequest {
  return {
    path: '/api/v1/responses',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${PROVIDER_KEY}`, servicekey: BENCH_KEY },
    body: JSON.stringify({ model: MODEL, ...body }),
    stream: body.stream === true,
    ...(body.stream === true ? { marks: RESPONSES_MARKS } : {}),
  }
}

export async function responsesScenario(ctx: ScenarioContext): Promise<ScenarioResult> {
  const stack = await startStack({ cpuProfDir: ctx.cpuProfDir, mock: { maxRecorded: 0, behaviour: { firstTokenGapMs: FIRST_TOKEN_GAP_MS } } })
  const problems: string[] = []
  try {
    const g = stack.origins.gateway
    const chat = (extra: Record<string, unknown>): LoadRequest => {
      const request = chatRequest({ basePath: '/api/v1', serviceKey: BENCH_KEY, providerKey: PROVIDER_KEY, body: chatBody(MESSAGE, { useRAG: false, ...extra }) })
      return request.stream ? { ...request, marks: CHAT_MARKS } : request
    }
    const resp = (extra: Record<string, unknown>) => responsesRequest({ input: MESSAGE, useRAG: false, store: false, ...extra })
    const arms = (stream: boolean) => [
      { name: 'chat', origin: g, request: chat(stream ? { stream } : {}), proc: stack.gateway },
      { name: 'responses', origin: g, request: resp(stream ? { stream } : {}), proc: stack.gateway },
      ...(stream ? [] : [{ name: 'responses stored', origin: g, request: resp({ store: true }), proc: stack.gateway }]),
    ]
    const rounds = ctx.quick ? 4 : 10
    const batch = ctx.quick ? 200 : 400
    const warmup = { connections: 4, requests: ctx.quick ? 300 : 1000 }
    ctx.log(`responses: serial non-stream and stream, ${rounds} rounds × ${batch} requests per arm`)
    const serial = await interleave(arms(false), { rounds, batch: { connections: 1, requests: batch }, warmup })
    const stream = await interleave(arms(true), { rounds, batch: { connections: 1, requests: batch }, warmup })
    ctx.log(`responses: 32 connections, ${rounds} rounds`)
    const c32 = await interleave(arms(false).slice(0, 2), {
      rounds,
      batch: { connections: 32, durationMs: ctx.quick ? 600 : 1000 },
      warmup: { connections: 32, durationMs: 500 },
      // --profile: this phase only (both arms run in the one gateway; the profile's src/ functions tell them apart).
      afterWarmup: () => stack.profileStart(),
    })
    await stack.profileStop('32 connections', { gateway: (c32.get('chat')?.ok ?? 0) + (c32.get('responses')?.ok ?? 0) })

    ctx.log(`responses: seeding a ${TURNS}-turn session and a ${TURNS}-turn chain`)
    let previous: string | undefined
    for (let i = 0; i < TURNS; i++) {
      await callJson(g, 'POST', '/api/v1/chat/completions', chatBody(`${MESSAGE} (turn ${i})`, { sessionId: 'bench-50', useRAG: false }))
      const r = (await callJson(g, 'POST', '/api/v1/responses', {
        model: MODEL,
        input: `${MESSAGE} (turn ${i})`,
        useRAG: false,
        ...(previous ? { previous_response_id: previous } : {}),
      })) as { id: string }
      previous = r.id
    }
    const chains = await interleave(
      [
        { name: 'session', origin: g, request: chat({ sessionId: 'bench-50', saveToMemory: false }), proc: stack.gateway },
        { name: 'chain', origin: g, request: resp({ previous_response_id: previous }), proc: stack.gateway },
      ],
      { rounds, batch: { connections: 1, requests: ctx.quick ? 100 : 200 }, warmup: { connections: 1, requests: 100 } },
    )
    if (ctx.verbose) {
      for (const [title, m] of [['serial', serial], ['stream', stream], ['32 connections', c32], ['50 turns', chains]] as const) ctx.log(describeArms(`responses, ${title}`, m))
    }
    for (const m of [serial, stream, c32, chains]) problems.push(...armProblems('responses', m))

    const p50 = (m: Map<string, unknown>, n: string, field: 'latencyMs' | 'ttftMs' = 'latencyMs') => quantile(arm(m as never, n)[field], 0.5)
    const addedLatency = p50(serial, 'responses') - p50(serial, 'chat')
    const addedTtft = p50(stream, 'responses', 'ttftMs') - p50(stream, 'chat', 'ttftMs')
    const cpu = arm(c32, 'responses').cpuUsPerRequest / arm(c32, 'chat').cpuUsPerRequest
    const chainRatio = p50(chains, 'chain') / p50(chains, 'session')
    const rows: Row[] = [
      {
        scenario: 'responses vs chat',
        measure: 'serial p50 latency added, non-stream',
        baseline: `chat ${us(p50(serial, 'chat'))}`,
        value: us(p50(serial, 'responses')),
        delta: signedUs(addedLatency),
        target: '≤ +50 µs',
        pass: addedLatency <= 0.05,
      },
      {
        scenario: 'responses vs chat',
        measure: 'serial p50 time to first token added, stream',
        baseline: `chat ${us(p50(stream, 'chat', 'ttftMs'))}`,
        value: us(p50(stream, 'responses', 'ttftMs')),
        delta: signedUs(addedTtft),
        target: '≤ +50 µs',
        pass: addedTtft <= 0.05,
      },
      {
        scenario: 'responses vs chat',
        measure: 'gateway CPU per request, 32 connections',
        baseline: `chat ${us(arm(c32, 'chat').cpuUsPerRequest / 1000)}`,
        value: us(arm(c32, 'responses').cpuUsPerRequest / 1000),
        delta: ratio(cpu),
        target: '≤ 1.10×',
        pass: cpu <= 1.1,
      },
      latencyRow(serial, { scenario: 'responses vs chat', measure: 'serial p50, store: true (durable save)', arm: 'responses stored', baseline: 'chat', p: 0.5 }),
      {
        scenario: `${TURNS}-turn chain vs session`,
        measure: 'serial p50, not saved',
        baseline: `session ${us(p50(chains, 'session'))}`,
        value: us(p50(chains, 'chain')),
        delta: ratio(chainRatio),
        target: '≈ 1×',
      },
    ]
    return { rows, problems }
  } finally {
    await stack.close()
  }
}
