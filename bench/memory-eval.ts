/**
 * Long-term recall on LoCoMo (../shared/data/locomo/conv-*.json, see its README): the share of evidence turns that
 * reach the upstream prompt when the model's window is 4,096 tokens, with recall against keeping only the newest turns.
 *
 * Method: a mock OpenRouter and a gateway run in this process (real HTTP on 127.0.0.1, real LMDB in a temp dir, the
 * local embedder). Each conversation is replayed into one session THROUGH THE API: speaker A's turns are `user`,
 * speaker B's `assistant`; for each B turn one request whose messages are the A turns since the last B turn, with the
 * mock scripted to reply B's text (`useRAG: false`; replayed on a large-window model so the replay itself never packs).
 * A B turn with no A turn before it (a session B opens) is sent as an assistant message at the head of the next
 * request; A turns left at the very end are sent with an empty reply. The gateway's wall clock is set to each LoCoMo
 * session's date, so saved turns carry their real dates (an exchange's turns share the date of its B turn).
 * Then every question of categories 1–4 is asked in the same session (`saveToMemory: false`, `useRAG: false`) on a
 * model whose context_length is 4,096 (reply reserve 1,024), and the body the mock received is checked: an evidence
 * turn (`dia_id`) is a hit when its text (whitespace collapsed) is in the prompt. Every request is also checked to fit:
 * totalTokens equals encodeChat of what the mock received, and totalTokens + reserve ≤ window.
 * Arms, each run by restarting the gateway on the same data: newest-only (RECALL=off), a naive split (half newest,
 * half BM25 turns, no neighbours, no vectors) and recall at the defaults; `--shares`, `--max-tokens`, `--top-k`,
 * `--vw`, `--min-sim`, `--neighbours` sweep a grid instead.
 *
 * Results (3 conversations, 385 questions, 519 evidence turns; share of evidence turns in the prompt; every prompt
 * within the window and counted exactly in every run below):
 *
 *   4,096-token window           all     conv-26  conv-30  conv-41   recalled turns/question
 *   newest only (RECALL=off)     19.5%   19.7%    27.4%    15.2%      0
 *   naive: ½ newest, ½ BM25      64.9%   63.5%    67.0%    65.2%     23
 *   recall, defaults             80.3%   82.3%    86.8%    75.2%     72
 *   (by category, defaults: multi-hop 67.9%, temporal 93.5%, open-domain 41.7%, single-hop 92.2%)
 *
 *   The reference figures (27% newest-only, 67% naive) are conv-30's; on it recall reaches 86.8% (≥ 85%).
 *   Over all three, 80.3%: conv-41 (663 turns, ~25k tokens, 6× the window) is the hard one.
 *
 *   Chosen by these sweeps (4,096 window, other knobs at their defaults):
 *   RECALL_RECENT_SHARE   0: 81.7%   0.1: 80.7%   0.2: 80.3%   0.3: 79.2%   0.5: 75.7%
 *     → 0.2: within 1.4 points of giving recall everything, and the newest ~600 tokens (8–10 turns here) always stay.
 *   neighbours            none: 67.1%   pair: 74.4%   both adjacent turns: 80.3%   → both (the evidence is often the
 *     turn next to the one the question matches: the answer to a matching question, the remark that prompted it).
 *   vector weight         0: 80.3%   0.1: 80.2%   0.3: 80.0%   1: 78.8%   → 0 for the local hashed embedder, whose
 *     vectors only repeat BM25's terms; a learned embedder's own fusion weight otherwise (not measurable offline).
 *   candidates (cap)      20: 76.9%   40: 80.3%   100: 80.3%   → 1 per 60 tokens of the block's room (41 here), at
 *     most RECALL_TOP_K = 100: more only costs time (bench/recall-perf.ts).
 *   RECALL_MAX_TOKENS, 8,192 window (newest only 40.5%):   2000: 85.0%   4000: 88.2%   8000: 88.6%
 *   RECALL_MAX_TOKENS, 16,384 window (newest only 80.3%):  2000: 94.4%   4000: 95.0%   8000: 96.1%
 *     → 4000: most of the gain; above it the block only eats into the newest turns of larger windows.
 *
 *   Why not 85% over all three at 4,096: the room holds ~70 of 369–663 turns, and the ranking is lexical (the local
 *   embedder adds nothing). With about twice the room (8,192) recall reaches 88%; the evidence still missed is mostly
 *   turns that share no term with their question and are not next to one that does ("kids" for "children", "puppy"
 *   for "dogs", a concert named for "musical artists"). A learned embedder (EMBEDDINGS=openai-compatible) is what
 *   would reach those; it cannot be measured offline here.
 *
 * Usage: node dist/bench/memory-eval.js [--conversations conv-26,conv-30] [--limit 0] [--json]
 *        [--shares 0.2,0.3] [--max-tokens 4000] [--top-k 40] [--vw 0.3] [--min-sim 0.3] [--neighbours pair,none,both]
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { encodeChat } from 'gpt-tokenizer'
import { loadConfig } from '../src/config.js'
import { startGateway, type Gateway } from '../src/main.js'
import { startMockUpstream, type MockUpstream } from '../src/mock-upstream.js'
import type { RecallTuning } from '../src/rag/session-recall.js'

interface Turn {
  speaker: string
  dia_id: string
  text: string
}
interface Conversation {
  name: string
  speakerA: string
  sessions: Array<{ date: number; turns: Turn[] }>
  questions: Array<{ question: string; category: number; evidence: string[] }>
  text: Map<string, string>
}

interface Arm {
  name: string
  env: Record<string, string>
  tuning?: Partial<RecallTuning>
}

interface Cell {
  evidence: number
  hits: number
}

interface ArmResult {
  arm: string
  questions: number
  evidence: number
  hits: number
  /** Questions with every evidence turn in the prompt. */
  complete: number
  byCategory: Map<number, Cell>
  byConversation: Map<string, Cell>
  recalled: number
  promptTokens: number
  overWindow: number
  miscounted: number
}

