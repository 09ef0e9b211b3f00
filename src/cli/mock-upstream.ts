/**
 * `recallgate mock-upstream`: the mock OpenRouter provider as a standalone server, for demos and for load-testing a
 * deployment without spending real tokens. Runs until SIGINT/SIGTERM.
 */
import { startMockUpstream, type MockBehaviour } from '../mock-upstream.js'
import { intFlag, parseArgs, reportUsage, UsageError, type CommandIo } from './args.js'

export const help = `Usage: recallgate mock-upstream [options]

Serves OpenRouter's wire format at http://HOST:PORT/api/v1 (chat completions, streaming, models, embeddings).
Point the gateway at it with UPSTREAM_BASE_URL.

Options:
  --port N              listen port (default 8090; 0 = any free port)
  --host ADDR           listen address (default 127.0.0.1)
  --ttft-ms N           delay before the first byte of each response (default 0)
  --tokens-per-second N pace streamed tokens (default: as fast as possible)
  --chunk-chars N       characters per streamed chunk (default 4)
  --reply-tokens A-B    reply length range in words when no fixed reply (default: echo the last user message)
  --error-rate R        share of requests answered 502, 0..1 (default 0)
  --seed N              seed of the PRNG behind reply lengths and errors (default 1)
  --no-auth             accept requests without an Authorization header
  -h, --help            show this help
`

export async function run(argv: string[], io: CommandIo, until?: Promise<unknown>): Promise<number> {
  let args
  try {
    args = parseArgs(argv, {
      port: { type: 'string' },
      host: { type: 'string' },
      'ttft-ms': { type: 'string' },
      'tokens-per-second': { type: 'string' },
      'chunk-chars': { type: 'string' },
      'reply-tokens': { type: 'string' },
      'error-rate': { type: 'string' },
      seed: { type: 'string' },
      'no-auth': { type: 'boolean' },
    })
    if (args.help) {
      io.stdout.write(help)
      return 0
    }
    const f = args.flags
    const behaviour: MockBehaviour = {
      ttftMs: intFlag('ttft-ms', f['ttft-ms'], { min: 0, max: 600_000, fallback: 0 }),
      chunkChars: intFlag('chunk-chars', f['chunk-chars'], { min: 1, max: 100_000, fallback: 4 }),
    }
    if (f['tokens-per-second'] !== undefined) {
      behaviour.tokensPerSecond = intFlag('tokens-per-second', f['tokens-per-second'], { min: 1, max: 1_000_000, fallback: 0 })
    }
    if (f['reply-tokens'] !== undefined) {
      const m = /^(\d+)-(\d+)$/.exec(f['reply-tokens'])
      if (!m || Number(m[1]) > Number(m[2])) throw new UsageError('--reply-tokens must look like 20-200')
      behaviour.replyTokens = { min: Number(m[1]), max: Number(m[2]) }
    }
    let errorRate = 0
    if (f['error-rate'] !== undefined) {
      errorRate = Number(f['error-rate'])
      if (!Number.isFinite(errorRate) || errorRate < 0 || errorRate > 1) throw new UsageError('--error-rate must be from 0 to 1')
    }
    const mock = await startMockUpstream({
      host: f.host ?? '127.0.0.1',
      port: intFlag('port', f.port, { min: 0, max: 65535, fallback: 8090 }),
      behaviour,
      errorRate,
      seed: intFlag('seed', f.seed, { min: 0, max: 2 ** 31, fallback: 1 }),
      requireAuth: !f['no-auth'],
      maxRecorded: 0,
    })
    io.stdout.write(`mock upstream listening at ${mock.url}\n`)
    await (until ??
      new Promise<void>((resolve) => {
        process.once('SIGINT', resolve)
        process.once('SIGTERM', resolve)
      }))
    await mock.close()
    return 0
  } catch (err) {
    if (err instanceof UsageError) return reportUsage(io, err, help)
    throw err
  }
}
