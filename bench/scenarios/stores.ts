/**
 * The PostgreSQL store against the embedded LMDB one (issue 23), in one run, arms interleaved. Three gateways, each in
 * its own process with its own DATA_DIR and its own mock provider: one on LMDB, two replicas on one PostgreSQL
 * database (DATABASE_URL). Measured:
 *   - a saved exchange: the same chat continuing a 20-message session, saved durably before the answer
 *     (MAX_SESSION_MESSAGES=20 keeps the session's size fixed), on LMDB and on PostgreSQL: PostgreSQL's added p50;
 *   - hybrid search over the same uploaded files (`/files/search`), from the replica's loaded index: p50 on each;
 *   - read-your-writes across replicas: a file uploaded through replica A, searched through replica B on the very
 *     next request (found or not, over several files), and that request's time against B's usual search time.
 * The throughput of two replicas against one needs the load generator on a core of its own, which a 2-core machine
 * does not have: not measured here (see docs/scaling.md).
 *
 * Needs RECALLGATE_BENCH_DATABASE_URL: a PostgreSQL server whose user may create databases (one is made for the run
 * and dropped after). `node dist/bench/run-all.js --only stores [--quick]`
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chatRequest, type LoadRequest } from '../../src/cli/bench.js'
import { arm, armProblems } from '../lib/arm-report.js'
import { Corpus } from '../lib/corpus.js'
import { cachedKnowledgeBase } from '../lib/kb-cache.js'
import { freshDatabase, serverCpu } from '../lib/postgres.js'
import { describeArms, interleave } from '../lib/interleave.js'
import { BENCH_KEY, callJson, chatBody, PROVIDER_KEY, startStack, type ScenarioContext, type Stack } from '../lib/stack.js'
import { quantile, us } from '../lib/stats.js'
import type { Row } from '../lib/table.js'
import type { ScenarioResult } from './relay.js'

const SESSION = 'bench-store'

function searchRequest(query: string): LoadRequest {
  return {
    path: '/api/v1/files/search',
    headers: { 'content-type': 'application/json', servicekey: BENCH_KEY },
    body: JSON.stringify({ query, k: 8, min_relevance: 0 }),
    stream: false,
  }
}

export async function storesScenario(ctx: ScenarioContext): Promise<ScenarioResult> {
  const base = process.env.RECALLGATE_BENCH_DATABASE_URL
  if (base === undefined || base === '') {
    return { rows: [], problems: ['stores: set RECALLGATE_BENCH_DATABASE_URL to a PostgreSQL server whose user may create databases'] }
  }
  const small = await replicaScenario(ctx, base)
  const large = await largeSearchScenario(ctx, base)
  return { rows: [...small.rows, ...large.rows], problems: [...small.problems, ...large.problems] }
}

/** The saved exchange, search over 1,600 paragraphs uploaded through the API, and read-your-writes across replicas. */
async function replicaScenario(ctx: ScenarioContext, base: string): Promise<ScenarioResult> {
  const db = await freshDatabase(base)
  const stacks: Stack[] = []
  const problems: string[] = []
  const server = await serverCpu(base)
  try {
    const env = { MAX_SESSION_MESSAGES: '20' }
    const cpuProfDir = ctx.cpuProfDir
    const lmdb = await startStack({ env, cpuProfDir })
    stacks.push(lmdb)
    const pgA = await startStack({ env: { ...env, DATABASE_URL: db.url }, cpuProfDir })
    stacks.push(pgA)
    const pgB = await startStack({ env: { ...env, DATABASE_URL: db.url }, cpuProfDir })
    stacks.push(pgB)
    // The server's CPU is charged to every arm, LMDB's too (idle then: the control).
    const backendCpuUs = server?.read
    // One profile per gateway and phase (`--profile`): `<phase>-<arm>.gateway`.
    const profiled = async (phase: string, m: Map<string, { ok: number }>, arms: Array<[string, Stack]>): Promise<void> => {
      for (const [name, s] of arms) await s.profileStop(`${phase}-${name.replace(' ', '')}`, { gateway: m.get(name)?.ok ?? 0 })
    }

    // The same files on both engines (uploaded once to PostgreSQL: both replicas serve them).
    const corpus = new Corpus(11)
    const files = ctx.quick ? 10 : 40
    const paragraphs = 40
    ctx.log(`stores: uploading ${files} files to each engine`)
    const topics: string[] = []
    for (let f = 0; f < files; f++) {
      const content = Array.from({ length: paragraphs }, () => corpus.sentence(60)).join('\n\n')
      topics.push(corpus.sentence(3))
      for (const g of [lmdb, pgA]) await callJson(g.origins.gateway, 'POST', '/api/v1/files', { filename: `doc-${f}.txt`, content: `${topics[f]}\n\n${content}` })
    }
    // Seed the session on each engine (the session's size stays at 20 messages from here on).
    for (const g of [lmdb, pgA]) for (let i = 0; i < 10; i++) await callJson(g.origins.gateway, 'POST', '/api/v1/chat/completions', chatBody(`turn ${i}`, { sessionId: SESSION, useRAG: false }))

    const rounds = ctx.quick ? 4 : 10
    const batch = ctx.quick ? 100 : 200
    const chat = chatRequest({ basePath: '/api/v1', serviceKey: BENCH_KEY, providerKey: PROVIDER_KEY, body: chatBody('And then?', { sessionId: SESSION, useRAG: false }) })
    ctx.log(`stores: saved exchanges and searches, ${rounds} rounds × ${batch} requests per arm`)
    const saved = await interleave(
      [
        { name: 'lmdb', origin: lmdb.origins.gateway, request: chat, proc: lmdb.gateway, backendCpuUs },
        { name: 'postgres', origin: pgA.origins.gateway, request: chat, proc: pgA.gateway, backendCpuUs },
      ],
      {
        rounds,
        batch: { connections: 1, requests: batch },
        warmup: { connections: 1, requests: 50 },
        afterWarmup: async () => void (await Promise.all([lmdb.profileStart(), pgA.profileStart()])),
      },
    )
    await profiled('save', saved, [['lmdb', lmdb], ['postgres', pgA]])
    const query = topics[0] ?? 'query'
    const search = await interleave(
      [
        { name: 'lmdb', origin: lmdb.origins.gateway, request: searchRequest(query), proc: lmdb.gateway, backendCpuUs },
        { name: 'postgres A', origin: pgA.origins.gateway, request: searchRequest(query), proc: pgA.gateway, backendCpuUs },
        { name: 'postgres B', origin: pgB.origins.gateway, request: searchRequest(query), proc: pgB.gateway, backendCpuUs },
      ],
      {
        rounds,
        batch: { connections: 1, requests: batch },
        warmup: { connections: 1, requests: 50 },
        afterWarmup: async () => void (await Promise.all([lmdb.profileStart(), pgA.profileStart(), pgB.profileStart()])),
      },
    )
    await profiled('search', search, [['lmdb', lmdb], ['postgres A', pgA], ['postgres B', pgB]])

    // Read-your-writes: upload through A, search through B at once, a few times.
    const tries = ctx.quick ? 5 : 20
    let seen = 0
    const firstMs: number[] = []
    for (let i = 0; i < tries; i++) {
      const marker = `${corpus.word()}${corpus.word()}${i}`
      await callJson(pgA.origins.gateway, 'POST', '/api/v1/files', { filename: `fresh-${i}.txt`, content: `${marker} ${corpus.sentence(40)}` })
      const started = performance.now()
      const r = (await callJson(pgB.origins.gateway, 'POST', '/api/v1/files/search', { query: marker, k: 3 })) as { data: Array<{ filename: string }> }
      firstMs.push(performance.now() - started)
      if (r.data.some((h) => h.filename === `fresh-${i}.txt`)) seen++
    }
    if (ctx.verbose) for (const [title, m] of [['saved', saved], ['search', search]] as const) ctx.log(describeArms(`stores, ${title}`, m))
    for (const m of [saved, search]) problems.push(...armProblems('stores', m))

    const p50 = (m: typeof saved, n: string) => quantile(arm(m, n).latencyMs, 0.5)
    const added = p50(saved, 'postgres') - p50(saved, 'lmdb')
    const searchRatio = p50(search, 'postgres B') / p50(search, 'lmdb')
    firstMs.sort((a, b) => a - b)
    // CPU per request: the gateway's own, and the database server's (which runs on the same cores).
    const cpu = (m: typeof saved, n: string): string => {
      const r = arm(m, n)
      const db = Number.isFinite(r.backendCpuUsPerRequest) ? ` + db ${r.backendCpuUsPerRequest.toFixed(0)}` : ''
      return `${r.cpuUsPerRequest.toFixed(0)}${db} µs`
    }
    const rows: Row[] = [
      {
        scenario: 'PostgreSQL store',
        measure: 'serial p50 of a saved exchange (20-message session)',
        baseline: `LMDB ${us(p50(saved, 'lmdb'))}`,
        value: us(p50(saved, 'postgres')),
        delta: `${added >= 0 ? '+' : ''}${us(added)}`,
        target: '≤ +1.5 ms',
        pass: added <= 1.5,
      },
      {
        scenario: 'PostgreSQL store',
        measure: 'CPU per saved exchange (gateway + database server)',
        baseline: `LMDB ${cpu(saved, 'lmdb')}`,
        value: cpu(saved, 'postgres'),
        delta: '',
        target: '',
      },
      {
        scenario: 'PostgreSQL store',
        measure: `hybrid search p50, ${files * paragraphs} paragraphs, from a replica's index`,
        baseline: `LMDB ${us(p50(search, 'lmdb'))}`,
        value: `A ${us(p50(search, 'postgres A'))}, B ${us(p50(search, 'postgres B'))}`,
        delta: `${searchRatio.toFixed(2)}×`,
        target: '≤ 1.10×',
        pass: searchRatio <= 1.1,
      },
      {
        scenario: 'PostgreSQL store',
        measure: 'CPU per search (gateway + database server)',
        baseline: `LMDB ${cpu(search, 'lmdb')}`,
        value: `A ${cpu(search, 'postgres A')}, B ${cpu(search, 'postgres B')}`,
        delta: '',
        target: '',
      },
      {
        scenario: 'PostgreSQL store',
        measure: "another replica's upload found by the next search",
        baseline: `B's search p50 ${us(p50(search, 'postgres B'))}`,
        value: `${seen}/${tries} (that request's p50 ${us(quantile(firstMs, 0.5))})`,
        delta: '',
        target: 'the next request',
        pass: seen === tries,
      },
    ]
    return { rows, problems }
  } finally {
    for (const s of stacks.reverse()) await s.close().catch(() => undefined)
    await server?.close().catch(() => undefined)
    await db.drop().catch(() => undefined)
  }
}

