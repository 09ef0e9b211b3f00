/**
 * The stores a CLI command opens (the `keys` commands): the gateway's own engine choice (storage/open-stores.ts:
 * DATA_DIR's LMDB, or PostgreSQL with DATABASE_URL), and a line on stderr saying which, so an operator who ran the
 * command from the wrong directory sees it rather than managing the keys of an empty `./data` (issue 27). A DATA_DIR
 * that did not exist is created, as the gateway would, with a warning that names it.
 */
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import type { Config } from '../config.js'
import type { Stores } from '../storage/open-stores.js'
import type { CommandIo } from './args.js'

export async function openCliStores(config: Config, io: CommandIo): Promise<{ stores: Stores; close(): Promise<void> }> {
  const { openStore } = await import('../storage/store.js')
  const { openStores } = await import('../storage/open-stores.js')
  const { TokenCounter } = await import('../context/tokenizer.js')
  const dir = resolve(config.dataDir)
  const existed = existsSync(dir)
  const store = openStore({ dir: config.dataDir })
  let stores: Stores
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
  io.stderr.write(
    config.databaseUrl === undefined
      ? `recallgate: using DATA_DIR ${dir}\n`
      : `recallgate: using the PostgreSQL database ${describeDatabase(config.databaseUrl)} (DATABASE_URL)\n`,
  )
  if (!existed) io.stderr.write(`recallgate: warning: DATA_DIR ${dir} did not exist and was created empty; set DATA_DIR to the gateway's if that is not what you meant\n`)
  return {
    stores,
    close: async () => {
      await stores.close()
      await store.close()
    },
  }
}

/** The database URL without its password: host, port and database are what tell two deployments apart. */
export function describeDatabase(url: string): string {
  const u = new URL(url)
  u.password = ''
  return u.toString()
}
