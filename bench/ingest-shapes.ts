/**
 * Ingestion cost against the input's shape: is it linear in the size whatever the shape?
 *
 * Method: each shape of bench/lib/shapes.ts (base64 in lines and on one line, runs of letters, CJK and spaces,
 * Markdown headings of spaces, brackets or words, CSV quotes, an HTML row of many cells, a <pre> of spaces, unmatched
 * HTML end tags) and ordinary prose, made at two sizes, S and 4·S characters, is ingested through
 * `KnowledgeBase.ingest` (extraction, chunking with exact token counts, analysis, embedding, one LMDB transaction,
 * BM25 and HNSW) into a real LMDB in a temp dir, and deleted again so the tenant stays small. Rounds interleave every
 * shape and size, rotating the order each round, so the shared machine's noise lands on all of them alike; the figure
 * per shape and size is the median over rounds of the process CPU time inside `ingest`. Reported: the 4·S / S ratio
 * (linear ≈ 4, quadratic ≈ 16) and ms per MB at 4·S relative to prose in the same run.
 *
 * Results (2026-11-24, Node 20, S = 32 KiB; the machine's load average was 15, so only ratios mean anything): 4·S / S
 * ratio before (main at 15e3c9c, 1 round: the quadratic shapes take minutes) → after (3 rounds):
 *
 *   | shape               | before | after | | shape               | before | after |
 *   |---------------------|--------|-------|-|---------------------|--------|-------|
 *   | prose               | 1.0    | 3.5   | | md-heading-spaces   | 15.7   | 1.8   |
 *   | base64-lines        | 2.8    | 4.4   | | md-heading-brackets | 15.7   | 4.2   |
 *   | base64-one-line     | 4.0    | 3.8   | | md-heading-words    | 5.3    | 8.1   |
 *   | letters-run         | 2.3    | 6.1   | | csv-quotes          | 10.2   | 3.5   |
 *   | cjk-run             | 3.9    | 8.2   | | html-row            | 3.5    | 4.2   |
 *   | space-run           | 17.8   | 0.7   | | html-pre-spaces     | 17.8   | 2.0   |
 *
 * At 128 KiB, before: a run of spaces 21 s of CPU, a Markdown heading of spaces 39 s, a <pre> of spaces 38 s, a
 * heading of brackets 14 s; after, every shape 9–390 ms (prose 38 ms). Figures of a few ms (32 KiB) are noisy; the
 * quadratic ones were the 16–18× ratios. The superlinear parts at 1 MB and above (chunker searches running to the
 * text's ends, whole-file scans per chunk) were measured with a profile, not here: 1 MB of base64 on one line went from
 * 13 s of chunking to 2 s.
 *
 * Usage: node dist/bench/ingest-shapes.js [--size 262144] [--rounds 3] [--only base64-one-line,prose]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { LocalEmbedder } from '../src/retrieval/embedder.js'
import { KnowledgeBase } from '../src/knowledge/knowledge-base.js'
import { FileRepo } from '../src/storage/file-repo.js'
import { openStore } from '../src/storage/store.js'
import { HOSTILE_SHAPES, PROSE, type Shape } from './lib/shapes.js'
import { quantile, timed } from './lib/stats.js'

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? undefined : process.argv[i + 1]
}

const size = Number(flag('size') ?? 256 * 1024)
const rounds = Number(flag('rounds') ?? 3)
const only = flag('only')?.split(',')
const shapes = [PROSE, ...HOSTILE_SHAPES].filter((s) => only === undefined || only.includes(s.name))

const dir = mkdtempSync(join(tmpdir(), 'recallgate-shapes-'))
const store = openStore({ dir })
const kb = new KnowledgeBase({
  files: new FileRepo(store),
  dataDir: dir,
  embedder: new LocalEmbedder(),
  chunkTokens: 192,
  chunkOverlap: 80,
  maxChunksPerFile: 10_000_000,
  clock: Date.now,
})
await kb.init()

const inputs = new Map<string, Buffer>()
for (const s of shapes) for (const n of [size, 4 * size]) inputs.set(`${s.name}@${n}`, Buffer.from(s.make(n)))
const cpu = new Map<string, number[]>()

process.stderr.write(`ingest-shapes: ${shapes.length} shapes × 2 sizes × ${rounds} rounds, load average ${loadavg()[0]?.toFixed(1)}\n`)
const started = performance.now()
for (let r = 0; r < rounds; r++) {
  const order = shapes.map((_, i) => shapes[(i + r) % shapes.length] as Shape)
  for (const s of order) {
    for (const n of r % 2 === 0 ? [size, 4 * size] : [4 * size, size]) {
      const key = `${s.name}@${n}`
      const bytes = inputs.get(key) as Buffer
      const run = await timed(() => kb.ingest('bench', { filename: s.filename, contentType: undefined, bytes, metadata: null }))
      await kb.delete('bench', run.value.id)
      const list = cpu.get(key) ?? []
      list.push(run.cpuMs)
      cpu.set(key, list)
      process.stderr.write(`  round ${r + 1}: ${key} ${run.cpuMs.toFixed(0)} ms CPU, ${run.value.chunks} chunks\n`)
    }
  }
}

const median = (key: string): number => quantile(cpu.get(key) ?? [], 0.5)
const perMb = (s: Shape): number => median(`${s.name}@${4 * size}`) / (inputs.get(`${s.name}@${4 * size}`)?.length ?? 1) * 1024 * 1024
const prosePerMb = shapes.includes(PROSE) ? perMb(PROSE) : Number.NaN
const rows = shapes.map((s) => {
  const small = median(`${s.name}@${size}`)
  const big = median(`${s.name}@${4 * size}`)
  return [s.name, `${small.toFixed(0)}`, `${big.toFixed(0)}`, `${(big / small).toFixed(1)}`, `${perMb(s).toFixed(0)}`, `${(perMb(s) / prosePerMb).toFixed(1)}×`]
})
const head = ['shape', `CPU ms @${size / 1024} KiB`, `CPU ms @${(4 * size) / 1024} KiB`, 'ratio (linear ≈ 4)', 'ms per MB', 'vs prose']
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)))
const line = (cells: string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i] as number)).join(' | ')} |`
console.log(line(head))
console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`)
for (const r of rows) console.log(line(r))
console.log(`\n${((performance.now() - started) / 1000).toFixed(0)} s, load average ${loadavg()[0]?.toFixed(1)} at the end`)

await kb.close()
await store.close()
rmSync(dir, { recursive: true, force: true })
