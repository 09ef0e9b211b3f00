/**
 * The PostgreSQL schema migrations (src/storage/postgres/migrations.ts) and `recallgate migrate`, on a real
 * PostgreSQL: from an empty database, from the previous version with data in it, and with replicas migrating at once.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { hashKey, tenantIdFor } from '../src/auth/service-keys.js'
import { main } from '../src/cli/main.js'
import { TokenCounter } from '../src/context/tokenizer.js'
import { KnowledgeBase } from '../src/knowledge/knowledge-base.js'
import { SessionRecall } from '../src/recall/session-recall.js'
import { LocalEmbedder } from '../src/retrieval/embedder.js'
import { INDEX_LOG_KEEP, type FileStore, type RecallStore } from '../src/storage/interface.js'
import { openStores } from '../src/storage/open-stores.js'
import { openStore } from '../src/storage/store.js'
import { MIGRATIONS, SCHEMA_VERSION, migrate } from '../src/storage/postgres/migrations.js'
import { Pg } from '../src/storage/postgres/pool.js'
import { PgKeyStore } from '../src/storage/postgres/key-store.js'
import { PgSessionStore } from '../src/storage/postgres/session-store.js'
import { capturedIo } from './helpers/captured-io.js'
import { wholeTrace } from './helpers/traces.js'
import { freshDatabase, POSTGRES_SKIP_REASON, testDatabaseUrl, withoutService } from './helpers/services.js'

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
  withoutService(t, 'postgres migrations', POSTGRES_SKIP_REASON)
} else {
  t.test('from an empty database: every step applied once, every table there; a second run changes nothing', async (t) => {
    const pg = await open(t, await freshDatabase(t, baseUrl))
    const first = await migrate(pg.pool)
    t.same(first.applied, MIGRATIONS.map((m) => m.version))
    t.equal(first.version, SCHEMA_VERSION)
    t.same(await tables(pg), [
      'chunks', 'conversations', 'files', 'index_log', 'index_meta', 'keys', 'messages', 'recall_docs', 'recall_owners',
      'response_deletions', 'response_items', 'responses', 'schema_migrations', 'sessions', 'traces', 'usage', 'vectors',
    ])
    const again = await migrate(pg.pool)
    t.same(again.applied, [], 'nothing left to apply')
    t.same(await versions(pg), MIGRATIONS.map((m) => m.version))
  })

  t.test('from the previous version: the newest step applies over existing rows, which are kept', async (t) => {
    const pg = await open(t, await freshDatabase(t, baseUrl))
    // Version 4 (before keys had tenants, whose rows version 5 fills in), then the previous version, then the newest
    // (versions need not be consecutive: branches take numbers ahead of their merge).
    const [older, previous] = [4, MIGRATIONS.at(-2)?.version ?? 0]
    t.same((await migrate(pg.pool, { target: older })).version, older)
    await pg.query('seed', `INSERT INTO response_items (tenant, item_id, response_id) VALUES ('t', 'msg_1', 'resp_1')`)
    // A key as every version before 5 stored it: its tenant was derived from its hash, and must stay so.
    const oldKey = 'rg_a-key-from-before-tenant-ids'
    await pg.query('seed', 'INSERT INTO keys (hash, id, plan, created_at) VALUES ($1, $2, $3, $4)', [hashKey(oldKey), 'key_old', 'pro', 1])
    t.same(
      (await migrate(pg.pool, { target: previous })).applied,
      MIGRATIONS.map((m) => m.version).filter((v) => v > older && v <= previous),
    )
    // A session saved by a replica of the previous version, with its own statements.
    await pg.query('seed', `INSERT INTO sessions VALUES ('t', 's', 1, 1, 1, 1)`)
    await pg.query('seed', `INSERT INTO messages VALUES ('t', 's', 0, '{"role":"user","content":"before"}', 1, 1)`)
    // A namespace whose change log version 6's function kept (a range delete), past the window.
    const writeMeta = (version: number) =>
      pg.query('seed', `SELECT recallgate_write_meta('recall:n', jsonb_build_object('version', $1::int), '{"add":[]}')`, [version])
    for (let v = 1; v <= INDEX_LOG_KEEP + 20; v++) await writeMeta(v)
    await pg.query('seed', `INSERT INTO responses (tenant, id, created_at, model, status, input, output, messages, echo)
      VALUES ('t', 'resp_old', 1, 'm', 'completed', '[]', '[]', '[]', '{}')`)
    const up = await migrate(pg.pool)
    t.same(up.applied, [SCHEMA_VERSION])
    // Version 8 counts deleted responses by a trigger: a delete with the previous version's own statement counts too.
    await pg.query('q', `DELETE FROM responses WHERE tenant = 't' AND id = 'resp_old'`)
    t.same(await pg.query('q', 'SELECT tenant, n::int FROM response_deletions'), [{ tenant: 't', n: 1 }], "an old replica's delete is counted")
    // Version 7's function continues it: one entry forgotten per write, by its key, the window the same size.
    for (let v = INDEX_LOG_KEEP + 21; v <= INDEX_LOG_KEEP + 30; v++) await writeMeta(v)
    t.same(
      await pg.query('q', `SELECT min(version)::int AS lo, max(version)::int AS hi, count(*)::int AS n FROM index_log WHERE namespace = 'recall:n'`),
      [{ lo: 31, hi: INDEX_LOG_KEEP + 30, n: INDEX_LOG_KEEP }],
      'the newest INDEX_LOG_KEEP versions kept, before and after the upgrade',
    )
    t.same(await versions(pg), MIGRATIONS.map((m) => m.version))
    t.same(await pg.query('q', 'SELECT response_id FROM response_items'), [{ response_id: 'resp_1' }], 'rows kept')
    const idx = await pg.query('q', `SELECT indexname FROM pg_indexes WHERE indexname = 'response_items_by_response'`)
    t.equal(idx.length, 1, "version 2's index exists")
    t.same(await pg.query('q', 'SELECT tenant FROM keys'), [{ tenant: tenantIdFor(hashKey(oldKey)) }], 'an existing key keeps its derived tenant')
    const keys = new PgKeyStore(pg, { now: () => 2 })
    await keys.reload()
    t.same(keys.lookup(hashKey(oldKey)), { id: tenantIdFor(hashKey(oldKey)), plan: 'pro' }, 'and authenticates as that tenant')
    // The save's statement (version 6's, with version 7's meta writer) continues the session saved before.
    const sessions = new PgSessionStore(pg, { maxMessagesPerSession: 10, clock: () => 2, counter: new TokenCounter({ margins: {} }) })
    const saved = await sessions.appendExchange('t', 's', [{ role: 'user', content: 'after' }])
    t.same(saved.map((m) => m.seq), [1])
    t.same((await sessions.history('t', 's')).map((m) => m.message.content), ['before', 'after'])
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

  t.test('recallgate migrate --from-lmdb copies an embedded deployment in, once', async (t) => {
    const counter = new TokenCounter({ margins: { '*': 0.1 } })
    const open = async (dir: string, databaseUrl?: string) => {
      const lmdb = openStore({ dir })
      const stores = await openStores({ databaseUrl, databasePoolSize: 2, databaseStatementTimeout: 10_000, lmdb, maxMessagesPerSession: 1000, now: () => 1_700_000_000_000, counter })
      return { ...stores, close: async () => { await stores.close(); await lmdb.close() } }
    }
    const tmp = (): string => {
      const d = mkdtempSync(join(tmpdir(), 'recallgate-from-lmdb-'))
      t.teardown(() => rmSync(d, { recursive: true, force: true }))
      return d
    }
    const dataDir = tmp()
    const embedded = await open(dataDir)
    const { key } = await embedded.keys.create('enterprise', 'moved')
    const embeddedTenant = embedded.keys.lookup(hashKey(key))
    const revoked = await embedded.keys.create('free')
    await embedded.keys.revoke(revoked.record.id)
    await embedded.sessions.appendExchange('t1', 'trip', [{ role: 'user', content: 'Lisbon in May' }, { role: 'assistant', content: 'Noted.' }])
    await embedded.sessions.appendExchange('t1', 'trip', [{ role: 'user', content: 'Leave on the 4th' }, { role: 'assistant', content: 'Noted too.' }])
    await embedded.sessions.appendExchange('t2', 'trip', [{ role: 'user', content: 'other tenant' }])
    await embedded.conversations.ensure('t1', { id: 'conv_1', createdAt: 5, metadata: { topic: 'travel' } })
    await embedded.responses.save('t1', {
      id: 'resp_1', createdAt: 1, completedAt: 2, model: 'openai/gpt-4o', status: 'completed', previousResponseId: null, conversationId: null,
      input: [{ type: 'message', id: 'msg_in', role: 'user', content: 'hi' }], output: [{ type: 'message', id: 'msg_out', role: 'assistant', content: 'hello' }],
      messages: [{ message: { role: 'user', content: 'hi' }, tokens: 1 }], usage: null, error: null, incompleteDetails: null, echo: { instructions: null },
    })
    await embedded.usage.add([{ tenant: 't1', date: '2026-11-25', model: 'openai/gpt-4o', requests: 2, inputTokens: 30, outputTokens: 7, cachedTokens: 4 }])
    const recallOf = (records: RecallStore, dir: string) =>
      new SessionRecall({ records, embedder: new LocalEmbedder(), counter, dataDir: dir, maxTokens: 4000, maxMessagesPerSession: 1000 })
    const embeddedRecall = recallOf(embedded.recall, dataDir)
    await embedded.sessions.appendExchange('t1', 'cat', [{ role: 'user', content: 'My cat Bartholomew only eats sardines.' }, { role: 'assistant', content: 'Noted.' }])
    await embeddedRecall.close()
    const trace = wholeTrace({ id: 'req_1', createdAt: 9, sessionId: 'trip' })
    await embedded.traces.append([{ tenant: 't1', trace }], 10)
    const kb = (files: FileStore, dir: string) =>
      new KnowledgeBase({ files, dataDir: dir, embedder: new LocalEmbedder(), chunkTokens: 64, chunkOverlap: 8, maxChunksPerFile: 100, clock: () => 1_700_000_000_000, prepareInWorker: false })
    const upload = (filename: string, text: string) => ({ filename, contentType: 'text/plain', bytes: Buffer.from(text), metadata: { from: 'lmdb' } })
    const embeddedKb = kb(embedded.files, dataDir)
    const lighthouse = await embeddedKb.ingest('t1', upload('keepers.txt', 'The lighthouse keeper of Skerryvore is called Morwenna.'))
    const tides = await embeddedKb.ingest('t2', upload('tides.txt', 'Spring tides reach five metres.'))
    await embeddedKb.close()
    await embedded.close()

    const url = await freshDatabase(t, baseUrl)
    const io = capturedIo({ DATABASE_URL: url, DATA_DIR: tmp() })
    t.equal(await main(['migrate', '--from-lmdb', dataDir], io), 0, io.err())
    t.match(io.err(), /using the PostgreSQL database postgres:\/\/[^ ]*rg_test_[^ ]* \(DATABASE_URL\)/, 'it says which database')
    t.match(io.err(), `copying from the LMDB DATA_DIR ${dataDir}`, 'and which DATA_DIR')
    t.match(io.out(), /copied from .*: 2 keys, 3 sessions, 7 messages, 1 responses, 1 conversations, 1 usage rows, 1 request traces, 2 files, 2 chunks, 2 recall turns/)

    const pg = await open(tmp(), url)
    t.teardown(() => pg.close())
    t.same((await pg.sessions.history('t1', 'trip')).map((m) => `${m.seq}:${m.text}`), ['0:Lisbon in May', '1:Noted.', '2:Leave on the 4th', '3:Noted too.'])
    t.same((await pg.sessions.history('t2', 'trip')).map((m) => m.text), ['other tenant'], 'tenants stay apart')
    t.same(pg.keys.lookup(hashKey(key)), embeddedTenant, 'the key authenticates, same tenant and plan')
    t.equal(pg.keys.lookup(hashKey(revoked.key)) ?? (await pg.keys.lookupMiss?.(hashKey(revoked.key))), 'revoked', 'a revoked key stays revoked')
    t.equal((await pg.responses.findItem('t1', 'msg_out'))?.content, 'hello')
    t.same((await pg.conversations.get('t1', 'conv_1'))?.metadata, { topic: 'travel' })
    t.same(await pg.usage.list('t1', {}), [{ date: '2026-11-25', model: 'openai/gpt-4o', requests: 2, inputTokens: 30, outputTokens: 7, cachedTokens: 4 }], 'usage comes along')
    const next = await pg.sessions.appendExchange('t1', 'trip', [{ role: 'user', content: 'and back?' }])
    t.same(next.map((m) => m.seq), [4], 'the session goes on where it left off')
    t.equal((await pg.traces.get('t1', 'req_1'))?.sessionId, 'trip', 'request traces come along')
    const replicaRecall = recallOf(pg.recall, tmp())
    t.teardown(() => replicaRecall.close())
    const recalled = await replicaRecall.search('t1', 'cat', 'what does Bartholomew eat', 2000)
    t.match([...(recalled?.turns.values() ?? [])].map((x) => x.content).join('\n'), /sardines/, 'turns saved before the move are recalled')
    const replicaKb = kb(pg.files, tmp())
    t.teardown(() => replicaKb.close())
    t.same((await replicaKb.search('t1', 'lighthouse keeper Morwenna', 1)).map((h) => [h.file_id, h.metadata]), [[lighthouse.id, { from: 'lmdb' }]], 'the files are searched from PostgreSQL')
    t.same((await replicaKb.search('t1', 'lighthouse keeper', 1, 'vector')).map((h) => h.file_id), [lighthouse.id], 'vectors too')
    t.notOk((await replicaKb.search('t1', 'spring tides', 5)).some((h) => h.file_id === tides.id), 'tenants stay apart')
    t.same((await replicaKb.search('t2', 'spring tides', 1)).map((h) => h.file_id), [tides.id])
    const more = await replicaKb.ingest('t1', upload('more.txt', 'The keeper has a dog named Biscuit.'))
    t.same((await replicaKb.search('t1', 'dog Biscuit', 1)).map((h) => h.file_id), [more.id], 'uploads continue after the copied labels')
    t.same((await replicaKb.search('t1', 'lighthouse keeper Morwenna', 1)).map((h) => h.file_id), [lighthouse.id])

    const twice = capturedIo({ DATABASE_URL: url, DATA_DIR: tmp() })
    t.equal(await main(['migrate', '--from-lmdb', dataDir], twice), 0)
    t.match(twice.out(), /0 keys, 0 sessions, 0 messages, 0 responses, 0 conversations, 0 usage rows, 0 request traces, 0 files, 0 chunks, 0 recall turns/, 'a second run copies nothing twice')
    t.notMatch(twice.err(), /were not copied/, 'and skips no tenant: their files are the copied ones')

    // Another embedded deployment's files for t1, whose knowledge base in PostgreSQL is now another one: left out.
    const otherDir = tmp()
    const otherEmbedded = await open(otherDir)
    const otherKb = kb(otherEmbedded.files, otherDir)
    await otherKb.ingest('t1', upload('clash.txt', 'A file whose labels would collide.'))
    await otherKb.close()
    await otherEmbedded.close()
    const clash = capturedIo({ DATABASE_URL: url, DATA_DIR: tmp() })
    t.equal(await main(['migrate', '--from-lmdb', otherDir], clash), 0, clash.err())
    t.match(clash.out(), /0 files, 0 chunks/)
    t.match(clash.err(), /the files of 1 tenant\(s\) were not copied/)
    const missing = capturedIo({ DATABASE_URL: url, DATA_DIR: tmp() })
    t.equal(await main(['migrate', '--from-lmdb', join(dataDir, 'nope')], missing), 1)
    t.match(missing.err(), /holds no recallgate LMDB data/)
  })
}

t.test('recallgate migrate without DATABASE_URL says what it needs', async (t) => {
  const io = capturedIo({})
  t.equal(await main(['migrate'], io), 2)
  t.match(io.err(), /migrate needs DATABASE_URL/)
})
