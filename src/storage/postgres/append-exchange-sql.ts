import { INDEX_LOG_KEEP } from '../interface.js'

/**
 * Migration 6's functions: a saved exchange as one statement, `SELECT recallgate_append_exchange(…)`, so that it costs
 * one round trip instead of sixteen (BEGIN, the session row's insert and lock, the messages' insert and prune, the row's
 * update, the recall namespace's lock and meta, its pruned docs, vectors, meta and log, its owner, new vectors, meta and
 * log, its docs, COMMIT: measured in `npm run bench -- --only stores`, docs/scaling.md). Run in autocommit, the statement
 * is its own transaction, committed when its result comes back.
 *
 * The steps are those of session-store.ts and recall-store.ts before it, in the same order and under the same locks
 * (the session row `FOR UPDATE`, then the recall namespace's advisory lock): PL/pgSQL takes a fresh snapshot for each
 * statement of a volatile function in READ COMMITTED, so every step after the row lock sees what a save committed
 * before it got the lock, as the separate statements of a transaction did. (One data-modifying CTE would not: all its
 * parts share the snapshot taken before the lock, and a prune would miss rows a concurrent save to the session just
 * committed.) The namespace meta moves as index-meta.ts moves it (`metaAfterAdd`, `metaAfterRemove`), and is logged as
 * index-records.ts logs it; the file store still uses those (its uploads are not per exchange).
 *
 * Never edit this text once released: migration 6 applies it as it stands. A change is a new migration with
 * `CREATE OR REPLACE FUNCTION`.
 */
