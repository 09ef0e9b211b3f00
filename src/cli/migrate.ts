/**
 * `recallgate migrate`: bring the PostgreSQL schema (DATABASE_URL) to this build's version, for operators who run
 * migrations as their own step before rolling out replicas (a gateway also runs them at start, under the same
 * advisory lock, so running both is harmless).
 */
import { parseArgs, reportUsage, UsageError, type CommandIo } from './args.js'

const HELP = `Usage: recallgate migrate

Applies the PostgreSQL schema migrations this build has and the database lacks (DATABASE_URL), one transaction
each, under an advisory lock (safe while replicas start). Prints each applied step and the resulting version.
`

export async function run(argv: string[], io: CommandIo): Promise<number> {
  let args
  try {
    args = parseArgs(argv, {})
    if (args.positionals.length > 0) throw new UsageError(`migrate takes no arguments, got "${args.positionals[0]}"`)
  } catch (err) {
    if (err instanceof UsageError) return reportUsage(io, err, HELP)
    throw err
  }
  if (args.help) {
    io.stdout.write(HELP)
    return 0
  }
  const { envWithDotenv, loadConfig } = await import('../config.js')
  const config = loadConfig(envWithDotenv(io.env, process.cwd()))
  if (config.databaseUrl === undefined) return reportUsage(io, new UsageError('migrate needs DATABASE_URL (a postgres:// URL)'), HELP)
  const { Pg } = await import('../storage/postgres/pool.js')
  const { migrate } = await import('../storage/postgres/migrations.js')
  const pg = new Pg({ url: config.databaseUrl, poolSize: 1, statementTimeout: config.databaseStatementTimeout })
  try {
    const result = await migrate(pg.pool, { log: (line) => io.stdout.write(`${line}\n`) })
    io.stdout.write(
      result.applied.length === 0 ? `schema is up to date (version ${result.version})\n` : `schema is at version ${result.version}\n`,
    )
    return 0
  } finally {
    await pg.close()
  }
}
