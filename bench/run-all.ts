/**
 * The whole benchmark suite, one table: `npm run bench` (after `npm run build`).
 *
 *   node dist/bench/run-all.js [--quick] [--profile] [--verbose] [--ab DIR] [--only relay,responses,session,knowledge,streams,sustained,ingest]
 *                              [--stream-ramp 2] [--stream-words 60]
 *
 * --quick    fewer rounds and a 10k-chunk knowledge base (about a minute and a half)
 * --only scale   the scaling scenario (Redis limit check, workers 1 vs 2; needs redis-server), not in the default run
 * --only stores  the PostgreSQL store against LMDB (needs RECALLGATE_BENCH_DATABASE_URL), not in the default run
 * --profile  profile the servers (V8's sampling profiler, as node --cpu-prof) in each measured phase and print their
 *            hottest functions after the table, per request where the phase counted them
 * --verbose  print every arm's samples, percentiles, throughput and CPU per request as they are measured
 * --ab DIR   A/B: also run the gateway of another build (DIR = a copy of `dist`, e.g. from before a change, next to a
 *            package.json with "type": "module" and a node_modules) as an interleaved arm `before` (relay, streams)
 * --stream-ramp S, --stream-words N   the streams scenario's ramp (seconds over which the streams start; default 2)
 *            and reply length (default 60 words, ≈ 3 s a stream): a longer ramp with longer replies keeps the thousand
 *            streams open together while new ones arrive more slowly
 *
 * Every figure is a difference or a ratio against a baseline measured in the same run. Method: docs/benchmarks.md.
 */
import { mkdtempSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { summarizeProfiles } from './lib/profile.js'
import type { ScenarioContext } from './lib/stack.js'
import { renderTable, type Row } from './lib/table.js'
import { ingestScenario } from './scenarios/ingest.js'
import { knowledgeScenario } from './scenarios/knowledge.js'
import { relayScenario, type ScenarioResult } from './scenarios/relay.js'
import { responsesScenario } from './scenarios/responses.js'
import { scaleScenario } from './scenarios/scale.js'
import { sessionScenario } from './scenarios/session.js'
import { storesScenario } from './scenarios/stores.js'
import { streamsScenario } from './scenarios/streams.js'
import { sustainedScenario } from './scenarios/sustained.js'

const SCENARIOS: Record<string, (ctx: ScenarioContext) => Promise<ScenarioResult>> = {
  relay: relayScenario,
  responses: responsesScenario,
  session: sessionScenario,
  knowledge: knowledgeScenario,
  streams: streamsScenario,
  sustained: sustainedScenario,
  ingest: ingestScenario,
  // Needs redis-server; run with --only scale.
  scale: scaleScenario,
  // Needs RECALLGATE_BENCH_DATABASE_URL (a PostgreSQL server); run with --only stores.
  stores: storesScenario,
}

/** What `npm run bench` runs without --only. */
const DEFAULT_SCENARIOS = ['relay', 'responses', 'session', 'knowledge', 'streams', 'sustained', 'ingest']

function flag(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`)
  if (i === -1) return undefined
  const eq = argv.find((a) => a.startsWith(`--${name}=`))
  return eq ? eq.slice(name.length + 3) : (argv[i + 1] ?? '')
}

export async function runSuite(argv: string[], defaults: string[] = DEFAULT_SCENARIOS): Promise<void> {
  const quick = argv.includes('--quick')
  const profile = argv.includes('--profile')
  const verbose = argv.includes('--verbose')
  const only = flag(argv, 'only')?.split(',').filter(Boolean) ?? defaults
  const abDist = flag(argv, 'ab') || undefined
  const num = (name: string): number | undefined => {
    const v = flag(argv, name)
    if (v === undefined) return undefined
    const n = Number(v)
    if (!(n > 0)) {
      process.stderr.write(`--${name} must be a positive number, got "${v}"\n`)
      process.exit(2)
    }
    return n
  }
  const streams = { rampSeconds: num('stream-ramp'), words: num('stream-words') }
  const unknown = only.filter((n) => !(n in SCENARIOS))
  if (unknown.length > 0) {
    process.stderr.write(`unknown scenario(s) ${unknown.join(', ')}; choose from ${Object.keys(SCENARIOS).join(', ')}\n`)
    process.exit(2)
  }
  const started = performance.now()
  const log = (line: string): void => void process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(0).padStart(3)} s] ${line}\n`)
  const cpu = cpus()[0]?.model ?? 'unknown CPU'
  log(`recallgate bench: ${cpus().length} × ${cpu}, Node ${process.version}, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}${quick ? ', quick' : ''}${abDist ? `, A/B against ${abDist}` : ''}`)

  const rows: Row[] = []
  const problems: string[] = []
  const profiles: Array<{ scenario: string; dir: string }> = []
  for (const name of only) {
    const cpuProfDir = profile ? mkdtempSync(join(tmpdir(), `recallgate-prof-${name}-`)) : undefined
    if (cpuProfDir) profiles.push({ scenario: name, dir: cpuProfDir })
    try {
      const r = await (SCENARIOS[name] as (ctx: ScenarioContext) => Promise<ScenarioResult>)({ quick, verbose, cpuProfDir, abDist, streams, log })
      rows.push(...r.rows)
      problems.push(...r.problems)
    } catch (err) {
      problems.push(`${name}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`)
    }
  }
  const seconds = (performance.now() - started) / 1000
  process.stdout.write(`\n${renderTable(rows)}\n\n`)
  process.stdout.write(`${cpus().length} × ${cpu}, Node ${process.version}, ${seconds.toFixed(0)} s, load average at the end ${loadavg().map((l) => l.toFixed(1)).join(' ')}\n`)
  const misses = rows.filter((r) => r.pass === false)
  if (misses.length > 0) process.stdout.write(`targets missed: ${misses.map((r) => `${r.scenario} / ${r.measure}`).join('; ')}\n`)
  for (const p of problems) process.stdout.write(`problem: ${p}\n`)
  for (const p of profiles) process.stdout.write(`\nCPU profiles, ${p.scenario} (${p.dir}):\n${summarizeProfiles(p.dir)}\n`)
  process.exitCode = problems.length > 0 ? 1 : 0
}

const entry = process.argv[1]
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) await runSuite(process.argv.slice(2))
