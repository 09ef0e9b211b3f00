/**
 * Knowledge-base performance with the local embedder: ingestion throughput (target ≥ 2 MB/s of text) and search
 * latency at 100k chunks (target ≤ 1 ms p50), on a real LMDB in a temp dir. About 1.5 minutes at the defaults.
 *
 * Method: a synthetic corpus (deterministic PRNG) of files made of paragraphs of 3–7 sentences whose words are drawn
 * from the word frequencies of ../shared/data/squad-dev-v2.0.json (English Wikipedia prose; made-up Zipf words when
 * the file is absent) — realistic tokenization, posting-list lengths for BM25 and distinct vectors for HNSW, and
 * 100k chunks without shipping 60 MB of text. Files of ~256 KB are ingested one after another through
 * `KnowledgeBase.ingest` (extraction, chunking with exact token counts, analysis, embedding, one durable LMDB
 * transaction, BM25 and HNSW updates) until the tenant holds the target number of chunks. Throughput = MB of extracted
 * text (UTF-8; for these plain-text files, the file) over the time inside `ingest`, both wall and process CPU (all
 * threads: LMDB's writer, GC). The machine is shared, so wall time also measures the neighbours: the baseline in the
 * same run, interleaved with ingestion so it sees the same load, is gpt-tokenizer's `encode` of every 4th file (the
 * cost of tokenizing the text once), and the ratio of the two CPU speeds is the load-independent figure. Queries are
 * 3–6 words drawn from random paragraphs; after a warm-up, each mode is timed per call (`performance.now`) and
 * reported as nearest-rank p50/p99 (bench/lib/stats.ts). Baseline for search in the same run: an exact brute-force
 * cosine scan over the same vectors (what HNSW saves), which also gives HNSW's recall@8. Also timed: restart (`init` loading the saved graph and
 * rebuilding BM25) and a rebuild from LMDB (graph file removed).
 *
 * Results (2026-11, Node 20, defaults: 192/80 chunks, 256 dims, HNSW M 16 / efConstruction 32 / ef 64; 100k chunks,
 * 62.4 MB), this bench on the code before and after the ingestion work, run back to back on the shared 2-core
 * machine (load average in the table):
 *
 *   | measure                                   | before                | after                 |
 *   |-------------------------------------------|-----------------------|-----------------------|
 *   | ingestion, wall                           | 1.34 MB/s             | 2.50 MB/s             |
 *   | ingestion, per CPU-second                 | 1.40 MB/s             | 2.70 MB/s             |
 *   | ingestion, first 8 files, wall / CPU      | 1.00 / 1.03 MB/s      | 2.00 / 1.56 MB/s      |
 *   | baseline o200k encode, CPU; ratio         | 6.26 MB/s; 0.22×      | 7.54 MB/s; 0.36×      |
 *   | search p50 bm25 / vector / hybrid         | 0.28 / 0.39 / 0.64 ms | 0.28 / 0.32 / 0.55 ms |
 *   | search p99 hybrid                         | 2.09 ms               | 0.92 ms               |
 *   | exact scan p50 (search baseline)          | 67 ms                 | 79 ms                 |
 *   | HNSW recall@8                             | 80.5%                 | 80.5%                 |
 *   | restart: load graph + rebuild BM25        | 7.8 s                 | 4.2 s                 |
 *   | restart: rebuild graph from LMDB          | 23.3 s                | 15.7 s                |
 *   | run time (load average ~4.2)              | 105 s                 | 70 s                  |
 *
 * Ingestion, both builds in one process ingesting the same files alternately (so both see the same load), 100k
 * chunks each: before 1.34 MB per CPU-second (1.42 wall), after 2.06 (2.18 wall): 1.54×. What bought it (profiles;
 * A/B runs of consecutive builds at 20k chunks, CPU): token counts from a cache of o200k pieces (token-count.ts) plus
 * an indexed copy for hnswlib instead of `Array.from` 1.35–1.44×; analysis from a cache of words by their characters
 * (analyzer.ts, range-cache.ts), each stretch of overlapping chunks analyzed once (chunk-terms.ts) and graph
 * insertions batched after BM25's 1.20×; graph
 * saves throttled by their cost (search-index.ts: whole-graph rewrites every 5 s were 8% of ingestion CPU at 100k,
 * nothing at 20k). Not taken: lower HNSW M/efConstruction (−4 to −20% insertion time for −2.5 to −13 points of
 * recall@8, see vector-index.ts) and 128 dimensions (−25% insertion, −10 points vectors-only hit rate in
 * bench/rag-eval.ts). Where ingestion's main-thread time goes now at 100k (profile): HNSW insertion 60% (half of it
 * distance computations, an eighth the addon reading the JS array), token counting 11%, analysis 9%, BM25 7%,
 * embedding 5%; LMDB's writer thread and GC run beside it. The wall figure needs about half a free core per MB/s.
 * Retrieval quality unchanged (bench/rag-eval.ts, 192/80, k 8, budget 1000: hybrid 95.1% at 937 tokens, BM25 95.1%,
 * vectors 73.1%): every change is exact (token counts, terms, vectors and graphs identical to before).
 *
 * Usage: node dist/bench/rag-perf.js [--chunks 100000] [--queries 2000] [--recall-queries 200] [--no-restart]
 *        [--chunk-tokens 192] [--overlap 80] [--m 16] [--efc 32] [--ef 64] [--dim 256]
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { encode } from 'gpt-tokenizer'
import { mulberry32 } from '../src/mock-upstream/prng.js'
import { LocalEmbedder } from '../src/retrieval/embedder.js'
import { KnowledgeBase } from '../src/knowledge/knowledge-base.js'
import type { SearchMode } from '../src/retrieval/search-index.js'
import { DEFAULT_HNSW } from '../src/retrieval/vector-index.js'
import { decodeVector, FileRepo } from '../src/storage/file-repo.js'
import { openStore, type Store } from '../src/storage/store.js'
import { sharedDataPath } from './lib/project-root.js'
import { quantile, timed } from './lib/stats.js'

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? Number(process.argv[i + 1]) : fallback
}

const TARGET_CHUNKS = arg('chunks', 100_000)
const QUERIES = arg('queries', 2000)
const CHUNK_TOKENS = arg('chunk-tokens', 192)
const OVERLAP = arg('overlap', 80)
const DIMENSION = arg('dim', new LocalEmbedder().dimension)
const HNSW = { m: arg('m', DEFAULT_HNSW.m), efConstruction: arg('efc', DEFAULT_HNSW.efConstruction), efSearch: arg('ef', DEFAULT_HNSW.efSearch) }
const RECALL_QUERIES = Math.min(QUERIES, arg('recall-queries', 200))
const RESTART = !process.argv.includes('--no-restart')
const FILE_BYTES = 256 * 1024
const NO_SPECIAL = { disallowedSpecial: new Set<string>() }

const rand = mulberry32(42)

/** Words and their frequencies from the SQuAD articles, most frequent first; Zipf over made-up words without them. */
function vocabulary(): { words: string[]; weights: number[] } {
  const path = sharedDataPath('squad-dev-v2.0.json')
  if (existsSync(path)) {
    const counts = new Map<string, number>()
    const squad = JSON.parse(readFileSync(path, 'utf8')) as { data: Array<{ paragraphs: Array<{ context: string }> }> }
    for (const a of squad.data)
      for (const p of a.paragraphs) for (const w of p.context.split(/\s+/)) if (w) counts.set(w, (counts.get(w) ?? 0) + 1)
    const sorted = [...counts].sort((a, b) => b[1] - a[1])
    return { words: sorted.map((e) => e[0]), weights: sorted.map((e) => e[1]) }
  }
  const syl = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'to', 'vi', 'an', 'el', 'or', 'un', 'bre', 'cha', 'dri', 'fen', 'gor', 'hal']
  const words = Array.from({ length: 40_000 }, () => {
    let w = ''
    for (let i = 0, n = 1 + Math.floor(rand() * 3); i < n; i++) w += syl[Math.floor(rand() * syl.length)]
    return w
  })
  return { words, weights: words.map((_, i) => 1 / (i + 1)) }
}
const { words: VOCAB, weights } = vocabulary()
// Sampling by inverse CDF over cumulative weights.
const CUM = (() => {
  const c = new Float64Array(VOCAB.length)
  let s = 0
  for (let i = 0; i < VOCAB.length; i++) c[i] = s += weights[i] as number
  return c.map((x) => x / s)
})()
function word(): string {
  const r = rand()
  let lo = 0
  let hi = CUM.length - 1
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if ((CUM[mid] as number) < r) lo = mid + 1
    else hi = mid
  }
  return VOCAB[lo] as string
}
/**
 * Documents are about something: each file has a topic (60 words from the less common part of the vocabulary), and
 * each paragraph a subtopic of 15 of them; a third of a sentence's words come from the paragraph's subtopic, the
 * rest from the general distribution. Without this, every chunk is the same bag of common words, which no real
 * corpus is and which no nearest-neighbour graph can index well.
 */
