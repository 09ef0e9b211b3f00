/**
 * Prompt caching over a long session: the share of prompt tokens a provider's prefix cache can serve, through the
 * gateway (memory and retrieval on) against a client that keeps and sends its own history, in the same run.
 *
 * Method: a mock OpenRouter and a gateway run in this process (real HTTP on 127.0.0.1, real LMDB in a temp dir). The
 * mock emulates OpenAI's automatic cache: `usage.prompt_tokens_details.cached_tokens` is the longest prefix the prompt
 * shares with one of the model's 64 most recent prompts, in 128-token steps from 1,024 tokens. A few SQuAD articles
 * are uploaded as files. One LoCoMo conversation (default conv-41: 663 turns, ~330 exchanges) is replayed into one
 * session on a model with a 16,384-token window: speaker A's turns since the last B turn are one request, the mock
 * scripted to answer B's turn (as bench/memory-eval.ts does), with memory, recall and retrieval at their defaults.
 * The share is Σ cached_tokens / Σ prompt_tokens over the replay, as the upstream reported them (what is billed).
 * "History/request" is the mean number of stored messages packed per request: what a cache-friendly start costs.
 * The client arm sends the same turns straight to the mock with its whole history, dropping its oldest turns when
 * the prompt and the 1,024-token reply reserve would not fit (what most apps do).
 * Arms: HISTORY_STEP 1 (the start moves with every turn once the window is full), 8, 16, 32, 64.
 * Where the uncached tokens come from, per gateway arm: the recall block's and the excerpts' tokens per request (read
 * from the body the mock received) and the "full misses", requests of ≥ 1,024 tokens with nothing cached (the
 * history's start jumped). `--env A=1,B=2` sets gateway settings for every arm (RECALL_MAX_TOKENS, RECALL_KEEP_TOP…).
 *
 * Results (2026-11-26, issue 24; tuned on conv-41 at 16k, the others measured after):
 *   conv-41, 16k: 90.6% at HISTORY_STEP=32 / RECALL_MAX_TOKENS=3000 (recall block 411 tokens/request, 9 full misses);
 *     91.3% at 32 / 2400; 92.6% at 64 / 2400, the defaults (332 tokens/request, 6 full misses); 92.5% at 128 / 2400.
 *   conv-26+conv-30 as one session, 16k: 90.2% → 92.7%; conv-26 / conv-30 / conv-41 at 8k: 71.4 / 76.2 / 63.6% →
 *     76.1 / 80.3 / 69.3%. With RECALL=off, conv-41 at 8k reaches 92.6% (step 32) / 95.0% (64): at 8k the recall block
 *     is what stands between the gateway and 92%. RECALL_KEEP_TOP (off by default, README "Prompt caching" for what it
 *     costs recall) at 1 / 2 / 3 / 4: conv-41 8k 73.8 / 69.6 / 67.4 / 66.2% against 63.6% (old defaults).
 *
 * `--conversation conv-26+conv-30` replays several conversations one after the other into the one session: a session
 * long enough to overflow 16k that nothing was tuned on.
 *
 * Usage: node dist/bench/cache-eval.js [--conversation conv-41] [--steps 1,8,16,32,64] [--articles 3] [--window 16384] [--json]
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { encode, encodeChat } from 'gpt-tokenizer'
import { loadConfig } from '../src/config.js'
import { startGateway, type Gateway } from '../src/main.js'
import { startMockUpstream, type MockUpstream } from '../src/mock-upstream.js'
import { RECALL_PREAMBLE } from '../src/recall/session-recall.js'
import { CONTEXT_PREAMBLE } from '../src/knowledge/context-message.js'
import { loadLocomo, type Conversation } from './lib/locomo.js'
import { sharedDataPath } from './lib/project-root.js'

const KEY = 'rg_cache_eval_key_0001-Vq8Zr3Lw5Ym2'
/** `--env A=1,B=2`: settings for every gateway arm (to measure a trade-off). */
const extraEnv: Record<string, string> = Object.fromEntries(
  (process.argv.includes('--env') ? (process.argv[process.argv.indexOf('--env') + 1] ?? '') : '')
    .split(',')
    .filter((kv) => kv.includes('='))
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
)
const PROVIDER = 'sk-or-eval'
const MODEL = 'openai/gpt-4o'
const CLIENT_MODEL = 'openai/gpt-4o-client'
/** `--window N`: the model's context window (default 16,384); a smaller one makes a shorter conversation overflow it. */
const WINDOW = Number(arg('window') ?? 16_384)
const RESERVE = 1024

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : undefined
}

