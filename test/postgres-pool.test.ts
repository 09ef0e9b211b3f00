/**
 * The PostgreSQL pool (src/storage/postgres/pool.ts) when the database goes away under it, on a real PostgreSQL
 * behind a TCP relay that can be cut: a transaction whose connection drops fails as DatabaseUnavailableError (the
 * 503 path) and the process goes on; once the database is back, the pool serves again without a restart.
 */
import t from 'tap'
import { DatabaseUnavailableError } from '../src/storage/interface.js'
import { Pg, prepared } from '../src/storage/postgres/pool.js'
import { freshDatabase, POSTGRES_SKIP_REASON, testDatabaseUrl, withoutService } from './helpers/services.js'
import { cuttableRelay } from './helpers/tcp-relay.js'

const baseUrl = testDatabaseUrl()

if (baseUrl === undefined) {
  withoutService(t, 'postgres pool', POSTGRES_SKIP_REASON)
} else {
  t.test('a connection that drops inside a transaction fails the transaction, not the process', async (t) => {
    const relay = await cuttableRelay(new URL(await freshDatabase(t, baseUrl)))
    t.teardown(() => relay.close())
    const pg = new Pg({ url: relay.url, poolSize: 2, statementTimeout: 2_000 })
    t.teardown(() => pg.close())
    let entered!: () => void
    const inside = new Promise<void>((resolve) => (entered = resolve))
    let proceed!: () => void
    const go = new Promise<void>((resolve) => (proceed = resolve))
    // Checked out, between two statements: pg-pool listens for a dropped connection only on idle clients, so an
    // unheard 'error' here was an uncaught exception (test/replicas-postgres.e2e.test.ts, with a trace batch's).
    const txn = pg.transaction('test', async (c) => {
      await c.query('SELECT 1')
      entered()
      await go
      await c.query('SELECT 2')
    })
    await inside
    await relay.cut()
    proceed()
    await t.rejects(txn, DatabaseUnavailableError)
    await relay.restore()
    t.same(await pg.query('test', 'SELECT 1 AS one'), [{ one: 1 }], 'served again, no restart')
    const named = prepared('pool_test', 'SELECT $1::int AS n')
    t.same(await pg.query('test', named, [7]), [{ n: 7 }], 'a prepared statement too, on the new connection')
    t.same(await pg.query('test', named, [8]), [{ n: 8 }], 'and again')
  })
}