let subtopic: string[] = []
let topic: string[] = []
function sentence(): string {
  const n = 8 + Math.floor(rand() * 20)
  const words = Array.from({ length: n }, () => (rand() < 1 / 3 ? (subtopic[Math.floor(rand() * subtopic.length)] as string) : word()))
  const first = words[0] as string
  words[0] = first.charAt(0).toUpperCase() + first.slice(1)
  return `${words.join(' ').replace(/[.!?]+$/, '')}.`
}
function paragraph(): string {
  subtopic = Array.from({ length: 15 }, () => topic[Math.floor(rand() * topic.length)] as string)
  return Array.from({ length: 3 + Math.floor(rand() * 5) }, sentence).join(' ')
}
function file(): { text: string; paragraphs: string[] } {
  const from = Math.min(200, VOCAB.length - 1)
  topic = Array.from({ length: 60 }, () => VOCAB[from + Math.floor(rand() * (VOCAB.length - from))] as string)
  const paragraphs: string[] = []
  let size = 0
  while (size < FILE_BYTES) {
    const p = paragraph()
    paragraphs.push(p)
    size += p.length + 2
  }
  return { text: paragraphs.join('\n\n'), paragraphs }
}

const stats = (xs: number[]): { p50: number; p99: number } => ({ p50: quantile(xs, 0.5), p99: quantile(xs, 0.99) })