interface Usage {
  prompt_tokens: number
  prompt_tokens_details?: { cached_tokens?: number }
}

export interface CacheRow {
  arm: string
  requests: number
  promptTokens: number
  cachedTokens: number
  share: number
  /** Mean stored messages packed per request (gateway arms), or mean history messages sent (client arm). */
  historyPerRequest: number
  /** Mean of `_metadata.context.stablePrefixTokens` / prompt tokens (gateway arms). */
  reportedShare: number
  /** Where the uncached tokens come from (gateway arms), per request: the recall block's and the excerpts' tokens. */
  recallPerRequest: number
  excerptsPerRequest: number
  /** Requests of at least 1,024 prompt tokens with nothing cached (the history's start jumped, or the first). */
  fullMisses: number
}

const sink = (): Writable => new Writable({ write: (_c, _e, cb) => cb() })

async function post(url: string, body: Record<string, unknown>, headers: Record<string, string>): Promise<Record<string, unknown>> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${PROVIDER}`, ...headers },
    body: JSON.stringify(body),
  })
  const json = (await res.json()) as Record<string, unknown>
  if (res.status !== 200 && res.status !== 201) throw new Error(`${res.status}: ${JSON.stringify(json).slice(0, 300)}`)
  return json
}

/** The conversation as requests: the messages each one carries and the reply the mock is scripted to give. */
type Exchange = { messages: Array<{ role: 'user' | 'assistant'; content: string }>; reply: string }

/** One session: the conversations' exchanges one after the other (`conv-26+conv-30`: a longer session nobody tuned on). */
interface Replay {
  name: string
  exchanges: Exchange[]
}

function exchanges(c: Conversation): Exchange[] {
  const out: Exchange[] = []
  let pending: Array<{ role: 'user' | 'assistant'; content: string }> = []
  for (const s of c.sessions) {
    for (const t of s.turns) {
      if (t.speaker === c.speakerA) pending.push({ role: 'user', content: t.text })
      else if (pending.some((m) => m.role === 'user')) {
        out.push({ messages: pending, reply: t.text })
        pending = []
      } else pending.push({ role: 'assistant', content: t.text })
    }
  }
  if (pending.length > 0) out.push({ messages: pending, reply: '' })
  return out
}

function articles(n: number): Array<{ filename: string; content: string }> {
  const squad = JSON.parse(readFileSync(sharedDataPath('squad-dev-v2.0.json'), 'utf8')) as {
    data: Array<{ title: string; paragraphs: Array<{ context: string }> }>
  }
  return squad.data.slice(0, n).map((a) => ({ filename: `${a.title}.txt`, content: a.paragraphs.map((p) => p.context).join('\n\n') }))
}

async function gatewayArm(mock: MockUpstream, c: Replay, step: number, files: Array<{ filename: string; content: string }>): Promise<CacheRow> {
  const dataDir = mkdtempSync(join(tmpdir(), 'recallgate-cache-eval-'))
  let gw: Gateway | undefined
  try {
    const config = loadConfig({
      PORT: '0',
      UPSTREAM_BASE_URL: mock.url,
      DATA_DIR: dataDir,
      SERVICE_KEYS: `${KEY}:unlimited`,
      LOG_LEVEL: 'warn',
      HISTORY_STEP: String(step),
      ...extraEnv,
    })
    gw = await startGateway(config, { logDestination: sink(), onBootstrapKey: () => undefined })
    for (const f of files) await post(`${gw.url}/api/v1/files`, f, { serviceKey: KEY })
    const row: CacheRow = { ...emptyRow(`recallgate, HISTORY_STEP=${step}`) }
    let history = 0
    let reported = 0
    let recall = 0
    let excerpts = 0
    for (const x of c.exchanges) {
      mock.enqueue({ reply: x.reply })
      const res = await post(`${gw.url}/api/v1/chat/completions`, { model: MODEL, messages: x.messages, sessionId: `${c.name}-${step}` }, { serviceKey: KEY })
      const usage = res.usage as Usage
      const meta = res._metadata as { memory: { historyMessages: number }; context: { stablePrefixTokens: number; totalTokens: number } }
      row.requests++
      row.promptTokens += usage.prompt_tokens
      row.cachedTokens += usage.prompt_tokens_details?.cached_tokens ?? 0
      history += meta.memory.historyMessages
      reported += meta.context.stablePrefixTokens
      if (usage.prompt_tokens >= 1024 && (usage.prompt_tokens_details?.cached_tokens ?? 0) === 0) row.fullMisses++
      for (const m of (mock.lastChatBody()?.messages ?? []) as Array<{ content: unknown }>) {
        if (typeof m.content !== 'string') continue
        if (m.content.startsWith(RECALL_PREAMBLE)) recall += encode(m.content).length
        else if (m.content.startsWith(CONTEXT_PREAMBLE)) excerpts += encode(m.content).length
      }
    }
    row.share = row.cachedTokens / row.promptTokens
    row.historyPerRequest = history / row.requests
    row.reportedShare = reported / row.promptTokens
    row.recallPerRequest = recall / row.requests
    row.excerptsPerRequest = excerpts / row.requests
    return row
  } finally {
    await gw?.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

function emptyRow(arm: string): CacheRow {
  return { arm, requests: 0, promptTokens: 0, cachedTokens: 0, share: 0, historyPerRequest: 0, reportedShare: 0, recallPerRequest: 0, excerptsPerRequest: 0, fullMisses: 0 }
}

/** A client that sends its own history, dropping its oldest messages (a user turn at a time) to fit. */
async function clientArm(mock: MockUpstream, c: Replay): Promise<CacheRow> {
  const row: CacheRow = { ...emptyRow('client sends its own history') }
  let history: Array<{ role: 'user' | 'assistant'; content: string }> = []
  let sent = 0
  for (const x of c.exchanges) {
    let prompt = [...history, ...x.messages]
    while (encodeChat(prompt, 'gpt-4o', { disallowedSpecial: new Set() }).length + RESERVE > WINDOW && history.length > 0) {
      // Drop the oldest turn: up to the next user message.
      let cut = 1
      while (cut < history.length && history[cut]?.role !== 'user') cut++
      history = history.slice(cut)
      prompt = [...history, ...x.messages]
    }
    mock.enqueue({ reply: x.reply })
    const res = await post(`${mock.url}/chat/completions`, { model: CLIENT_MODEL, messages: prompt, max_tokens: RESERVE }, {})
    const usage = res.usage as Usage
    row.requests++
    row.promptTokens += usage.prompt_tokens
    row.cachedTokens += usage.prompt_tokens_details?.cached_tokens ?? 0
    if (usage.prompt_tokens >= 1024 && (usage.prompt_tokens_details?.cached_tokens ?? 0) === 0) row.fullMisses++
    sent += history.length
    history = [...prompt, { role: 'assistant', content: x.reply }]
  }
  row.share = row.cachedTokens / row.promptTokens
  row.historyPerRequest = sent / row.requests
  return row
}

export async function runCacheEval(o: { conversation?: string; steps?: number[]; articles?: number } = {}): Promise<CacheRow[]> {
  const names = (o.conversation ?? 'conv-41').split('+')
  const found = loadLocomo(names)
  if (found.length !== names.length) throw new Error(`no LoCoMo conversation ${o.conversation}`)
  const c: Replay = { name: names.join('+'), exchanges: found.flatMap(exchanges) }
  const mock = await startMockUpstream({
    models: [
      { id: MODEL, context_length: WINDOW },
      { id: CLIENT_MODEL, context_length: WINDOW },
    ],
    // The last request only: the gateway arms read what the recall block and the excerpts took.
    maxRecorded: 1,
  })
  try {
    const files = articles(o.articles ?? 3)
    const rows = [await clientArm(mock, c)]
    for (const step of o.steps ?? [1, 8, 16, 32, 64]) rows.push(await gatewayArm(mock, c, step, files))
    return rows
  } finally {
    await mock.close()
  }
}

const steps = arg('steps')?.split(',').map(Number)
const rows = await runCacheEval({ conversation: arg('conversation'), steps, articles: Number(arg('articles') ?? 3) })
if (process.argv.includes('--json')) console.log(JSON.stringify(rows, null, 2))
else {
  console.log('| arm | requests | prompt tokens | cached tokens | cached share | stablePrefixTokens share | history messages/request | recall block tokens/request | excerpt tokens/request | full misses |')
  console.log('|---|---|---|---|---|---|---|---|---|---|')
  for (const r of rows) {
    const pct = (x: number): string => `${(100 * x).toFixed(1)}%`
    const gw = !r.arm.startsWith('client')
    console.log(`| ${r.arm} | ${r.requests} | ${r.promptTokens} | ${r.cachedTokens} | ${pct(r.share)} | ${r.arm.startsWith('client') ? '-' : pct(r.reportedShare)} | ${r.historyPerRequest.toFixed(1)} | ${gw ? r.recallPerRequest.toFixed(0) : '-'} | ${gw ? r.excerptsPerRequest.toFixed(0) : '-'} | ${r.fullMisses} |`)
  }
}