const KEY = 'rg_memory_eval_key_0001'
const PROVIDER = 'sk-or-eval'
const SMALL = 'openai/gpt-4o'
const LARGE = 'openai/gpt-4o-mini'

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : undefined
}
const list = (name: string): string[] | undefined => arg(name)?.split(',').filter(Boolean)
/** The small model's context_length (the figure the target is stated for: 4,096). */
const WINDOW = Number(arg('window') ?? 4096)

function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir)
    if (up === dir) throw new Error('package.json not found above ' + fileURLToPath(import.meta.url))
    dir = up
  }
  return dir
}

const MONTHS = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december']

/** "1:56 pm on 8 May, 2023" → epoch ms (UTC). */
function parseDate(s: string): number {
  const m = /(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+([a-z]+),?\s+(\d{4})/i.exec(s)
  if (m === null) throw new Error(`unrecognised LoCoMo date "${s}"`)
  const [, hh, mm, ampm, dd, month, yyyy] = m as unknown as [string, string, string, string, string, string, string]
  const hour = (Number(hh) % 12) + (ampm.toLowerCase() === 'pm' ? 12 : 0)
  const mon = MONTHS.indexOf(month.toLowerCase())
  if (mon < 0) throw new Error(`unrecognised month in "${s}"`)
  return Date.UTC(Number(yyyy), mon, Number(dd), hour, Number(mm))
}

function loadConversations(): Conversation[] {
  const dir = join(projectRoot(), '..', 'shared', 'data', 'locomo')
  const only = list('conversations')
  const files = readdirSync(dir)
    .filter((f) => /^conv-.*\.json$/.test(f))
    .filter((f) => only === undefined || only.includes(f.replace(/\.json$/, '')))
    .sort()
  return files.map((f) => {
    const raw = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Record<string, unknown>
    const sessions: Conversation['sessions'] = []
    for (let n = 1; Array.isArray(raw[`session_${n}`]); n++) {
      sessions.push({ date: parseDate(String(raw[`session_${n}_date_time`])), turns: raw[`session_${n}`] as Turn[] })
    }
    const text = new Map<string, string>()
    for (const s of sessions) for (const t of s.turns) text.set(t.dia_id, t.text)
    const qa = raw.qa as Array<{ question: string; category: number; evidence: string[] }>
    const questions = qa
      .filter((q) => q.category >= 1 && q.category <= 4)
      // A few evidence entries hold two ids in one string ("D8:6; D9:17").
      .map((q) => ({ question: q.question, category: q.category, evidence: q.evidence.flatMap((e) => e.split(/[;,\s]+/)).filter((e) => text.has(e)) }))
    return { name: f.replace(/\.json$/, ''), speakerA: String(raw.speaker_a), sessions, questions, text }
  })
}

async function post(gw: Gateway, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', serviceKey: KEY, authorization: `Bearer ${PROVIDER}` },
    body: JSON.stringify(body),
  })
  const json = (await res.json()) as Record<string, unknown>
  if (res.status !== 200) throw new Error(`${res.status}: ${JSON.stringify(json)}`)
  return json
}

