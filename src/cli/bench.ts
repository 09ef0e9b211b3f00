/**
 * `recallgate bench`: the load-testing kit, pointed at any gateway (or any OpenAI-compatible endpoint). It drives
 * chat completions over an undici Pool, closed loop (N connections, each sending its next request when the last one
 * finished) or open loop (`--rate`: requests start on a fixed schedule whatever the server's pace, and latency counts
 * from the scheduled start so a stalled server cannot hide its queue — no coordinated omission), and prints
 * requests per second, latency percentiles and, with `--stream`, the time to the first streamed chunk.
 *
 * The engine (`runLoad`, `summarize`) is exported for the benchmark suite in bench/, which measures the same way.
 */
import { Pool, type Dispatcher } from 'undici'
import type { Ms } from '../types.js'
import { type CommandIo, gatewayUrl, intFlag, parseArgs, reportUsage, serviceKey, UsageError } from './args.js'
import { networkError } from './gateway-response.js'

export const help = `Usage: recallgate bench [--url URL] [--key KEY] [--provider-key KEY] [options]

Load-test a running gateway with chat completions and print req/s, latency percentiles and, when streaming,
the time to the first streamed chunk. Every request is a real completion: to measure the gateway without
spending tokens, run it with UPSTREAM_BASE_URL pointing at \`recallgate mock-upstream\`. Use a service key on
the \`unlimited\` plan, or the gateway's rate limit is what you will measure.

Options:
  --url URL            gateway base URL (env RECALLGATE_URL; default http://127.0.0.1:8080)
  --key KEY            service key (env RECALLGATE_KEY)
  --provider-key KEY   sent as Authorization: Bearer KEY (env RECALLGATE_PROVIDER_KEY; default "bench")
  --model ID           model (default openai/gpt-4o-mini)
  --message TEXT       the user message (default: a short question)
  --connections N      concurrent connections, 1-10000 (default 32)
  --duration S         seconds of measured load, 1-3600 (default 10)
  --requests N         stop after N requests instead of after --duration
  --warmup S           seconds of unmeasured load first, 0-600 (default 1)
  --rate R             open loop: start R requests per second instead of a closed loop
  --stream             stream the replies (reports time to first chunk)
  --session ID         use this sessionId (memory on; each request is saved to it)
  --no-rag             send useRAG: false (default: the gateway's default, retrieval on)
  --max-tokens N       max_tokens of each request
  --json               print the result as JSON
  -h, --help           show this help

Exit status: 0 every request succeeded; 1 some failed (the report says how); 2 usage error.
`

/** One request, sent as is on every iteration. */
export interface LoadRequest {
  path: string
  headers: Record<string, string>
  body: string
  /** Read the reply as SSE: time the first `data:` event and require the closing `[DONE]`. */
  stream: boolean
  /**
   * Other SSE dialects (the Responses API's events), or another first event: the text (or pattern) that marks the first
   * model output (default `data: `, the first event whatever it holds) and the text the stream must end with (default
   * `data: [DONE]`).
   */
  marks?: { first: string | RegExp; done: string }
}

export interface LoadOptions {
  connections: number
  /** Stop starting requests after this long. At least one of `durationMs` and `requests` must be set. */
  durationMs?: Ms
  /** Stop after this many requests have been started. */
  requests?: number
  /** Open loop: requests per second on a fixed schedule. Absent: closed loop. */
  rate?: number
  /** Cap on recorded samples (the counters keep counting); default 1,000,000. */
  maxSamples?: number
}

export interface LoadResult {
  ok: number
  failed: number
  /** `200`, `429`, `ECONNREFUSED`, `no [DONE]` … → count. */
  outcomes: Record<string, number>
  elapsedMs: Ms
  /** Whole request, send to last byte, of successful requests (open loop: from the scheduled start). */
  latencyMs: number[]
  /** Stream only: send to the first `data:` event. */
  ttftMs: number[]
}

const DATA_MARK = Buffer.from('data: ')
const DONE_MARK = 'data: [DONE]'

