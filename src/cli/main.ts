/**
 * The `recallgate` command's dispatcher and the `keys` command. Each other subcommand lives in its own module.
 */
import { PLANS, type Plan } from '../types.js'
import { parseArgs, reportUsage, UsageError, type CommandIo } from './args.js'

const HELP = `Usage: recallgate <command> [options]

Commands:
  serve [--workers N]           run the gateway (what \`npm start\` runs); configured by environment variables
  keys create [--plan PLAN]     create a service key (printed once; only its hash is stored)
  keys list                     list keys (id, plan, created, revoked)
  keys revoke <key-id>          revoke a key by its id (key_…)
  ingest <path…>                upload files or folders to a running gateway's knowledge base
  sessions export <id>          write a session as JSON
  migrate [--from-lmdb DIR]     apply the PostgreSQL schema migrations (DATABASE_URL); copy an LMDB DATA_DIR in
  mock-upstream                 run the mock OpenRouter provider (for demos and load tests)
  bench                         drive load against a running gateway (req/s, latency, time to first token)

Run \`recallgate <command> --help\` for a command's options.
`

const SERVE_HELP = `Usage: recallgate serve [--workers N]

Runs the gateway, configured by environment variables (README: Configuration).
  --workers N   run N processes sharing the port (node:cluster; same as WORKERS=N). More than 1 needs REDIS_URL
                so that rate limits are shared; see docs/scaling.md.
`

const KEYS_HELP = `Usage: recallgate keys create [--plan free|pro|premium|enterprise|unlimited] [--label TEXT]
       recallgate keys list
       recallgate keys revoke <key-id>

Manages the service keys stored in DATA_DIR, or in PostgreSQL with DATABASE_URL (only SHA-256 hashes are stored).
Works while the gateway runs: with DATA_DIR the gateway reads keys from the store on every request; with PostgreSQL a
new key works at once on every replica and a revoked one stops within 5 s (each replica's key cache).
`

async function keys(argv: string[], io: CommandIo): Promise<number> {
  // A wrong `keys` call is answered with what is wrong and the keys help, not the general usage.
  try {
    return await keysCommand(argv, io)
  } catch (err) {
    if (err instanceof UsageError) return reportUsage(io, err, KEYS_HELP)
    throw err
  }
}

async function keysCommand(argv: string[], io: CommandIo): Promise<number> {
  const args = parseArgs(argv, { plan: { type: 'string' }, label: { type: 'string' }, json: { type: 'boolean' } })
  if (args.help) {
    io.stdout.write(KEYS_HELP)
    return 0
  }
  const [sub, ...rest] = args.positionals
  const { envWithDotenv, loadConfig } = await import('../config.js')
  const { openStore } = await import('../storage/store.js')
  const { openStores } = await import('../storage/open-stores.js')
  const { TokenCounter } = await import('../context/tokenizer.js')
  const config = loadConfig(envWithDotenv(io.env, process.cwd()))
  const store = openStore({ dir: config.dataDir })
  // The same engine the gateway uses: DATA_DIR's LMDB, or PostgreSQL with DATABASE_URL.
  let stores
  try {
    stores = await openStores({
      databaseUrl: config.databaseUrl,
      databasePoolSize: 1,
      databaseStatementTimeout: config.databaseStatementTimeout,
      lmdb: store,
      maxMessagesPerSession: config.maxSessionMessages,
      now: Date.now,
      counter: new TokenCounter({ margins: config.tokenMargins }),
    })
  } catch (err) {
    await store.close()
    throw err
  }
  const repo = stores.keys
  try {
    switch (sub) {
      case 'create': {
        const plan = args.flags.plan ?? 'pro'
        if (!(PLANS as readonly string[]).includes(plan)) throw new UsageError(`--plan must be one of ${PLANS.join(', ')}`)
        const { key, record } = await repo.create(plan as Plan, args.flags.label)
        io.stdout.write(`${key}\n`)
        io.stderr.write(`created ${record.id} (plan ${record.plan}); the key is shown only this once\n`)
        return 0
      }
      case 'list': {
        const rows = await repo.list()
        if (args.flags.json) {
          io.stdout.write(`${JSON.stringify(rows.map(({ hash: _hash, ...r }) => r), null, 2)}\n`)
          return 0
        }
        for (const r of rows) {
          const state = r.revokedAt === undefined ? 'active' : `revoked ${new Date(r.revokedAt).toISOString()}`
          io.stdout.write(`${r.id}\t${r.plan}\t${new Date(r.createdAt).toISOString()}\t${state}${r.label ? `\t${r.label}` : ''}\n`)
        }
        if (rows.length === 0) io.stderr.write('no stored keys\n')
        return 0
      }
      case 'revoke': {
        const id = rest[0]
        if (id === undefined) throw new UsageError('keys revoke needs a key id (see `recallgate keys list`)')
        if (!(await repo.revoke(id))) {
          io.stderr.write(`no active key with id ${id}\n`)
          return 1
        }
        io.stdout.write(`revoked ${id}\n`)
        return 0
      }
      default:
        throw new UsageError(sub === undefined ? 'keys needs a subcommand' : `unknown keys subcommand "${sub}"`)
    }
  } finally {
    await stores.close()
    await store.close()
  }
}

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
          // `serve --port 9999` is the usual first guess: say where the listen address is set.
          if (err instanceof UsageError)
            return reportUsage(io, new UsageError(`${err.message} (the gateway is configured by environment variables: PORT=9999 recallgate serve)`), SERVE_HELP)
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
        return await keys(rest, io)
      case 'ingest':
        return await (await import('./ingest.js')).run(rest, io)
      case 'sessions': {
        if (rest[0] !== 'export') throw new UsageError('usage: recallgate sessions export <id>')
        return await (await import('./sessions-export.js')).run(rest.slice(1), io)
      }
      case 'migrate':
        return await (await import('./migrate.js')).run(rest, io)
      case 'bench':
        return await (await import('./bench.js')).run(rest, io)
      case 'mock-upstream':
        return await (await import('./mock-upstream.js')).run(rest, io)
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