const sink = (): Writable => new Writable({ write: (_c, _e, cb) => cb() })

async function start(mock: MockUpstream, dataDir: string, clock: { now: number }, arm: Arm): Promise<Gateway> {
  const config = loadConfig({
    PORT: '0',
    UPSTREAM_BASE_URL: mock.url,
    DATA_DIR: dataDir,
    SERVICE_KEYS: `${KEY}:unlimited`,
    LOG_LEVEL: 'warn',
    ...arm.env,
  })
  return startGateway(config, { logDestination: sink(), now: () => clock.now, onBootstrapKey: () => undefined, ...(arm.tuning ? { recallTuning: arm.tuning } : {}) })
}

async function replay(gw: Gateway, mock: MockUpstream, clock: { now: number }, c: Conversation): Promise<number> {
  let pending: Array<{ role: 'user' | 'assistant'; content: string }> = []
  let requests = 0
  const send = async (reply: string): Promise<void> => {
    mock.enqueue({ reply })
    await post(gw, { model: LARGE, messages: pending, sessionId: c.name, useRAG: false })
    pending = []
    requests++
  }
  for (const s of c.sessions) {
    for (const [i, t] of s.turns.entries()) {
      clock.now = s.date + i * 30_000
      if (t.speaker === c.speakerA) pending.push({ role: 'user', content: t.text })
      else if (pending.some((m) => m.role === 'user')) await send(t.text)
      else pending.push({ role: 'assistant', content: t.text })
    }
  }
  if (pending.length > 0) await send('')
  return requests
}

const squash = (s: string): string => s.replace(/\s+/g, ' ').trim()

async function ask(gw: Gateway, mock: MockUpstream, c: Conversation, r: ArmResult, limit: number): Promise<void> {
  const questions = limit > 0 ? c.questions.slice(0, limit) : c.questions
  for (const q of questions) {
    const res = await post(gw, {
      model: SMALL,
      messages: [{ role: 'user', content: q.question }],
      sessionId: c.name,
      useRAG: false,
      saveToMemory: false,
    })
    const meta = res._metadata as { memory: { recalledMessages: number }; context: { totalTokens: number; window: number; reserved: number } }
    const sent = (mock.lastChatBody()?.messages ?? []) as Array<{ role: 'system' | 'user' | 'assistant'; content: string }>
    const exact = encodeChat(sent, 'gpt-4o').length
    if (exact !== meta.context.totalTokens) r.miscounted++
    if (exact + meta.context.reserved > WINDOW || meta.context.totalTokens + meta.context.reserved > meta.context.window) r.overWindow++
    const prompt = squash(sent.map((m) => m.content).join('\n'))
    let hits = 0
    for (const id of q.evidence) if (prompt.includes(squash(c.text.get(id) ?? '\u0000'))) hits++
    const tally = <K>(map: Map<K, Cell>, key: K): void => {
      const cell = map.get(key) ?? { evidence: 0, hits: 0 }
      cell.evidence += q.evidence.length
      cell.hits += hits
      map.set(key, cell)
    }
    tally(r.byCategory, q.category)
    tally(r.byConversation, c.name)
    r.questions++
    r.evidence += q.evidence.length
    r.hits += hits
    if (hits === q.evidence.length) r.complete++
    r.recalled += meta.memory.recalledMessages
    r.promptTokens += meta.context.totalTokens
  }
}

function arms(): Arm[] {
  const grid = ['shares', 'max-tokens', 'top-k', 'vw', 'min-sim', 'neighbours'].some((k) => arg(k) !== undefined)
  const out: Arm[] = [{ name: 'newest only (RECALL=off)', env: { RECALL: 'off' } }]
  if (!grid) {
    out.push({ name: 'naive split (½ newest, ½ BM25 turns)', env: { RECALL_RECENT_SHARE: '0.5' }, tuning: { vectorWeight: 0, neighbours: 'none' } })
    out.push({ name: 'recall (defaults)', env: {} })
    return out
  }
  for (const share of list('shares') ?? [''])
    for (const max of list('max-tokens') ?? [''])
      for (const k of list('top-k') ?? [''])
        for (const vw of list('vw') ?? [''])
          for (const sim of list('min-sim') ?? [''])
            for (const nb of list('neighbours') ?? ['']) {
              const env: Record<string, string> = {}
              const tuning: Partial<RecallTuning> = {}
              const name: string[] = []
              if (share) (env.RECALL_RECENT_SHARE = share), name.push(`share ${share}`)
              if (max) (env.RECALL_MAX_TOKENS = max), name.push(`max ${max}`)
              if (k) (env.RECALL_TOP_K = k), name.push(`k ${k}`)
              if (vw) (tuning.vectorWeight = Number(vw)), name.push(`vw ${vw}`)
              if (sim) (tuning.minSimilarity = Number(sim)), name.push(`sim ${sim}`)
              if (nb) (tuning.neighbours = nb as RecallTuning['neighbours']), name.push(nb)
              out.push({ name: name.join(', ') || 'defaults', env, tuning })
            }
  return out
}

