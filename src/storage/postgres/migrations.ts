/**
 * The PostgreSQL schema as an ordered list of versioned steps, applied by `migrate` under a session-level advisory
 * lock (replicas starting together queue on it; the first applies, the others find nothing left to do), each step in
 * its own transaction together with its `schema_migrations` row: a step is applied whole or not at all.
 *
 * Never edit a released step: add the next one. Tables mirror the LMDB layout (docs/architecture.md), every
 * tenant-owned row keyed by tenant first; epoch milliseconds are `bigint`. Session ids are `COLLATE "C"` (code point
 * order, as LMDB's keys order them) so that paging a tenant's sessions by id walks the primary key in the same order
 * on both engines, whatever the database's default collation.
 */
import type pg from 'pg'
import { APPEND_EXCHANGE_SQL, WRITE_META_SQL } from './append-exchange-sql.js'

export interface Migration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'core tables: keys, sessions, messages, responses, conversations, knowledge base',
    sql: `
      CREATE TABLE keys (
        hash       text PRIMARY KEY,
        id         text NOT NULL UNIQUE,
        plan       text NOT NULL,
        label      text,
        created_at bigint NOT NULL,
        revoked_at bigint
      );
      CREATE TABLE sessions (
        tenant     text NOT NULL,
        session_id text COLLATE "C" NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        next_seq   bigint NOT NULL,
        count      integer NOT NULL,
        PRIMARY KEY (tenant, session_id)
      );
      CREATE TABLE messages (
        tenant     text NOT NULL,
        session_id text COLLATE "C" NOT NULL,
        seq        bigint NOT NULL,
        message    jsonb NOT NULL,
        tokens     integer NOT NULL,
        created_at bigint NOT NULL,
        PRIMARY KEY (tenant, session_id, seq),
        FOREIGN KEY (tenant, session_id) REFERENCES sessions ON DELETE CASCADE
      );
      CREATE TABLE responses (
        tenant               text NOT NULL,
        id                   text NOT NULL,
        created_at           bigint NOT NULL,
        completed_at         bigint,
        model                text NOT NULL,
        status               text NOT NULL,
        previous_response_id text,
        conversation_id      text,
        input                jsonb NOT NULL,
        output               jsonb NOT NULL,
        messages             jsonb NOT NULL,
        usage                jsonb,
        error                jsonb,
        incomplete_details   jsonb,
        echo                 jsonb NOT NULL,
        PRIMARY KEY (tenant, id)
      );
      CREATE TABLE response_items (
        tenant      text NOT NULL,
        item_id     text NOT NULL,
        response_id text NOT NULL,
        PRIMARY KEY (tenant, item_id)
      );
      CREATE TABLE conversations (
        tenant     text NOT NULL,
        id         text NOT NULL,
        created_at bigint NOT NULL,
        metadata   jsonb NOT NULL,
        PRIMARY KEY (tenant, id)
      );
      CREATE TABLE files (
        tenant     text NOT NULL,
        file_id    text NOT NULL,
        record     jsonb NOT NULL,
        created_at bigint NOT NULL,
        PRIMARY KEY (tenant, file_id)
      );
      CREATE TABLE chunks (
        tenant      text NOT NULL,
        file_id     text NOT NULL,
        chunk_index integer NOT NULL,
        record      jsonb NOT NULL,
        PRIMARY KEY (tenant, file_id, chunk_index),
        FOREIGN KEY (tenant, file_id) REFERENCES files ON DELETE CASCADE
      );
      CREATE TABLE vectors (
        namespace text NOT NULL,
        label     integer NOT NULL,
        vector    bytea NOT NULL,
        PRIMARY KEY (namespace, label)
      );
      CREATE TABLE index_meta (
        namespace text PRIMARY KEY,
        meta      jsonb NOT NULL
      );
      CREATE TABLE index_log (
        namespace text NOT NULL,
        version   bigint NOT NULL,
        change    jsonb NOT NULL,
        PRIMARY KEY (namespace, version)
      );
    `,
  },
  {
    version: 2,
    name: "response_items by response: deleting a response finds its items without a scan of the tenant's",
    sql: `CREATE INDEX response_items_by_response ON response_items (tenant, response_id);`,
  },
  {
    version: 3,
    name: 'usage: requests and tokens per tenant, UTC day and model',
    sql: `
      CREATE TABLE usage (
        tenant        text NOT NULL,
        day           text COLLATE "C" NOT NULL,
        model         text COLLATE "C" NOT NULL,
        requests      bigint NOT NULL,
        input_tokens  bigint NOT NULL,
        output_tokens bigint NOT NULL,
        cached_tokens bigint NOT NULL,
        PRIMARY KEY (tenant, day, model)
      );`,
  },
  {
    version: 4,
    name: "request traces per tenant; long-term recall's turns and owners (the knowledge base uses version 1's tables)",
    sql: `
      CREATE TABLE traces (
        tenant     text NOT NULL,
        created_at bigint NOT NULL,
        id         text NOT NULL,
        session_id text,
        trace      text NOT NULL,
        PRIMARY KEY (tenant, created_at, id)
      );
      CREATE INDEX traces_by_session ON traces (tenant, session_id);
      CREATE TABLE recall_owners (
        namespace  text PRIMARY KEY,
        tenant     text NOT NULL,
        session_id text COLLATE "C" NOT NULL
      );
      CREATE TABLE recall_docs (
        namespace text NOT NULL,
        seq       bigint NOT NULL,
        label     integer NOT NULL,
        line      integer NOT NULL,
        PRIMARY KEY (namespace, seq)
      );`,
  },
  {
    version: 5,
    name: 'keys.tenant: tenants get their own id, kept when a key is rotated or re-planned; sessions listed newest first',
    // Filled in place with the tenant each key had until now (auth/service-keys.ts tenantIdFor: 't_' and the hash's
    // first 24 hex digits), so every existing key keeps its data. Nullable: a replica of the previous version, still
    // running during a rolling upgrade, inserts keys without it; key-store.ts reads a null the same way.
    sql: `
      ALTER TABLE keys ADD COLUMN tenant text;
      UPDATE keys SET tenant = 't_' || substr(hash, 1, 24) WHERE tenant IS NULL;
      CREATE INDEX sessions_by_created ON sessions (tenant, created_at DESC, session_id DESC);`,
  },
  {
    version: 6,
    name: 'recallgate_append_exchange: a saved exchange, long-term recall included, in one statement',
    // Adds functions only, no table changes: a replica of the previous version keeps saving with its own statements
    // (under the same locks, so both kinds of save queue on one another) until it is upgraded.
    sql: APPEND_EXCHANGE_SQL,
  },
  {
    version: 7,
    name: 'the meta functions of a save: PL/pgSQL, and the change log entry leaving the kept window deleted by its key',
    // The same function signatures, re-created: every caller (a replica of version 6 included) uses them at once.
    sql: WRITE_META_SQL,
  },
  {
    version: 8,
    name: "response_deletions: how many of a tenant's stored responses were ever deleted (a cached chain's one-read check)",
    // Counted by a trigger, not by the delete's statements: a replica of the previous version, still running during a
    // rolling upgrade, deletes with its own statements, and its deletes must count too.
    sql: `
      CREATE TABLE response_deletions (
        tenant text PRIMARY KEY,
        n      bigint NOT NULL
      );
      CREATE FUNCTION recallgate_count_response_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO response_deletions AS d (tenant, n) VALUES (OLD.tenant, 1)
          ON CONFLICT (tenant) DO UPDATE SET n = d.n + 1;
        RETURN NULL;
      END $$;
      CREATE TRIGGER responses_deleted AFTER DELETE ON responses
        FOR EACH ROW EXECUTE FUNCTION recallgate_count_response_deletion();`,
  },
]

