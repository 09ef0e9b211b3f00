/**
 * Memory-path benchmark: context packing and history reads, each beside its baseline measured in the same run.
 *
 *   node dist/bench/packing.js            (after `npm run build`)
 *
 * - pack: a 1,000-message session into a 128k window (gpt-4o), from stored content counts, against the baseline of
 *   re-tokenizing the history on every request; with and without a retrieval block (8 chunks of ~200 tokens, the
 *   only thing packing tokenizes).
 * - history: the newest 200 messages of a 200-message session from LMDB, cold (every read decodes from LMDB) and
 *   through the repository's cache (the steady state for an active session).
 * - memory path: history read (cached) + pack of a 200-message session, against packing the same request with no
 *   session — the latency a session adds to a request (target ≤ 1 ms p50).
 * - unseen words in a long-running process: counting a 450-token message of words never counted before, once 250,000
 *   others have been (what a gateway meets after a while: names, ids, other languages), with gpt-tokenizer's own
 *   merge cache off (what token-count.ts sets) against the library's default 100,000-entry cache, filled the same way.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { setMergeCacheSize } from 'gpt-tokenizer'
import { pack, type PackInput } from '../src/context/packer.js'
import { countO200k } from '../src/context/token-count.js'
import { TokenCounter } from '../src/context/tokenizer.js'
import { storedMessage } from '../src/messages/stored-message.js'
import { SessionRepo, type StoredMessage } from '../src/storage/session-repo.js'
import { openStore } from '../src/storage/store.js'
import type { ChatMessage } from '../src/types.js'

export interface BenchRow {
  name: string
  p50Ms: number
  p99Ms: number
  iterations: number
}

const MODEL = 'openai/gpt-4o'
const WARMUP = 200
const ITERATIONS = 2000
/** The re-tokenizing baseline takes ~30 ms a call: fewer samples keep the run short on a shared machine. */
const BASELINE_ITERATIONS = 50

const WORDS = (
  'the gateway keeps a session per client and packs its newest turns into the window with exact token counts ' +
  'while retrieved excerpts from uploaded files come first when they matter for the question at hand'
).split(' ')

/** Deterministic text of roughly `words` words (a tiny LCG: same input every run). */
function text(seed: number, words: number): string {
  let x = seed * 2654435761 + 1
  const out: string[] = []
  for (let i = 0; i < words; i++) {
    x = (x * 1103515245 + 12345) % 2147483648
    out.push(WORDS[x % WORDS.length] ?? 'word')
  }
  return out.join(' ')
}

function measure(name: string, fn: () => void, iterations = ITERATIONS, warmup = WARMUP): BenchRow {
  for (let i = 0; i < warmup; i++) fn()
  const samples = new Float64Array(iterations)
  for (let i = 0; i < iterations; i++) {
    const start = performance.now()
    fn()
    samples[i] = performance.now() - start
  }
  samples.sort()
  const at = (q: number): number => samples[Math.min(iterations - 1, Math.floor(q * iterations))] ?? Number.NaN
  return { name, p50Ms: at(0.5), p99Ms: at(0.99), iterations }
}