/**
 * Hybrid search at the size issue 23 names (100k chunks; 10k with --quick): the bench's cached knowledge base served by
 * an LMDB gateway on its DATA_DIR, against the same chunks copied into a fresh database with `recallgate migrate
 * --from-lmdb` (what an operator growing into replicas runs) and served by a replica that never saw an upload, its
 * index loaded from PostgreSQL on the first search. Both searches pay for the same ranking; what the replica adds is
 * its version read per search (read-your-writes), a fixed cost that the small corpus above shows at its largest.
 */
async function largeSearchScenario(ctx: ScenarioContext, base: string): Promise<ScenarioResult> {
  const chunks = ctx.quick ? 10_000 : 100_000
  const { dataDir, built } = await cachedKnowledgeBase(BENCH_KEY, chunks, (l) => ctx.log(`stores: ${l}`))
  const db = await freshDatabase(base)
  const server = await serverCpu(base)
  const stacks: Stack[] = []
  const problems: string[] = []
  const scratch = mkdtempSync(join(tmpdir(), 'recallgate-bench-migrate-'))
  try {
    const copyStarted = performance.now()
    const cli = fileURLToPath(new URL('../../src/cli.js', import.meta.url))
    const copy = spawnSync(process.execPath, [cli, 'migrate', '--from-lmdb', dataDir], { env: { ...process.env, DATABASE_URL: db.url, DATA_DIR: scratch }, encoding: 'utf8' })
    if (copy.status !== 0) return { rows: [], problems: [`stores: migrate --from-lmdb failed: ${copy.stderr.slice(-500)}`] }
    const copySeconds = (performance.now() - copyStarted) / 1000
    ctx.log(`stores: ${built.chunks} chunks copied into PostgreSQL in ${copySeconds.toFixed(1)} s`)
    const lmdb = await startStack({ dataDir, cpuProfDir: ctx.cpuProfDir })
    stacks.push(lmdb)
    const replica = await startStack({ env: { DATABASE_URL: db.url }, cpuProfDir: ctx.cpuProfDir })
    stacks.push(replica)
    const query = `What does the documentation say about ${new Corpus(42).sentence(10)}`
    // The first search of each loads the tenant's index (the replica's from PostgreSQL), outside the timed rounds.
    const loadMs: number[] = []
    for (const g of [lmdb, replica]) {
      const started = performance.now()
      const r = (await callJson(g.origins.gateway, 'POST', '/api/v1/files/search', { query, k: 8, min_relevance: 0 })) as { data: unknown[] }
      loadMs.push(performance.now() - started)
      if (r.data.length === 0) problems.push('stores: the 100k search found nothing')
    }
    // The replica answers its first search before its graph is built (from the exact set; search-index.ts
    // `#buildLater`), and builds the graph in a worker for ≈ 16 s more: the timed rounds wait for its file, so they
    // measure searches of the graph, and the build's CPU is not counted as theirs.
    const graphReady = performance.now()
    const graphFile = (): boolean => readdirSync(join(replica.dataDir, 'index')).some((f) => f.endsWith('.hnsw'))
    while (!graphFile()) {
      if (performance.now() - graphReady > 300_000) {
        problems.push("stores: the replica's graph was not saved within 5 minutes")
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    const graphSeconds = (performance.now() - graphReady + (loadMs[1] ?? 0)) / 1000
    const rounds = ctx.quick ? 4 : 10
    const batch = ctx.quick ? 100 : 200
    ctx.log(`stores: search over ${built.chunks} chunks, ${rounds} rounds × ${batch} requests per arm`)
    const m = await interleave(
      [
        { name: 'lmdb', origin: lmdb.origins.gateway, request: searchRequest(query), proc: lmdb.gateway, backendCpuUs: server?.read },
        { name: 'replica', origin: replica.origins.gateway, request: searchRequest(query), proc: replica.gateway, backendCpuUs: server?.read },
      ],
      {
        rounds,
        batch: { connections: 1, requests: batch },
        warmup: { connections: 1, requests: 50 },
        afterWarmup: async () => void (await Promise.all([lmdb.profileStart(), replica.profileStart()])),
      },
    )
    await lmdb.profileStop('search100k-lmdb', { gateway: arm(m, 'lmdb').ok })
    await replica.profileStop('search100k-replica', { gateway: arm(m, 'replica').ok })
    if (ctx.verbose) ctx.log(describeArms('stores, search at scale', m))
    problems.push(...armProblems('stores', m))
    const p50 = (n: string) => quantile(arm(m, n).latencyMs, 0.5)
    const ratio = p50('replica') / p50('lmdb')
    const cpu = (n: string) => `${arm(m, n).cpuUsPerRequest.toFixed(0)} µs`
    const label = `${Math.round(built.chunks / 1000)}k chunks`
    return {
      rows: [
        {
          scenario: 'PostgreSQL store',
          measure: `hybrid search p50, ${label}, a replica's index loaded from PostgreSQL (copied by migrate --from-lmdb in ${copySeconds.toFixed(1)} s; first search ${us(loadMs[1] ?? NaN)} against ${us(loadMs[0] ?? NaN)}, its graph built ${graphSeconds.toFixed(1)} s after the search began)`,
          baseline: `LMDB ${us(p50('lmdb'))}`,
          value: us(p50('replica')),
          delta: `${ratio.toFixed(2)}×`,
          target: '≤ 1.10×',
          pass: ratio <= 1.1,
        },
        { scenario: 'PostgreSQL store', measure: `gateway CPU per search, ${label}`, baseline: `LMDB ${cpu('lmdb')}`, value: cpu('replica'), delta: '', target: '' },
      ],
      problems,
    }
  } finally {
    for (const s of stacks.reverse()) await s.close().catch(() => undefined)
    await server?.close().catch(() => undefined)
    await db.drop().catch(() => undefined)
    rmSync(scratch, { recursive: true, force: true })
  }
}