export const APPEND_EXCHANGE_SQL = `
CREATE FUNCTION recallgate_meta_after_add(before jsonb, adding integer, dimension integer, embedder text, epoch text)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
      'embedderId', CASE WHEN coalesce((before->>'count')::int, 0) > 0 THEN before->>'embedderId' ELSE embedder END,
      'dimension', CASE WHEN coalesce((before->>'count')::int, 0) > 0 THEN (before->>'dimension')::int ELSE dimension END,
      'version', coalesce((before->>'version')::int, 0) + 1,
      'count', coalesce((before->>'count')::int, 0) + adding,
      'nextLabel', coalesce((before->>'nextLabel')::int, 0) + adding)
    || CASE WHEN before IS NULL THEN jsonb_build_object('epoch', epoch)
            WHEN before ? 'epoch' THEN jsonb_build_object('epoch', before->'epoch')
            ELSE '{}'::jsonb END
$$;

CREATE FUNCTION recallgate_meta_after_remove(before jsonb, removed integer)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
      'embedderId', coalesce(before->>'embedderId', ''),
      'dimension', coalesce((before->>'dimension')::int, 0),
      'version', coalesce((before->>'version')::int, 0) + 1,
      'count', greatest(0, coalesce((before->>'count')::int, 0) - removed),
      'nextLabel', coalesce((before->>'nextLabel')::int, 0))
    || CASE WHEN before ? 'epoch' THEN jsonb_build_object('epoch', before->'epoch') ELSE '{}'::jsonb END
$$;

-- The new meta and its log entry, and the entries beyond the kept 256 (INDEX_LOG_KEEP) forgotten. PL/pgSQL, not SQL:
-- PostgreSQL 15 plans a non-inlined SQL function's statements again at every call, PL/pgSQL once per connection
-- (measured with track_functions, 400 calls under load: 200 µs a call as SQL, 82 µs as PL/pgSQL; two calls a save).
CREATE FUNCTION recallgate_write_meta(p_ns text, p_meta jsonb, p_entry jsonb)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO index_meta (namespace, meta) VALUES (p_ns, p_meta) ON CONFLICT (namespace) DO UPDATE SET meta = EXCLUDED.meta;
  INSERT INTO index_log (namespace, version, change) VALUES (p_ns, (p_meta->>'version')::int, p_entry);
  DELETE FROM index_log WHERE namespace = p_ns AND version <= (p_meta->>'version')::int - 256;
END
$$;

-- Returns {"limit": n} when a new session would pass max_sessions (n sessions held; nothing written), else
-- {"first", "replaced", "pruned", "dropped", "removed", "added"}: the first new seq, the seqs a rewind removed and
-- those pruned beyond the bound (ascending), and what recall's namespace went through (removed and added as
-- {"fromVersion", "meta", "labels"} / {"fromVersion", "meta", "firstLabel", "count"}).
-- Recall's arguments: ns NULL when recall is off; vectors NULL when nothing was prepared (the embedder failed), else
-- one per message, NULL for a message not indexed (a zero vector), with lines its rendered line's tokens.
CREATE FUNCTION recallgate_append_exchange(
  p_tenant text, p_session text, p_now bigint, p_messages text[], p_tokens integer[],
  p_replace_from bigint, p_max integer, p_max_sessions integer,
  p_ns text, p_embedder text, p_dimension integer, p_epoch text, p_vectors bytea[], p_lines integer[])
RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_next bigint;
  v_count integer;
  v_first bigint;
  v_from bigint;
  v_cut bigint := NULL;
  v_used integer;
  v_replaced bigint[] := '{}';
  v_pruned bigint[] := '{}';
  v_before jsonb;
  v_meta jsonb;
  v_labels integer[];
  v_label integer;
  v_dropped boolean := false;
  v_removed jsonb := NULL;
  v_added jsonb := NULL;
  v_seqs bigint[];
  v_vectors bytea[];
  v_lines integer[];
BEGIN
  -- Only a save that creates a session counts the tenant's, under a per-tenant lock held to the commit: saves racing
  -- (from any replica) to create its last free session queue, and the second sees the first's row.
  IF p_max_sessions IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sessions WHERE tenant = p_tenant AND session_id = p_session) THEN
    PERFORM pg_advisory_xact_lock(hashtextextended('sessions:' || p_tenant, 0));
    IF NOT EXISTS (SELECT 1 FROM sessions WHERE tenant = p_tenant AND session_id = p_session) THEN
      SELECT count(*)::int INTO v_used FROM sessions WHERE tenant = p_tenant;
      IF v_used >= p_max_sessions THEN
        RETURN jsonb_build_object('limit', v_used);
      END IF;
    END IF;
  END IF;
  -- Concurrent saves to the session (from any replica) queue here. A new session's row is made first (saves racing to
  -- make it queue on the insert, then on the row).
  SELECT s.next_seq, s.count INTO v_next, v_count FROM sessions s WHERE s.tenant = p_tenant AND s.session_id = p_session FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO sessions (tenant, session_id, created_at, updated_at, next_seq, count)
      VALUES (p_tenant, p_session, p_now, p_now, 0, 0) ON CONFLICT (tenant, session_id) DO NOTHING;
    SELECT s.next_seq, s.count INTO v_next, v_count FROM sessions s WHERE s.tenant = p_tenant AND s.session_id = p_session FOR UPDATE;
    IF NOT FOUND THEN
      -- Only a delete committed between the two statements gets here: the statement fails, nothing is written.
      RAISE EXCEPTION 'session deleted while an exchange was being saved';
    END IF;
  END IF;
  IF p_replace_from IS NOT NULL THEN
    v_from := greatest(p_replace_from, v_next - v_count);
    IF v_from < v_next THEN
      WITH d AS (DELETE FROM messages m WHERE m.tenant = p_tenant AND m.session_id = p_session AND m.seq >= v_from RETURNING m.seq)
        SELECT coalesce(array_agg(d.seq ORDER BY d.seq), '{}') INTO v_replaced FROM d;
      v_count := v_count - (v_next - v_from);
      v_next := v_from;
    END IF;
  END IF;
  v_first := v_next;
  IF coalesce(cardinality(p_messages), 0) > 0 THEN
    INSERT INTO messages (tenant, session_id, seq, message, tokens, created_at)
      SELECT p_tenant, p_session, v_first + x.n - 1, x.m::jsonb, x.t, p_now
      FROM unnest(p_messages, p_tokens) WITH ORDINALITY AS x(m, t, n);
    v_next := v_next + cardinality(p_messages);
    v_count := v_count + cardinality(p_messages);
  END IF;
  IF v_count > p_max THEN
    v_cut := v_next - p_max;
    WITH d AS (DELETE FROM messages m WHERE m.tenant = p_tenant AND m.session_id = p_session AND m.seq < v_cut RETURNING m.seq)
      SELECT coalesce(array_agg(d.seq ORDER BY d.seq), '{}') INTO v_pruned FROM d;
    v_count := p_max;
  END IF;
  UPDATE sessions s SET updated_at = greatest(s.updated_at, p_now), next_seq = v_next, count = v_count
    WHERE s.tenant = p_tenant AND s.session_id = p_session;

  IF p_ns IS NULL THEN
    RETURN jsonb_build_object('first', v_first, 'replaced', to_jsonb(v_replaced), 'pruned', to_jsonb(v_pruned), 'dropped', false);
  END IF;
  -- Recall: the new messages with a vector that this save did not prune at once (recall-indexable.ts).
  SELECT coalesce(array_agg(v_first + x.i - 1 ORDER BY x.i), '{}'), coalesce(array_agg(x.v ORDER BY x.i), '{}'),
         coalesce(array_agg(x.l ORDER BY x.i), '{}')
    INTO v_seqs, v_vectors, v_lines
    FROM unnest(p_vectors, p_lines) WITH ORDINALITY AS x(v, l, i)
    WHERE x.v IS NOT NULL AND v_first + x.i - 1 >= coalesce(v_cut, 0);
  IF cardinality(v_seqs) > 0 OR cardinality(v_replaced) + cardinality(v_pruned) > 0 THEN
    -- index-records.ts lockNamespace: writers to one namespace queue (NAMESPACE_LOCK_CLASS 23), then its meta.
    PERFORM pg_advisory_xact_lock(23, hashtext(p_ns));
    SELECT im.meta INTO v_before FROM index_meta im WHERE im.namespace = p_ns;
    IF p_vectors IS NOT NULL AND coalesce((v_before->>'count')::int, 0) > 0
       AND (v_before->>'embedderId' <> p_embedder OR (v_before->>'dimension')::int <> p_dimension) THEN
      -- Its vectors came from another embedder: the namespace starts over (index-meta.ts startsOver).
      DELETE FROM vectors WHERE namespace = p_ns;
      DELETE FROM index_log WHERE namespace = p_ns;
      DELETE FROM index_meta WHERE namespace = p_ns;
      DELETE FROM recall_docs WHERE namespace = p_ns;
      DELETE FROM recall_owners WHERE namespace = p_ns;
      v_before := NULL;
      v_dropped := true;
    ELSIF cardinality(v_replaced) + cardinality(v_pruned) > 0 THEN
      WITH g AS (DELETE FROM recall_docs r WHERE r.namespace = p_ns AND r.seq = ANY(v_replaced || v_pruned) RETURNING r.label)
        SELECT coalesce(array_agg(g.label ORDER BY g.label), '{}') INTO v_labels FROM g;
      IF cardinality(v_labels) > 0 THEN
        DELETE FROM vectors WHERE namespace = p_ns AND label = ANY(v_labels);
        v_meta := recallgate_meta_after_remove(v_before, cardinality(v_labels));
        PERFORM recallgate_write_meta(p_ns, v_meta, jsonb_build_object('remove', to_jsonb(v_labels)));
        v_removed := jsonb_build_object('fromVersion', coalesce((v_before->>'version')::int, 0), 'meta', v_meta, 'labels', to_jsonb(v_labels));
        v_before := v_meta;
      END IF;
    END IF;
    IF cardinality(v_seqs) > 0 THEN
      INSERT INTO recall_owners (namespace, tenant, session_id) VALUES (p_ns, p_tenant, p_session) ON CONFLICT DO NOTHING;
      v_label := coalesce((v_before->>'nextLabel')::int, 0);
      INSERT INTO vectors (namespace, label, vector)
        SELECT p_ns, v_label + x.i - 1, x.v FROM unnest(v_vectors) WITH ORDINALITY AS x(v, i);
      v_meta := recallgate_meta_after_add(v_before, cardinality(v_seqs), octet_length(v_vectors[1]) / 4, p_embedder, p_epoch);
      PERFORM recallgate_write_meta(p_ns, v_meta, jsonb_build_object('add',
        (SELECT jsonb_agg(jsonb_build_array(v_label + x.i - 1, jsonb_build_array(x.s)) ORDER BY x.i) FROM unnest(v_seqs) WITH ORDINALITY AS x(s, i))));
      INSERT INTO recall_docs (namespace, seq, label, line)
        SELECT p_ns, x.s, v_label + x.i - 1, x.l FROM unnest(v_seqs, v_lines) WITH ORDINALITY AS x(s, l, i);
      v_added := jsonb_build_object('fromVersion', coalesce((v_before->>'version')::int, 0), 'meta', v_meta,
        'firstLabel', v_label, 'count', cardinality(v_seqs));
    END IF;
  END IF;
  RETURN jsonb_build_object('first', v_first, 'replaced', to_jsonb(v_replaced), 'pruned', to_jsonb(v_pruned),
    'dropped', v_dropped, 'removed', v_removed, 'added', v_added);
END
$$;`