const pct = (a: number, b: number): string => (b === 0 ? '-' : `${((100 * a) / b).toFixed(1)}%`)

async function main(): Promise<void> {
  const limit = Number(arg('limit') ?? 0)
  const conversations = loadConversations()
  const plan = arms()
  const results = plan.map(
    (a): ArmResult => ({
      arm: a.name,
      questions: 0,
      evidence: 0,
      hits: 0,
      complete: 0,
      byCategory: new Map(),
      byConversation: new Map(),
      recalled: 0,
      promptTokens: 0,
      overWindow: 0,
      miscounted: 0,
    }),
  )
  const mock = await startMockUpstream({ models: [{ id: SMALL, context_length: WINDOW }, { id: LARGE, context_length: 1_000_000 }], maxRecorded: 2 })
  const clock = { now: Date.UTC(2023, 0, 1) }
  try {
    for (const c of conversations) {
      const dataDir = mkdtempSync(join(tmpdir(), 'recallgate-memory-eval-'))
      try {
        let gw = await start(mock, dataDir, clock, { name: 'replay', env: {} })
        const t0 = performance.now()
        const requests = await replay(gw, mock, clock, c)
        const turns = c.sessions.reduce((n, s) => n + s.turns.length, 0)
        process.stderr.write(`${c.name}: replayed ${turns} turns in ${requests} requests (${((performance.now() - t0) / 1000).toFixed(1)} s)\n`)
        await gw.close()
        for (const [i, a] of plan.entries()) {
          gw = await start(mock, dataDir, clock, a)
          const t1 = performance.now()
          await ask(gw, mock, c, results[i] as ArmResult, limit)
          await gw.close()
          process.stderr.write(`  ${a.name}: ${((performance.now() - t1) / 1000).toFixed(1)} s\n`)
        }
      } finally {
        rmSync(dataDir, { recursive: true, force: true })
      }
    }
  } finally {
    await mock.close()
  }

  if (process.argv.includes('--json')) {
    const plain = results.map((r) => ({ ...r, byCategory: Object.fromEntries(r.byCategory), byConversation: Object.fromEntries(r.byConversation) }))
    process.stdout.write(`${JSON.stringify(plain, null, 2)}\n`)
    return
  }
  const names = conversations.map((c) => c.name)
  const rows = results.map((r) => [
    r.arm,
    pct(r.hits, r.evidence),
    pct(r.complete, r.questions),
    ...[1, 2, 3, 4].map((k) => pct(r.byCategory.get(k)?.hits ?? 0, r.byCategory.get(k)?.evidence ?? 0)),
    ...names.map((n) => pct(r.byConversation.get(n)?.hits ?? 0, r.byConversation.get(n)?.evidence ?? 0)),
    (r.recalled / Math.max(1, r.questions)).toFixed(1),
    Math.round(r.promptTokens / Math.max(1, r.questions)).toString(),
    `${r.overWindow}/${r.miscounted}`,
  ])
  const head = ['arm', 'evidence in prompt', 'questions complete', 'multi-hop', 'temporal', 'open-domain', 'single-hop', ...names, 'recalled/q', 'prompt tokens/q', 'over window/miscounted']
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)))
  const line = (cells: string[]): string => `| ${cells.map((c, i) => c.padEnd(width[i] as number)).join(' | ')} |`
  const first = results[0]
  process.stdout.write(
    [
      `LoCoMo: ${conversations.map((c) => c.name).join(', ')}; ${first?.questions ?? 0} questions (categories 1–4), ${first?.evidence ?? 0} evidence turns; window ${WINDOW}`,
      line(head),
      `|${width.map((w) => '-'.repeat(w + 2)).join('|')}|`,
      ...rows.map(line),
      '',
    ].join('\n'),
  )
}

await main()