/** Run a load against `dispatcher` (a Pool to the target's origin) and collect per-request samples. */
export async function runLoad(dispatcher: Dispatcher, req: LoadRequest, o: LoadOptions): Promise<LoadResult> {
  if (o.durationMs === undefined && o.requests === undefined) throw new TypeError('runLoad needs durationMs or requests')
  const result: LoadResult = { ok: 0, failed: 0, outcomes: {}, elapsedMs: 0, latencyMs: [], ttftMs: [] }
  const maxSamples = o.maxSamples ?? 1_000_000
  const body = Buffer.from(req.body)
  const started = performance.now()
  const deadline = o.durationMs === undefined ? Infinity : started + o.durationMs
  const limit = o.requests ?? Infinity
  let sent = 0
  const count = (key: string): void => void (result.outcomes[key] = (result.outcomes[key] ?? 0) + 1)

  const one = async (from: number): Promise<void> => {
    let outcome: string
    let ttft: number | undefined
    try {
      const res = await dispatcher.request({ method: 'POST', path: req.path, headers: req.headers, body })
      outcome = String(res.statusCode)
      if (!req.stream) {
        await res.body.dump({ limit: Infinity })
      } else if (req.marks === undefined) {
        let tail = ''
        for await (const chunk of res.body as AsyncIterable<Buffer>) {
          if (ttft === undefined && (chunk.includes(DATA_MARK) || (tail + chunk.toString('latin1', 0, 8)).includes('data: ')))
            ttft = performance.now() - from
          tail = (tail + chunk.toString('latin1', Math.max(0, chunk.length - 32))).slice(-32)
        }
        if (res.statusCode === 200 && !tail.includes(DONE_MARK)) outcome = 'no [DONE]'
      } else {
        const { first, done } = req.marks
        const keep = Math.max(typeof first === 'string' ? first.length : 0, done.length) + 64
        const seen = typeof first === 'string' ? (text: string) => text.includes(first) : (text: string) => first.test(text)
        let tail = ''
        let ended = false
        for await (const chunk of res.body as AsyncIterable<Buffer>) {
          const text = tail + chunk.toString('latin1')
          if (ttft === undefined && seen(text)) ttft = performance.now() - from
          if (text.includes(done)) ended = true
          tail = text.slice(-keep)
        }
        if (res.statusCode === 200 && !ended) outcome = `no ${done}`
      }
    } catch (err) {
      // A failed request is an outcome to count and show, not a reason to stop the run.
      const e = networkError(err)
      outcome = e.code ?? e.text
    }
    count(outcome)
    if (outcome !== '200') {
      result.failed++
      return
    }
    result.ok++
    if (result.latencyMs.length < maxSamples) result.latencyMs.push(performance.now() - from)
    if (ttft !== undefined && result.ttftMs.length < maxSamples) result.ttftMs.push(ttft)
  }

  if (o.rate === undefined) {
    const worker = async (): Promise<void> => {
      while (sent < limit && performance.now() < deadline) {
        sent++
        await one(performance.now())
      }
    }
    await Promise.all(Array.from({ length: o.connections }, worker))
  } else {
    // Open loop: every millisecond tick starts the requests whose scheduled time has come. In flight is bounded so an
    // overloaded target cannot make the generator itself run out of memory; what does not fit is counted as dropped.
    const interval = 1000 / o.rate
    const maxInFlight = Math.max(o.connections * 8, 64)
    const inFlight = new Set<Promise<void>>()
    await new Promise<void>((resolve) => {
      const tick = (): void => {
        const now = performance.now()
        while (sent < limit) {
          const due = started + sent * interval
          if (due > now || due >= deadline) break
          sent++
          if (inFlight.size >= maxInFlight) {
            count('dropped (generator in-flight cap)')
            result.failed++
            continue
          }
          const p = one(due).finally(() => inFlight.delete(p))
          inFlight.add(p)
        }
        if (sent >= limit || started + sent * interval >= deadline) resolve()
        else setTimeout(tick, 1)
      }
      tick()
    })
    await Promise.all(inFlight)
  }
  result.elapsedMs = performance.now() - started
  return result
}

export interface Summary {
  n: number
  mean: number
  p50: number
  p90: number
  p99: number
  max: number
}

