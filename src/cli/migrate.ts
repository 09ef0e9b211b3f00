/**
 * `recallgate migrate`: bring the PostgreSQL schema (DATABASE_URL) to this build's version, for operators who run
 * migrations as their own step before rolling out replicas (a gateway also runs them at start, under the same
 * advisory lock, so running both is harmless).
 */
import { parseArgs, reportUsage, UsageError, type CommandIo } from './args.js'

const HELP = `Usage: recallgate migrate [--from-lmdb DIR]

Applies the PostgreSQL schema migrations this build has and the database lacks (DATABASE_URL), one transaction
each, under an advisory lock (safe while replicas start). Prints each applied step and the resulting version.

  --from-lmdb DIR   then copy the keys, sessions, stored responses, conversations, usage, request traces,
                    knowledge base (files, chunks, vectors) and recall index of the LMDB data directory DIR (an
                    embedded deployment's DATA_DIR) into PostgreSQL, in one transaction; rows already there are
                    kept. A tenant whose files PostgreSQL already holds from uploads made there is left out (and
                    counted). Run it with the gateway stopped. Replicas build their indexes from PostgreSQL on
                    first use.
`

export async function run(argv: string[], io: CommandIo): Promise<number> {
  let args
  try {
    args = parseArgs(argv, { 'from-lmdb': { type: 'string' } })
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
  const { describeDatabase } = await import('./cli-stores.js')
  io.stderr.write(`recallgate: using the PostgreSQL database ${describeDatabase(config.databaseUrl)} (DATABASE_URL)\n`)
  try {
    const result = await migrate(pg.pool, { log: (line) => io.stdout.write(`${line}\n`) })
    io.stdout.write(
      result.applied.length === 0 ? `schema is up to date (version ${result.version})\n` : `schema is at version ${result.version}\n`,
    )
    const from = args.flags['from-lmdb']
    if (from !== undefined) {
      const { existsSync } = await import('node:fs')
      const { join, resolve } = await import('node:path')
      // openStore would create an empty environment: a mistyped DIR must say so instead of copying nothing.
      if (!existsSync(join(from, 'recallgate.lmdb'))) {
        io.stderr.write(`recallgate: ${from} holds no recallgate LMDB data (no recallgate.lmdb in it)\n`)
        return 1
      }
      const { openStore } = await import('../storage/store.js')
      const { copyFromLmdb } = await import('../storage/postgres/from-lmdb.js')
      io.stderr.write(`recallgate: copying from the LMDB DATA_DIR ${resolve(from)}\n`)
      const store = openStore({ dir: from })
      try {
        const n = await copyFromLmdb(store, pg)
        io.stdout.write(
          `copied from ${from}: ${n.keys} keys, ${n.sessions} sessions, ${n.messages} messages, ${n.responses} responses, ` +
            `${n.conversations} conversations, ${n.usage} usage rows, ${n.traces} request traces, ${n.files} files, ${n.chunks} chunks, ` +
            `${n.recallTurns} recall turns\n`,
        )
        if (n.skippedTenants > 0)
          io.stderr.write(
            `recallgate: the files of ${n.skippedTenants} tenant(s) were not copied: PostgreSQL already holds files of theirs uploaded there (upload the others again)\n`,
          )
      } finally {
        await store.close()
      }
    }
    return 0
  } finally {
    await pg.close()
  }
}