/**
 * Migration 7: the namespace meta functions of a save made cheaper, their signatures and results unchanged, so
 * migration 6's `recallgate_append_exchange`, and a replica of version 6 still running, use them at once.
 *
 * `recallgate_meta_after_add` and `_remove` become PL/pgSQL: as SQL functions they were not inlined into the caller's
 * PL/pgSQL expressions (pg_stat_statements lists their bodies as statements of their own, run once per call), and
 * PostgreSQL 15 planned those bodies again at every call; PL/pgSQL plans them once per connection, as it already did
 * for the meta writer. Measured in a PL/pgSQL loop of 20,000 calls, twice, load 8: 14.1 / 14.8 µs a call as SQL,
 * 8.4 / 9.4 µs as PL/pgSQL (one of each per save with long-term recall on).
 *
 * `recallgate_write_meta` forgets the one log entry that falls out of the kept window, by its key, where
 * migration 6's deleted every entry at or below it: a range that starts at the namespace's first key walks the index
 * entries of every version deleted before and not yet vacuumed, one more per save. Measured with pg_stat_statements
 * over 400 saved exchanges (long-term recall on, two namespace versions a save): that DELETE was 279 µs of the
 * function's 1.7 ms per save, its most expensive statement. Versions grow by exactly one per write under the namespace's
 * lock, so each write leaves exactly one entry behind the window and the point delete keeps it at the same size.
 *
 * The window is INDEX_LOG_KEEP, written into the function when the migration runs (the TypeScript writer,
 * index-records.ts, uses the constant directly): a build that changes INDEX_LOG_KEEP adds a migration that re-creates
 * this function. Until it does, the two disagree only in how far back the log reaches (a replica further behind
 * reloads the namespace), never in what it says. Same signature, so migration 6's `recallgate_append_exchange`, and a
 * replica of version 6 still running, use it at once.
 */
