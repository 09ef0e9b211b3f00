/**
 * The store engines a test runs its cases against (the same cases for each, never a second copy): LMDB in a temp dir,
 * and PostgreSQL on a fresh database of the test cluster when there is one (else skipped with the reason, or failed
 * under RECALLGATE_CI_REQUIRE_SERVICES=1). Both are opened through the gateway's own factory (storage/open-stores.ts).
 */
import type { Test } from 'tap'
import { TokenCounter } from '../../src/context/tokenizer.js'
import { openStores, type Stores } from '../../src/storage/open-stores.js'
import { openStore } from '../../src/storage/store.js'
import { freshDatabase, POSTGRES_SKIP_REASON, testDatabaseUrl, withoutService } from './services.js'

export interface OpenedStores extends Stores {
  /** Close and open the same data again (a restart). */
  reopen(): Promise<OpenedStores>
  /** Open the same data a second time beside this one (another process or replica). */
  another(): Promise<Stores>
}

export interface StoreEngine {
  name: string
  /** Undefined when the engine can be tested here; else why not. */
  skip: string | undefined
  open(t: Test, opts?: { maxMessagesPerSession?: number; now?: () => number }): Promise<OpenedStores>
  /** The gateway configuration that selects this engine (a fresh database for PostgreSQL), for end-to-end tests. */
  env(t: Pick<Test, 'teardown'>): Promise<Record<string, string>>
}

const counter = new TokenCounter({ margins: { '*': 0.1 } })
const now = (): number => 1_700_000_000_000

/**
 * An engine whose instances share what a replica shares: LMDB's instances are one environment (processes on one
 * DATA_DIR), PostgreSQL's have a DATA_DIR each and one database (replicas on several hosts).
 */
function engine(name: string, databaseUrl: ((t: Pick<Test, 'teardown'>) => Promise<string>) | undefined, skip: string | undefined): StoreEngine {
  return {
    name,
    skip,
    env: async (t): Promise<Record<string, string>> => {
      const url = await databaseUrl?.(t)
      return url === undefined ? {} : { DATABASE_URL: url }
    },
    async open(t, opts = {}) {
      const shared = t.testdir()
      const url = await databaseUrl?.(t)
      let n = 0
      const dirOf = (): string => (url === undefined ? shared : `${shared}/replica-${n++}`)
      const make = async (dir: string): Promise<Stores> => {
        const lmdb = openStore({ dir })
        const stores = await openStores({
          databaseUrl: url,
          databasePoolSize: 4,
          databaseStatementTimeout: 10_000,
          lmdb,
          maxMessagesPerSession: opts.maxMessagesPerSession ?? 1000,
          now: opts.now ?? now,
          counter,
        })
        let closed = false
        const close = async (): Promise<void> => {
          if (closed) return
          closed = true
          await stores.close()
          await lmdb.close()
        }
        t.teardown(close)
        return { ...stores, close }
      }
      const wrap = (s: Stores, dir: string): OpenedStores => ({
        ...s,
        reopen: async () => {
          await s.close()
          return wrap(await make(dir), dir)
        },
        another: () => make(dirOf()),
      })
      const dir = dirOf()
      return wrap(await make(dir), dir)
    },
  }
}

const baseUrl = testDatabaseUrl()

export const STORE_ENGINES: readonly StoreEngine[] = [
  engine('lmdb', undefined, undefined),
  engine('postgres', baseUrl === undefined ? undefined : (t) => freshDatabase(t, baseUrl), baseUrl === undefined ? POSTGRES_SKIP_REASON : undefined),
]

/** Each engine that can run here, after a skipped (or, in CI, failed) test for each that cannot. */
export function testableEngines(t: Pick<Test, 'test'>, what: string): StoreEngine[] {
  const out: StoreEngine[] = []
  for (const e of STORE_ENGINES) {
    if (e.skip === undefined) out.push(e)
    else withoutService(t, `${e.name}: ${what}`, e.skip)
  }
  return out
}
