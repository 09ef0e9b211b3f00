/**
 * Ingestion through the API, as a client meets it (issue 28): how fast an upload is ingested, and how long the
 * gateway takes to answer `/healthz` meanwhile.
 *
 * Method: a gateway and the mock in their own processes (bench/lib/stack.ts), a real LMDB in a temp dir. Each shape of
 * bench/lib/shapes.ts is uploaded through `POST /api/v1/files` (JSON body `{filename, content}`), one upload at a time,
 * prose at 5 MB and each hostile shape at 1 MB, then deleted again (outside the measured window, with a second to settle)
 * so the tenant stays small; rounds rotate the order.
 * Throughput = the text's MB over the upload's wall time (request sent → 201 with the file's chunks: extraction,
 * chunking, embedding, the durable write, BM25 and HNSW). Meanwhile a second client asks `/healthz` over and over
 * (each ask 5 ms after the last answer) and keeps the longest answer per upload. Baseline in the same run: the same
 * `/healthz` loop for 2 s with no upload, before every round (the machine's own noise: on a shared host a descheduled
 * process answers late whatever it does). Wall figures need a free core for the gateway's worker thread: run it alone.
 * CPU per MB: the gateway process's CPU time (all its threads: `process.cpuUsage` in the child) over the same window,
 * per MB of text; steadier than MB/s on a shared machine. The graph insertions that run after the response are not in it.
 *
 *   node dist/bench/ingest-rate.js [--rounds 3] [--prose-mb 5] [--shape-mb 1] [--only prose,base64-lines] [--profile]
 *
 * --profile: profile the gateway over the uploads (main thread) and print its hottest functions.
 */
import { mkdtempSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Pool } from 'undici'
import { HOSTILE_SHAPES, PROSE, type Shape } from './lib/shapes.js'
import { BENCH_KEY, startStack } from './lib/stack.js'
import { summarizeProfiles } from './lib/profile.js'
import { quantile } from './lib/stats.js'

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? undefined : process.argv[i + 1]
}

const rounds = Number(flag('rounds') ?? 3)
const MB = 1024 * 1024
const proseBytes = Number(flag('prose-mb') ?? 5) * MB
const shapeBytes = Number(flag('shape-mb') ?? 1) * MB
const only = flag('only')?.split(',')
const shapes = [PROSE, ...HOSTILE_SHAPES].filter((s) => only === undefined || only.includes(s.name))

/** Asks /healthz until `stop` resolves; the answers' times in ms. */
async function probe(pool: Pool, stop: Promise<unknown>): Promise<number[]> {
  let done = false
  void stop.finally(() => (done = true))
  const times: number[] = []
  while (!done) {
    const t0 = performance.now()
    const res = await pool.request({ path: '/healthz', method: 'GET' })
    await res.body.dump()
    times.push(performance.now() - t0)
    await sleep(5)
  }
  return times
}

