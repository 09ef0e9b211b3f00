/**
 * The PostgreSQL schema migrations (src/storage/postgres/migrations.ts) and `recallgate migrate`, on a real
 * PostgreSQL: from an empty database, from the previous version with data in it, and with replicas migrating at once.
 */
import t, { type Test } from 'tap'
import { main } from '../src/cli/main.js'
import { MIGRATIONS, SCHEMA_VERSION, migrate } from '../src/storage/postgres/migrations.js'
import { Pg } from '../src/storage/postgres/pool.js'
import { capturedIo } from './helpers/captured-io.js'
import { freshDatabase, POSTGRES_SKIP_REASON, testDatabaseUrl } from './helpers/services.js'

const baseUrl = testDatabaseUrl()

async function open(t: Test, url: string): Promise<Pg> {
  const pg = new Pg({ url, poolSize: 4, statementTimeout: 10_000 })
  t.teardown(() => pg.close())
  return pg
}

const tables = async (pg: Pg): Promise<string[]> =>
  (await pg.query<{ name: string }>('q', `SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)).map((r) => r.name)
const versions = async (pg: Pg): Promise<number[]> =>
  (await pg.query<{ version: number }>('q', 'SELECT version FROM schema_migrations ORDER BY version')).map((r) => r.version)

if (baseUrl === undefined) {
  t.test('postgres migrations', { skip: POSTGRES_SKIP_REASON }, async () => {})
} else {
  t.test('from an empty database: every step applied once, every table there; a second run changes nothing', async (t) => {
    const pg = await open(t, await freshDatabase(t, baseUrl))
    const first = await migrate(pg.pool)
    t.same(first.applied, MIGRATIONS.map((m) => m.version))
    t.equal(first.version, SCHEMA_VERSION)
    t.same(await tables(pg), [
      'chunks', 'conversations', 'files', 'index_log', 'index_meta', 'keys', 'messages', 'response_items', 'responses',
      'schema_migrations', 'sessions', 'vectors',
    ])
    const again = await migrate(pg.pool)
    t.same(again.applied, [], 'nothing left to apply')
    t.same(await versions(pg), MIGRATIONS.map((m) => m.version))
  })

  t.test('from the previous version: the newest step applies over existing rows, which are kept', async (t) => {
    const pg = await open(t, await freshDatabase(t, baseUrl))
    const previous = SCHEMA_VERSION - 1
    t.same((await migrate(pg.pool, { target: previous })).version, previous)
    await pg.query('seed', `INSERT INTO response_items (tenant, item_id, response_id) VALUES ('t', 'msg_1', 'resp_1')`)
    await pg.query('seed', `INSERT INTO sessions VALUES ('t', 's', 1, 1, 0, 0)`)
    const up = await migrate(pg.pool)
    t.same(up.applied, [SCHEMA_VERSION])
    t.same(await versions(pg), MIGRATIONS.map((m) => m.version))
    t.same(await pg.query('q', 'SELECT response_id FROM response_items'), [{ response_id: 'resp_1' }], 'rows kept')
    const idx = await pg.query('q', `SELECT indexname FROM pg_indexes WHERE indexname = 'response_items_by_response'`)
    t.equal(idx.length, 1, "version 2's index exists")
  })

  t.test('replicas migrating at once: the advisory lock lets one apply, the others find it done', async (t) => {
    const url = await freshDatabase(t, baseUrl)
    const pools = await Promise.all([open(t, url), open(t, url), open(t, url)])
    const results = await Promise.all(pools.map((p) => migrate(p.pool)))
    const applied = results.flatMap((r) => r.applied).sort((a, b) => a - b)
    t.same(applied, MIGRATIONS.map((m) => m.version), 'each step applied exactly once across the three')
    t.ok(results.every((r) => r.version === SCHEMA_VERSION))
  })

  t.test('a database newer than this build is refused, not guessed at', async (t) => {
    const pg = await open(t, await freshDatabase(t, baseUrl))
    await migrate(pg.pool)
    await pg.query('q', `INSERT INTO schema_migrations (version, name) VALUES (${SCHEMA_VERSION + 1}, 'from the future')`)
    await t.rejects(migrate(pg.pool), /schema is version \d+; this build knows up to/)
  })

  t.test('recallgate migrate applies the schema, then says it is up to date', async (t) => {
    const url = await freshDatabase(t, baseUrl)
    const io = capturedIo({ DATABASE_URL: url })
    t.equal(await main(['migrate'], io), 0, io.err())
    t.match(io.out(), /applied migration 1: core tables/)
    t.match(io.out(), new RegExp(`schema is at version ${SCHEMA_VERSION}`))
    const io2 = capturedIo({ DATABASE_URL: url })
    t.equal(await main(['migrate'], io2), 0)
    t.match(io2.out(), /schema is up to date/)
  })
}

t.test('recallgate migrate without DATABASE_URL says what it needs', async (t) => {
  const io = capturedIo({})
  t.equal(await main(['migrate'], io), 2)
  t.match(io.err(), /migrate needs DATABASE_URL/)
})