export async function run(): Promise<BenchRow[]> {
  const counter = new TokenCounter({ margins: { openai: 0, '*': 0.1 } })
  const rows: BenchRow[] = []

  // A 1,000-message session, 60–210 words per turn: ~140k tokens in all, so a 128k window truncates it.
  const history: StoredMessage[] = Array.from({ length: 1000 }, (_, i) => {
    const content = text(i, 60 + ((i * 37) % 150))
    const role = i % 2 === 0 ? ('user' as const) : ('assistant' as const)
    return storedMessage(i, { role, content }, counter.textTokens(content), 0)
  })
  const chunks = Array.from({ length: 8 }, (_, i) => text(10_000 + i, 160))
  const base: PackInput = {
    window: counter.usableWindow(MODEL, 128_000),
    reserve: 4096,
    requestSystem: [{ role: 'system', content: 'You are a helpful assistant.' }],
    requestOther: [{ role: 'user', content: 'What did I say about the gateway earlier?' }],
    history,
    maxHistoryMessages: 1000,
    messageTokens: (m) => counter.messageTokens(m, MODEL),
    historyMessageTokens: (m) => counter.storedMessageTokens(m, MODEL),
    chatOverhead: counter.chatOverhead(MODEL),
  }
  const retrieval: PackInput['retrieval'] = {
    candidates: chunks.map((c) => ({ tokens: counter.textTokens(c) })),
    budget: 2000,
    render: (selected): ChatMessage => ({
      role: 'system',
      content: selected.map((i, n) => `[${n + 1}] notes-${i}.md\n${chunks[i] ?? ''}`).join('\n\n'),
    }),
  }
  const sample = pack(base)

  rows.push(measure('pack 1,000 msgs → 128k, stored counts', () => pack(base)))
  rows.push(measure('pack 1,000 msgs → 128k, + retrieval (8 chunks)', () => pack({ ...base, retrieval })))
  rows.push(
    measure(
      'baseline: pack re-tokenizing history',
      () => pack({ ...base, historyMessageTokens: (m) => counter.messageTokens(m.message, MODEL) }),
      BASELINE_ITERATIONS,
      10,
    ),
  )

  const dir = await mkdtemp(join(tmpdir(), 'recallgate-bench-'))
  const store = openStore({ dir })
  try {
    const opts = { maxMessagesPerSession: 10_000, clock: Date.now, counter }
    const cold = new SessionRepo(store, { ...opts, cacheSessions: 0 })
    const cached = new SessionRepo(store, opts)
    const session = history.slice(0, 200).map((m): ChatMessage => ({ role: m.role, content: m.text }))
    for (let i = 0; i < session.length; i += 2)
      await cached.appendExchange('bench-tenant', 'bench-session', session.slice(i, i + 2))

    rows.push(measure('history 200 msgs, LMDB (no cache)', () => cold.history('bench-tenant', 'bench-session', 400)))
    rows.push(measure('history 200 msgs, cached', () => cached.history('bench-tenant', 'bench-session', 400)))

    const small = { ...base, window: counter.usableWindow(MODEL, 128_000) }
    const noSession = measure('no session: pack request only', () => pack({ ...small, history: [] }))
    const withSession = measure('memory path: history (cached) + pack, 200 msgs', () =>
      pack({ ...small, history: cached.history('bench-tenant', 'bench-session', small.maxHistoryMessages) }),
    )
    rows.push(noSession, withSession, {
      name: 'added by the session (p50 difference)',
      p50Ms: withSession.p50Ms - noSession.p50Ms,
      p99Ms: Number.NaN,
      iterations: ITERATIONS,
    })
  } finally {
    await store.close()
    await rm(dir, { recursive: true, force: true })
  }

  rows.push(...unseenWords())

  const cpu = cpus()[0]?.model ?? 'unknown CPU'
  console.log(
    `# method: Node ${process.version}, ${cpu} (${cpus().length} cores, shared); each row: ${WARMUP} warm-up calls, ` +
      `then ${ITERATIONS} timed calls (baseline: 10 and ${BASELINE_ITERATIONS}) with performance.now(), ` +
      'p50/p99 of the per-call times. ' +
      `Session: 1,000 messages, ${history.reduce((n, m) => n + m.tokens, 0)} content tokens; packed ` +
      `${sample.includedHistory} messages, ${sample.totalTokens} tokens (truncated: ${sample.truncated}).`,
  )
  console.log('| benchmark | p50 ms | p99 ms |')
  console.log('|---|---:|---:|')
  const ms = (v: number): string => (Number.isNaN(v) ? '–' : v.toFixed(3))
  for (const r of rows) console.log(`| ${r.name} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} |`)
  return rows
}

/** Lowercase words of 3–11 letters from a 32-bit LCG's high bits: a different word almost every time, the same run to run. */
function wordSource(seed: number): (words: number) => string {
  let x = seed >>> 0
  const next = (): number => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0) >>> 8
  return (words) => {
    const out: string[] = []
    for (let w = 0; w < words; w++) {
      let word = ''
      for (let n = 3 + (next() % 9); n > 0; n--) word += String.fromCharCode(97 + (next() % 26))
      out.push(word)
    }
    return out.join(' ')
  }
}

/** The library's merge cache at its default size, then off (token-count.ts's setting), each after the same fill. */
function unseenWords(): BenchRow[] {
  const rows: BenchRow[] = []
  for (const [name, size] of [
    ['baseline: unseen 450-token message, library merge cache 100k (full)', 100_000],
    ['unseen 450-token message, library merge cache off', 0],
  ] as const) {
    setMergeCacheSize(size)
    const words = wordSource(size + 1)
    for (let i = 0; i < 2500; i++) countO200k(words(100))
    rows.push(measure(name, () => countO200k(words(120)), 100, 0))
  }
  setMergeCacheSize(0)
  return rows
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run()
}