async function main(): Promise<void> {
  const cpuProfDir = process.argv.includes('--profile') ? mkdtempSync(join(tmpdir(), 'recallgate-prof-ingest-')) : undefined
  const stack = await startStack({ env: { MAX_FILE_BYTES: String(64 * MB) }, cpuProfDir })
  const api = new Pool(stack.origins.gateway, { connections: 1 })
  const health = new Pool(stack.origins.gateway, { connections: 1 })
  const texts = new Map<string, string>(shapes.map((s) => [s.name, s.make(s === PROSE ? proseBytes : shapeBytes)]))
  type Figures = { mbps: number[]; cpuPerMb: number[]; healthMax: number[]; deleteMax: number[] }
  const results = new Map<string, Figures>(shapes.map((s) => [s.name, { mbps: [], cpuPerMb: [], healthMax: [], deleteMax: [] }]))
  const idleMax: number[] = []
  const upload = async (shape: Shape, text: string): Promise<string> => {
    const res = await api.request({
      path: '/api/v1/files',
      method: 'POST',
      headers: { 'content-type': 'application/json', servicekey: BENCH_KEY },
      body: JSON.stringify({ filename: shape.filename, content: text }),
    })
    const body = (await res.body.json()) as { id?: string }
    if (res.statusCode !== 201 || body.id === undefined) throw new Error(`${shape.name}: ${res.statusCode} ${JSON.stringify(body).slice(0, 300)}`)
    return body.id
  }
  /**
   * Deleted outside the upload's measured window, and given time for the index's background work to finish; the
   * longest /healthz answer during the delete itself is its own figure (a large file's delete held the event loop too).
   */
  const remove = async (id: string): Promise<number> => {
    const deleted = (async () => {
      const del = await api.request({ path: `/api/v1/files/${id}`, method: 'DELETE', headers: { servicekey: BENCH_KEY } })
      await del.body.dump()
    })()
    const [times] = await Promise.all([probe(health, deleted), deleted])
    await sleep(1_000)
    return Math.max(...times)
  }
  try {
    // Warm-up: the worker thread, the tokenizer's tables, the first pages of the databases.
    await remove(await upload(PROSE, PROSE.make(256 * 1024)))
    console.log(`ingestion through the API: ${rounds} rounds, prose ${proseBytes / MB} MB, shapes ${shapeBytes / MB} MB, load ${loadavg()[0]?.toFixed(1)}`)
    await stack.profileStart()
    for (let r = 0; r < rounds; r++) {
      idleMax.push(Math.max(...(await probe(health, sleep(2_000)))))
      const order = shapes.map((_, i) => shapes[(i + r) % shapes.length] as Shape)
      for (const shape of order) {
        const text = texts.get(shape.name) as string
        const cpu0 = (await stack.gateway.stats()).cpuUs
        const t0 = performance.now()
        const uploaded = upload(shape, text)
        const [times, id] = await Promise.all([probe(health, uploaded), uploaded])
        const seconds = (performance.now() - t0) / 1000
        const cpuSeconds = ((await stack.gateway.stats()).cpuUs - cpu0) / 1e6
        const deleteMax = await remove(id)
        const entry = results.get(shape.name) as Figures
        const mb = Buffer.byteLength(text) / MB
        entry.mbps.push(mb / seconds)
        entry.cpuPerMb.push(cpuSeconds / mb)
        entry.healthMax.push(Math.max(...times))
        entry.deleteMax.push(deleteMax)
      }
      console.log(`  round ${r + 1} done, load ${loadavg()[0]?.toFixed(1)}`)
    }
    await stack.profileStop('uploads')
    console.log('')
    console.log('| upload | MB/s (median; rounds) | gateway CPU s per MB (median) | longest /healthz answer during it (max over rounds) | during its delete |')
    console.log('|---|---|---|---|---|')
    console.log(`| none (baseline, 2 s) | - | - | ${Math.max(...idleMax).toFixed(1)} ms | - |`)
    for (const s of shapes) {
      const e = results.get(s.name) as Figures
      const size = (s === PROSE ? proseBytes : shapeBytes) / MB
      console.log(
        `| ${s.name} ${size} MB | ${quantile(e.mbps, 0.5).toFixed(2)} (${Math.min(...e.mbps).toFixed(2)}–${Math.max(...e.mbps).toFixed(2)}) | ${quantile(e.cpuPerMb, 0.5).toFixed(2)} | ${Math.max(...e.healthMax).toFixed(1)} ms | ${Math.max(...e.deleteMax).toFixed(1)} ms |`,
      )
    }
    if (cpuProfDir !== undefined) console.log(`\nCPU profile of the gateway's main thread (${cpuProfDir}):\n${summarizeProfiles(cpuProfDir, 25)}`)
    console.log(`\ntargets (issue 28): prose ≥ 2.5 MB/s, every shape ≥ 1 MB/s, /healthz ≤ 50 ms; load at the end ${loadavg()[0]?.toFixed(1)}`)
  } finally {
    await api.close()
    await health.close()
    await stack.close()
  }
}

await main()