export const SCHEMA_VERSION = MIGRATIONS.at(-1)?.version ?? 0

/** pg_advisory_lock key: any fixed bigint, the same in every replica ('recallgate' in ASCII, truncated). */
const LOCK_KEY = '7233174016229061735'

export interface MigrateResult {
  /** Versions applied by this call, ascending. */
  applied: number[]
  /** The schema version afterwards. */
  version: number
}

/**
 * Bring the database to `target` (default: the newest step). Safe to run from several processes at once. Refuses a
 * database whose schema is newer than this build knows (an older replica during a rolling upgrade must not guess).
 */
export async function migrate(pool: pg.Pool, opts: { target?: number; log?: (line: string) => void } = {}): Promise<MigrateResult> {
  const target = opts.target ?? SCHEMA_VERSION
  const client = await pool.connect()
  let broken: Error | undefined
  try {
    // Migrations (and the wait for the lock behind another replica's) may outlast the request statement timeout.
    await client.query('SET statement_timeout = 0')
    await client.query('SELECT pg_advisory_lock($1)', [LOCK_KEY])
    try {
      const exists = await client.query<{ t: string | null }>(`SELECT to_regclass('schema_migrations')::text AS t`)
      if (exists.rows[0]?.t == null)
        await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())')
      const done = new Set((await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version))
      const newest = Math.max(0, ...done)
      if (newest > SCHEMA_VERSION)
        throw new Error(`the database's schema is version ${newest}; this build knows up to ${SCHEMA_VERSION}: upgrade recallgate`)
      const applied: number[] = []
      for (const m of MIGRATIONS) {
        if (m.version > target || done.has(m.version)) continue
        await client.query('BEGIN')
        try {
          await client.query(m.sql)
          await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name])
          await client.query('COMMIT')
        } catch (err) {
          await client.query('ROLLBACK')
          throw new Error(`migration ${m.version} (${m.name}) failed: ${(err as Error).message}`, { cause: err })
        }
        applied.push(m.version)
        opts.log?.(`applied migration ${m.version}: ${m.name}`)
      }
      return { applied, version: Math.max(newest, ...applied) }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY])
    }
  } catch (err) {
    // Whatever failed, the session may hold the lock or a broken transaction: do not return it to the pool.
    broken = err as Error
    throw err
  } finally {
    client.release(broken)
  }
}
