/**
 * The read on a held connection (src/storage/postgres/held-read.ts, through `Pg.readText`), on a real PostgreSQL:
 * what another connection committed before the read began is what it returns, every read after the first runs on
 * the one held connection while the pool keeps the rest, concurrent reads all get their own rows (those that find it
 * busy go through the pool), and a failure (a refused statement, a database that goes away) fails that read only:
 * the next one is served, on a new held connection.
 */
import t from 'tap'
import { DatabaseUnavailableError } from '../src/storage/interface.js'
import { Pg, prepared } from '../src/storage/postgres/pool.js'
import { freshDatabase, POSTGRES_SKIP_REASON, testDatabaseUrl, withoutService } from './helpers/services.js'
import { cuttableRelay } from './helpers/tcp-relay.js'
import { until } from './helpers/until.js'

const baseUrl = testDatabaseUrl()

const READ = prepared('held_test_read', 'SELECT v AS value FROM kv WHERE k = $1')

/** Connections checked out of `pg`'s pool: the held one, when nothing else runs. */
const checkedOut = (pg: Pg): number => pg.pool.totalCount - pg.pool.idleCount

if (baseUrl === undefined) {
  withoutService(t, 'postgres held read', POSTGRES_SKIP_REASON)
} else {
  t.test("sees what another replica committed before it, on one held connection", async (t) => {
    const url = await freshDatabase(t, baseUrl)
    const reader = new Pg({ url, poolSize: 4, statementTimeout: 5_000 })
    t.teardown(() => reader.close())
    const writer = new Pg({ url, poolSize: 2, statementTimeout: 5_000 })
    t.teardown(() => writer.close())
    await writer.query('test', 'CREATE TABLE kv (k text PRIMARY KEY, v text)')
    t.equal(await reader.readText('test', READ, 'a'), undefined, 'no row: undefined (through the pool while the connection is taken)')
    await until(() => checkedOut(reader) === 1, 'the held connection')
    for (let i = 0; i < 20; i++) {
      await writer.query('test', 'INSERT INTO kv VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v', ['a', `v${i}`])
      t.equal(await reader.readText('test', READ, 'a'), `v${i}`, `write ${i} seen by the next read`)
    }
    await writer.query('test', 'INSERT INTO kv VALUES ($1, NULL)', ['null'])
    t.equal(await reader.readText('test', READ, 'null'), null, 'SQL NULL: null, not "no row"')
    t.equal(await reader.readText('test', READ, 'ünïcode ✓'), undefined, 'a parameter in UTF-8')
    t.equal(checkedOut(reader), 1, 'still the one held connection')
    // The pool's own named statement and the held one's live side by side on a connection.
    t.same(await reader.query('test', READ, ['a']), [{ value: 'v19' }], 'the same statement through the pool')
  })

  t.test('concurrent reads each get their own row; the busy connection sends the rest to the pool', async (t) => {
    const url = await freshDatabase(t, baseUrl)
    const pg = new Pg({ url, poolSize: 4, statementTimeout: 5_000 })
    t.teardown(() => pg.close())
    await pg.query('test', 'CREATE TABLE kv (k text PRIMARY KEY, v text)')
    await pg.query('test', "INSERT INTO kv SELECT 'k' || i, 'v' || i FROM generate_series(0, 49) i")
    await pg.readText('test', READ, 'k0')
    await until(() => checkedOut(pg) === 1, 'the held connection')
    const got = await Promise.all(Array.from({ length: 50 }, (_, i) => pg.readText('test', READ, `k${i}`)))
    t.same(got, Array.from({ length: 50 }, (_, i) => `v${i}`))
    t.ok(pg.pool.totalCount <= 4, 'within the pool size')
  })

  t.test('a pool of one holds nothing: reads and transactions share the connection', async (t) => {
    const url = await freshDatabase(t, baseUrl)
    const pg = new Pg({ url, poolSize: 1, statementTimeout: 5_000 })
    t.teardown(() => pg.close())
    await pg.query('test', 'CREATE TABLE kv (k text PRIMARY KEY, v text)')
    for (let i = 0; i < 3; i++) {
      await pg.transaction('test', (c) => c.query('INSERT INTO kv VALUES ($1, $2)', [`k${i}`, `v${i}`]))
      t.equal(await pg.readText('test', READ, `k${i}`), `v${i}`)
    }
    t.equal(checkedOut(pg), 0, 'nothing held')
  })

  t.test('a refused statement fails that read only; the next is served', async (t) => {
    const url = await freshDatabase(t, baseUrl)
    const pg = new Pg({ url, poolSize: 3, statementTimeout: 300 })
    t.teardown(() => pg.close())
    const slow = prepared('held_test_sleep', 'SELECT pg_sleep($1::float8)::text AS value')
    const bad = prepared('held_test_int', 'SELECT ($1::int + 1)::text AS value')
    await pg.readText('test', bad, '1')
    await until(() => checkedOut(pg) === 1, 'the held connection')
    await t.rejects(pg.readText('test', slow, '5'), DatabaseUnavailableError, "the server's statement timeout: 503's error")
    await pg.readText('test', bad, '1')
    await until(() => checkedOut(pg) === 1, 'a connection held again')
    await t.rejects(pg.readText('test', bad, 'x'), { code: '22P02' }, "bad input: PostgreSQL's own error")
    for (let i = 0; i < 3; i++) t.equal(await pg.readText('test', bad, String(i)), String(i + 1), `then served (${i})`)
    await until(() => checkedOut(pg) === 1, 'a connection held again')
    t.equal(await pg.readText('test', bad, '41'), '42', 'on it')
  })

  t.test('a database that goes away fails the read in flight, and is read again once back', async (t) => {
    const relay = await cuttableRelay(new URL(await freshDatabase(t, baseUrl)))
    t.teardown(() => relay.close())
    const pg = new Pg({ url: relay.url, poolSize: 2, statementTimeout: 2_000 })
    t.teardown(() => pg.close())
    const slow = prepared('held_test_sleep', 'SELECT pg_sleep($1::float8)::text AS value')
    await pg.readText('test', slow, '0')
    await until(() => checkedOut(pg) === 1, 'the held connection')
    const inFlight = pg.readText('test', slow, '1')
    await relay.cut()
    await t.rejects(inFlight, DatabaseUnavailableError)
    await t.rejects(pg.readText('test', slow, '0'), DatabaseUnavailableError, 'while it is away')
    await relay.restore()
    t.equal(await pg.readText('test', slow, '0'), '', 'served again, no restart')
    await until(() => checkedOut(pg) === 1, 'a connection held again')
    t.equal(await pg.readText('test', slow, '0'), '', 'on the new held connection')
  })
}