function openKb(dir: string, store: Store): KnowledgeBase {
  return new KnowledgeBase({
    files: new FileRepo(store),
    dataDir: dir,
    embedder: new LocalEmbedder({ dimension: DIMENSION }),
    chunkTokens: CHUNK_TOKENS,
    chunkOverlap: OVERLAP,
    maxChunksPerFile: 100_000,
    clock: Date.now,
    hnsw: HNSW,
  })
}

/** The 8 best of `scores`, best first (an insertion buffer: a full sort of 100k scores cost more than the scan). */
function top8(scores: Float32Array): number[] {
  const idx: number[] = []
  for (let i = 0; i < scores.length; i++) {
    const v = scores[i] as number
    if (idx.length === 8 && v <= (scores[idx[7] as number] as number)) continue
    let j = idx.length < 8 ? idx.length : 7
    while (j > 0 && (scores[idx[j - 1] as number] as number) < v) {
      if (j < 8) idx[j] = idx[j - 1] as number
      j--
    }
    idx[j] = i
  }
  return idx
}

async function main(): Promise<void> {
  const started = performance.now()
  const load0 = loadavg()[0] ?? 0
  const dir = mkdtempSync(join(tmpdir(), 'rag-perf-'))
  let store = openStore({ dir })
  let kb = openKb(dir, store)
  const samples: string[] = []
  let bytes = 0
  let chunks = 0
  let files = 0
  const ingest = { wallMs: 0, cpuMs: 0 }
  const first = { bytes: 0, wallMs: 0, cpuMs: 0 }
  const baseline = { bytes: 0, wallMs: 0, cpuMs: 0 }
  while (chunks < TARGET_CHUNKS) {
    const f = file()
    for (let i = 0; i < 20; i++) samples.push(f.paragraphs[Math.floor(rand() * f.paragraphs.length)] as string)
    const buf = Buffer.from(f.text)
    // Baseline in the same run, interleaved so it sees the same machine load: gpt-tokenizer encoding every 4th file.
    if (files % 4 === 0) {
      const b = await timed(() => encode(f.text, NO_SPECIAL).length)
      baseline.bytes += buf.length
      baseline.wallMs += b.wallMs
      baseline.cpuMs += b.cpuMs
    }
    const r = await timed(() => kb.ingest('bench', { filename: `doc-${files}.txt`, contentType: 'text/plain', bytes: buf, metadata: null }))
    ingest.wallMs += r.wallMs
    ingest.cpuMs += r.cpuMs
    bytes += buf.length
    chunks += r.value.chunks
    files++
    if (files <= 8) {
      first.bytes += buf.length
      first.wallMs += r.wallMs
      first.cpuMs += r.cpuMs
    }
    if (files % 40 === 0) process.stderr.write(`  ${chunks} chunks, ${(bytes / 1e6).toFixed(0)} MB, ${((performance.now() - started) / 1000).toFixed(0)} s\n`)
  }
  const mbps = (b: number, ms: number): number => b / 1e6 / (ms / 1000)

  const queries = Array.from({ length: QUERIES }, () => {
    const words = (samples[Math.floor(rand() * samples.length)] as string).replace(/[.]/g, '').split(' ')
    const n = 3 + Math.floor(rand() * 4)
    const start = Math.floor(rand() * Math.max(1, words.length - n))
    return words.slice(start, start + n).join(' ')
  })
  const latency: Record<string, ReturnType<typeof stats>> = {}
  for (const mode of ['bm25', 'vector', 'hybrid'] as SearchMode[]) {
    for (const q of queries.slice(0, 200)) await kb.search('bench', q, 8, mode)
    const times: number[] = []
    for (const q of queries) times.push((await timed(() => kb.search('bench', q, 8, mode))).wallMs)
    latency[mode] = stats(times)
  }

  // Baseline: exact cosine over every stored vector (what a flat index would cost per query), which also gives the
  // HNSW graph's recall: the share of the exact top 8 that the vector search returns.
  const embedder = new LocalEmbedder({ dimension: DIMENSION })
  const labels: number[] = []
  const vectors: Float32Array[] = []
  for (const { key, value } of store.vectors.getRange({ start: ['files:bench', 0], end: ['files:bench', Number.MAX_SAFE_INTEGER] })) {
    labels.push((key as [string, number])[1])
    vectors.push(decodeVector(value as Uint8Array))
  }
  const indexOf = new Map<string, number>()
  const refOf = new Map<number, string>()
  for (const { key, value } of store.chunks.getRange({ start: ['bench', ''], end: ['bench', '\uffff'] })) {
    const k = key as [string, string, number]
    refOf.set((value as { label: number }).label, `${k[1]}:${k[2]}`)
  }
  labels.forEach((label, i) => indexOf.set(refOf.get(label) ?? '', i))
  const dim = embedder.dimension
  const matrix = new Float32Array(vectors.length * dim)
  vectors.forEach((v, i) => matrix.set(v, i * dim))
  const flat: number[] = []
  let found = 0
  let wanted = 0
  const scores = new Float32Array(vectors.length)
  for (const q of queries.slice(0, RECALL_QUERIES)) {
    const s = performance.now()
    const qv = embedder.embedSync(q)
    for (let i = 0; i < vectors.length; i++) {
      let d = 0
      const o = i * dim
      for (let j = 0; j < dim; j++) d += (matrix[o + j] as number) * (qv[j] as number)
      scores[i] = d
    }
    const top = top8(scores)
    flat.push(performance.now() - s)
    // Ties are common for short queries: a returned chunk counts if it scores at least the exact 8th best.
    const eighth = (scores[top[top.length - 1] as number] as number) - 1e-6
    const approx = await kb.search('bench', q, 8, 'vector')
    wanted += top.length
    found += approx.filter((h) => (scores[indexOf.get(`${h.file_id}:${h.chunk_index}`) ?? -1] ?? -2) >= eighth).length
  }
  latency['exact scan (baseline)'] = stats(flat)
  const recall = found / (wanted || 1)

  await kb.close()
  await store.close()
  let loadMs = 0
  let rebuildMs = 0
  if (RESTART) {
    store = openStore({ dir })
    kb = openKb(dir, store)
    loadMs = (await timed(() => kb.init())).wallMs
    await kb.close()
    for (const f of readdirSync(join(dir, 'index'))) rmSync(join(dir, 'index', f))
    kb = openKb(dir, store)
    rebuildMs = (await timed(() => kb.init())).wallMs
    await kb.close()
    await store.close()
  }
  rmSync(dir, { recursive: true, force: true })

  console.log(
    `Local embedder (${embedder.id}), chunks of ${CHUNK_TOKENS} tokens with ${OVERLAP} overlap, HNSW M ${HNSW.m} efConstruction ${HNSW.efConstruction} ef ${HNSW.efSearch}; ` +
      `Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, load average ${load0.toFixed(1)} → ${(loadavg()[0] ?? 0).toFixed(1)}`,
  )
  console.log(
    'Method: synthetic English-like text files of 256 KB ingested one after another through KnowledgeBase.ingest on a real LMDB; ' +
      'MB = UTF-8 bytes of extracted text (plain-text files: the file itself); wall = time inside ingest; CPU = process CPU ' +
      '(all threads) inside ingest; baseline = gpt-tokenizer encode of every 4th file, interleaved, same run; search = ' +
      `per-call p50/p99 of ${QUERIES} queries of 3–6 words after 200 warm-up calls.`,
  )
  const ratio = mbps(bytes, ingest.cpuMs) / mbps(baseline.bytes, baseline.cpuMs)
  console.log(`| measure | value |`)
  console.log(`|---|---|`)
  console.log(`| ingested | ${(bytes / 1e6).toFixed(1)} MB of text, ${files} files, ${chunks} chunks |`)
  console.log(`| ingestion throughput, wall | ${mbps(bytes, ingest.wallMs).toFixed(2)} MB/s |`)
  console.log(`| ingestion throughput, per CPU-second | ${mbps(bytes, ingest.cpuMs).toFixed(2)} MB/s |`)
  console.log(`| ingestion throughput, first 8 files (small index), wall / CPU | ${mbps(first.bytes, first.wallMs).toFixed(2)} / ${mbps(first.bytes, first.cpuMs).toFixed(2)} MB/s |`)
  console.log(
    `| baseline: o200k encode of the same text, wall / CPU | ${mbps(baseline.bytes, baseline.wallMs).toFixed(2)} / ${mbps(baseline.bytes, baseline.cpuMs).toFixed(2)} MB/s (ingestion = ${ratio.toFixed(2)}× its CPU speed) |`,
  )
  for (const [mode, st] of Object.entries(latency))
    console.log(`| search ${mode} at ${chunks} chunks, k=8 | p50 ${st.p50.toFixed(3)} ms, p99 ${st.p99.toFixed(3)} ms |`)
  console.log(`| HNSW recall@8 vs exact scan (${RECALL_QUERIES} queries) | ${(recall * 100).toFixed(1)}% |`)
  if (RESTART) {
    console.log(`| restart: load saved graph + rebuild BM25 | ${(loadMs / 1000).toFixed(2)} s |`)
    console.log(`| restart with graph file removed: rebuild from LMDB | ${(rebuildMs / 1000).toFixed(2)} s |`)
  }
  console.log(`| run time | ${((performance.now() - started) / 1000).toFixed(0)} s |`)
}

await main()