export const WRITE_META_SQL = `
CREATE OR REPLACE FUNCTION recallgate_meta_after_add(before jsonb, adding integer, dimension integer, embedder text, epoch text)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN jsonb_build_object(
      'embedderId', CASE WHEN coalesce((before->>'count')::int, 0) > 0 THEN before->>'embedderId' ELSE embedder END,
      'dimension', CASE WHEN coalesce((before->>'count')::int, 0) > 0 THEN (before->>'dimension')::int ELSE dimension END,
      'version', coalesce((before->>'version')::int, 0) + 1,
      'count', coalesce((before->>'count')::int, 0) + adding,
      'nextLabel', coalesce((before->>'nextLabel')::int, 0) + adding)
    || CASE WHEN before IS NULL THEN jsonb_build_object('epoch', epoch)
            WHEN before ? 'epoch' THEN jsonb_build_object('epoch', before->'epoch')
            ELSE '{}'::jsonb END;
END
$$;

CREATE OR REPLACE FUNCTION recallgate_meta_after_remove(before jsonb, removed integer)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN jsonb_build_object(
      'embedderId', coalesce(before->>'embedderId', ''),
      'dimension', coalesce((before->>'dimension')::int, 0),
      'version', coalesce((before->>'version')::int, 0) + 1,
      'count', greatest(0, coalesce((before->>'count')::int, 0) - removed),
      'nextLabel', coalesce((before->>'nextLabel')::int, 0))
    || CASE WHEN before ? 'epoch' THEN jsonb_build_object('epoch', before->'epoch') ELSE '{}'::jsonb END;
END
$$;

CREATE OR REPLACE FUNCTION recallgate_write_meta(p_ns text, p_meta jsonb, p_entry jsonb)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO index_meta (namespace, meta) VALUES (p_ns, p_meta) ON CONFLICT (namespace) DO UPDATE SET meta = EXCLUDED.meta;
  INSERT INTO index_log (namespace, version, change) VALUES (p_ns, (p_meta->>'version')::int, p_entry);
  DELETE FROM index_log WHERE namespace = p_ns AND version = (p_meta->>'version')::int - ${INDEX_LOG_KEEP};
END
$$;`