/** Nearest-rank percentile of an ascending array; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN
  const rank = Math.ceil(q * sorted.length) - 1
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))] as number
}

export function summarize(samples: readonly number[]): Summary {
  const s = Float64Array.from(samples).sort()
  let sum = 0
  for (const x of s) sum += x
  return { n: s.length, mean: s.length ? sum / s.length : NaN, p50: percentile(s, 0.5), p90: percentile(s, 0.9), p99: percentile(s, 0.99), max: s.length ? (s[s.length - 1] as number) : NaN }
}

/** A chat-completions request as the bench sends it. */
export function chatRequest(o: {
  basePath: string
  serviceKey?: string | undefined
  providerKey: string
  body: Record<string, unknown>
}): LoadRequest {
  const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${o.providerKey}` }
  if (o.serviceKey !== undefined) headers.servicekey = o.serviceKey
  return { path: `${o.basePath}/chat/completions`, headers, body: JSON.stringify(o.body), stream: o.body.stream === true }
}

const fmtMs = (ms: number): string => (Number.isNaN(ms) ? '-' : ms < 10 ? `${ms.toFixed(2)} ms` : `${ms.toFixed(1)} ms`)

export function formatReport(r: LoadResult, o: { title: string; seconds: number }): string {
  const lat = summarize(r.latencyMs)
  const lines = [
    o.title,
    `requests   ${r.ok + r.failed} in ${o.seconds.toFixed(1)} s: ${(r.ok / o.seconds).toFixed(1)} req/s succeeded, ${r.failed} failed`,
    `latency    p50 ${fmtMs(lat.p50)}   p90 ${fmtMs(lat.p90)}   p99 ${fmtMs(lat.p99)}   max ${fmtMs(lat.max)}`,
  ]
  if (r.ttftMs.length > 0) {
    const t = summarize(r.ttftMs)
    lines.push(`1st chunk  p50 ${fmtMs(t.p50)}   p90 ${fmtMs(t.p90)}   p99 ${fmtMs(t.p99)}   max ${fmtMs(t.max)}`)
  }
  const outcomes = Object.entries(r.outcomes).sort((a, b) => b[1] - a[1])
  lines.push(`outcomes   ${outcomes.map(([k, n]) => `${k} ×${n}`).join(', ') || 'none'}`)
  return `${lines.join('\n')}\n`
}

export async function run(argv: string[], io: CommandIo): Promise<number> {
  let url: string, key: string, o: LoadOptions, warmupMs: Ms, json: boolean, request: LoadRequest
  try {
    const args = parseArgs(argv, {
      url: { type: 'string' },
      key: { type: 'string' },
      'provider-key': { type: 'string' },
      model: { type: 'string' },
      message: { type: 'string' },
      connections: { type: 'string', short: 'c' },
      duration: { type: 'string', short: 'd' },
      requests: { type: 'string', short: 'n' },
      warmup: { type: 'string' },
      rate: { type: 'string' },
      stream: { type: 'boolean' },
      session: { type: 'string' },
      'no-rag': { type: 'boolean' },
      'max-tokens': { type: 'string' },
      json: { type: 'boolean' },
    })
    if (args.help) {
      io.stdout.write(help)
      return 0
    }
    if (args.positionals.length > 0) throw new UsageError(`unexpected argument "${args.positionals[0]}"`)
    const f = args.flags
    url = gatewayUrl(f.url, io.env)
    key = serviceKey(f.key, io.env)
    const model = f.model ?? 'openai/gpt-4o-mini'
    if (!/^[^/\s]+\/\S+$/.test(model)) throw new UsageError(`--model must look like vendor/name, got "${model}"`)
    const connections = intFlag('connections', f.connections, { min: 1, max: 10_000, fallback: 32 })
    o = { connections, durationMs: intFlag('duration', f.duration, { min: 1, max: 3600, fallback: 10 }) * 1000 }
    if (f.requests !== undefined) o = { connections, requests: intFlag('requests', f.requests, { min: 1, max: 100_000_000, fallback: 1 }) }
    warmupMs = intFlag('warmup', f.warmup, { min: 0, max: 600, fallback: 1 }) * 1000
    if (f.rate !== undefined) {
      const rate = Number(f.rate)
      if (!Number.isFinite(rate) || rate <= 0 || rate > 1_000_000) throw new UsageError(`--rate must be a number of requests per second, got "${f.rate}"`)
      o.rate = rate
    }
    const body: Record<string, unknown> = {
      model,
      messages: [{ role: 'user', content: f.message ?? 'In one sentence: why does a gateway keep connections alive?' }],
    }
    if (f.stream) body.stream = true
    if (f.session !== undefined) body.sessionId = f.session
    if (f['no-rag']) body.useRAG = false
    if (f['max-tokens'] !== undefined) body.max_tokens = intFlag('max-tokens', f['max-tokens'], { min: 1, max: 10_000_000, fallback: 1 })
    const providerKey = f['provider-key'] ?? (io.env.RECALLGATE_PROVIDER_KEY || undefined) ?? 'bench'
    request = chatRequest({ basePath: `${new URL(url).pathname.replace(/\/+$/, '')}/api/v1`, serviceKey: key, providerKey, body })
    json = f.json
  } catch (err) {
    if (err instanceof UsageError) return reportUsage(io, err, help)
    throw err
  }

  // Pipelining 1: the bench measures request latency, not how deep a server's queue behind one socket can get.
  const pool = new Pool(new URL(url).origin, { connections: o.connections, pipelining: 1, keepAliveTimeout: 60_000 })
  try {
    if (warmupMs > 0) await runLoad(pool, request, { connections: o.connections, durationMs: warmupMs, maxSamples: 0 })
    const r = await runLoad(pool, request, o)
    const seconds = r.elapsedMs / 1000
    if (json) {
      const ttft = r.ttftMs.length > 0 ? summarize(r.ttftMs) : undefined
      io.stdout.write(`${JSON.stringify({ ok: r.ok, failed: r.failed, outcomes: r.outcomes, seconds, rps: r.ok / seconds, latencyMs: summarize(r.latencyMs), ttftMs: ttft })}\n`)
    } else {
      const mode = o.rate === undefined ? `${o.connections} connections` : `${o.rate} req/s open loop, ≤ ${o.connections} connections`
      const title = `recallgate bench: ${mode}, ${seconds.toFixed(1)} s, ${request.stream ? 'stream' : 'non-stream'} → ${url}`
      io.stdout.write(formatReport(r, { title, seconds }))
    }
    if (r.ok === 0 && r.failed > 0) io.stderr.write(`every request failed (${Object.keys(r.outcomes).join(', ')}): is the gateway at ${url} and the key right?\n`)
    return r.failed > 0 ? 1 : 0
  } finally {
    await pool.destroy()
  }
}
