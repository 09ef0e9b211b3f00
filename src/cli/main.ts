/**
 * The `recallgate` command's dispatcher and the `keys` command. Each other subcommand lives in its own module.
 */
import { readFileSync } from 'node:fs'
import { parseArgs, reportUsage, UsageError, type CommandIo } from './args.js'

const HELP = `Usage: recallgate <command> [options]

Commands:
  serve [--workers N]           run the gateway (what \`npm start\` runs); configured by environment variables
  keys create [--plan PLAN]     create a service key for a new tenant (printed once; only its hash is stored)
  keys list [--json]            list keys (id, plan, created, revoked, tenant)
  keys rotate <key-id>          a new key for the same tenant (printed once); the old one is revoked
  keys set-plan <key-id> PLAN   move a key's tenant to another plan
  keys revoke <key-id>          revoke a key by its id (key_…)
  ingest <path…>                upload files or folders to a running gateway's knowledge base
  sessions export <id>          write a session as JSON
  migrate [--from-lmdb DIR]     apply the PostgreSQL schema migrations (DATABASE_URL); copy an LMDB DATA_DIR in
  mock-upstream                 run the mock OpenRouter provider (for demos and load tests)
  bench                         drive load against a running gateway (req/s, latency, time to first token)

Run \`recallgate <command> --help\` for a command's options; \`recallgate --version\` prints the version.
`

const SESSIONS_HELP = `Usage: recallgate sessions export <id> [--url URL] [--key KEY] [--out FILE]

Commands:
  export <id>   write one session of the key's tenant as JSON (see \`recallgate sessions export --help\`)
`

const SERVE_HELP = `Usage: recallgate serve [--workers N]

Runs the gateway, configured by environment variables (README: Configuration).
  --workers N   run N processes sharing the port (node:cluster; same as WORKERS=N). More than 1 needs REDIS_URL
                so that rate limits are shared; see docs/scaling.md.
`

export async function main(argv: string[], io: CommandIo): Promise<number> {
  const [command, ...rest] = argv
  try {
    switch (command) {
      case 'serve': {
        let args
        try {
          args = parseArgs(rest, { workers: { type: 'string' } })
          if (args.positionals.length > 0) throw new UsageError(`serve takes no arguments, got "${args.positionals[0]}"`)
        } catch (err) {
          if (err instanceof UsageError) return reportUsage(io, servePortHint(rest) ?? err, SERVE_HELP)
          throw err
        }
        if (args.help) {
          io.stdout.write(SERVE_HELP)
          return 0
        }
        const { startFromEnv } = await import('../main.js')
        await startFromEnv(args.flags.workers !== undefined ? { WORKERS: args.flags.workers } : {})
        return -1 // keeps running
      }
      case 'keys':
        return await (await import('./keys.js')).run(rest, io)
      case 'ingest':
        return await (await import('./ingest.js')).run(rest, io)
      case 'sessions': {
        if (rest[0] === 'export') return await (await import('./sessions-export.js')).run(rest.slice(1), io)
        if (rest[0] === '--help' || rest[0] === '-h') {
          io.stdout.write(SESSIONS_HELP)
          return 0
        }
        return reportUsage(io, new UsageError(rest[0] === undefined ? 'sessions needs a subcommand' : `unknown sessions subcommand "${rest[0]}"`), SESSIONS_HELP)
      }
      case 'migrate':
        return await (await import('./migrate.js')).run(rest, io)
      case 'bench':
        return await (await import('./bench.js')).run(rest, io)
      case 'mock-upstream':
        return await (await import('./mock-upstream.js')).run(rest, io)
      case '--version':
      case '-v':
      case 'version':
        io.stdout.write(`recallgate ${packageVersion()}\n`)
        return 0
      case undefined:
      case '--help':
      case '-h':
      case 'help':
        io.stdout.write(HELP)
        return command === undefined ? 2 : 0
      default:
        throw new UsageError(`unknown command "${command}"`)
    }
  } catch (err) {
    if (err instanceof UsageError) return reportUsage(io, err, HELP)
    io.stderr.write(`recallgate: ${(err as Error).message}\n`)
    return 1
  }
}


/**
 * `serve --port 18081` (or `-p`, `--host`) is the usual first guess: one sentence saying where the listen address is
 * set, instead of util.parseArgs's advice about positionals that start with a dash.
 */
function servePortHint(argv: readonly string[]): UsageError | undefined {
  for (let i = 0; i < argv.length; i++) {
    const m = /^(--port|-p|--host)(?:=(.*))?$/.exec(argv[i] ?? '')
    if (m === null) continue
    const variable = m[1] === '--host' ? 'HOST' : 'PORT'
    const value = m[2] ?? argv[i + 1] ?? (variable === 'PORT' ? '8080' : '0.0.0.0')
    return new UsageError(`serve has no ${m[1]} option: the gateway is configured by environment variables, e.g. ${variable}=${value} recallgate serve`)
  }
  return undefined
}

/** The package's version, from the package.json above this file (two folders up from src/cli/, three from dist/src/cli/). */
function packageVersion(): string {
  for (let dir = new URL('./', import.meta.url); dir.pathname !== '/'; dir = new URL('../', dir)) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name?: unknown; version?: unknown }
      if (pkg.name === 'recallgate' && typeof pkg.version === 'string') return pkg.version
    } catch {
      // No package.json at this level (or not ours): keep walking up.
    }
  }
  return 'unknown'
}
