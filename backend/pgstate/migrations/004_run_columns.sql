-- Schema version 4 of package pgstate: the fields of a run that a claim
-- reads, in columns of their own, so that the claim function (claim_run,
-- which replaces claim) reads each one directly instead of finding it in
-- the run's JSON text.
--
-- A run record's value is still the run's JSON (backend.RunValue), which
-- every read returns as it is. Its head (backend.RunHead: status to
-- claim_ttl_ms, the fields claims change) is also in the run_* columns,
-- and run_tail is where the rest (backend.SplitRun's tail: name, tags,
-- ..., which no claim changes) starts in value, so that a claim writes a
-- new head before value's tail without parsing either. The columns hold
-- only while run_rev is the record's rev: a write that does not fill them
-- (an earlier version's commit or claim, a put of something that is not a
-- run) leaves run_rev behind, and claim_run then answers outcome 0, which
-- the driver turns into backend.ErrSkip: package state claims the run with
-- its portable code, whose commit fills the columns again. So runs stored
-- before this version need no rewrite here (the ALTER TABLE adds columns
-- without rewriting the table): each is brought over by its first claim,
-- or any other write of it. The functions of earlier versions stay, for
-- processes of those versions that share the database during an upgrade.
ALTER TABLE {{s}}.records
    ADD COLUMN run_rev bigint,        -- the rev the run_* columns were written at
    ADD COLUMN run_status text,
    ADD COLUMN run_agent text,        -- the agent as encoding/json writes it; '' for none
    ADD COLUMN run_last_step bigint,
    ADD COLUMN run_attempt bigint,
    ADD COLUMN run_fence bigint,
    ADD COLUMN run_updated bigint,
    ADD COLUMN run_claim_exp bigint,  -- 0: no claim
    ADD COLUMN run_parent text,       -- the parent's id; '' for none
    ADD COLUMN run_tail integer;      -- where the tail starts in value (from 1)

-- commit applies one backend.Txn (see Driver.Commit): it takes the
-- namespace's lock shared (p_excl: exclusive, for commits touching many
-- keys) and the advisory lock of every key it reads or writes (p_locks,
-- sorted by the caller so that no two commits deadlock), checks the
-- conditions, then draws a revision, appends the events and applies the
-- ops. Each statement of a PL/pgSQL function sees what committed before it
-- started, so the checks see every write that held these locks before.
-- Op kinds: 1 put, 2 delete, 3 add (backend.OpAdd: the record's live
-- decimal integer, 0 when absent or expired, plus the op's), 4 add to a
-- counter whose lock the commit holds shared (see add_shared); p_shared
-- says which of p_locks are taken shared, and p_fold lists the counters
-- whose shards go into their bases before anything else. A TTL or event
-- time of 0 means none. p_distinct says that no key appears in two ops, so
-- that the ops can be applied with one statement per kind.
--
-- Since schema version 4, a put of a run record also writes its run_*
-- columns (see the records table above), from p_run_*: arrays aligned with
-- the ops, NULL (or cut short) for ops that are not puts of runs whose
-- value backend.SplitRun could cut. The function of schema version 1, with
-- the parameters before p_run_status only, stays for processes that
-- predate version 4: what it writes leaves run_rev behind rev.
CREATE FUNCTION {{s}}.commit(
    p_ns text, p_now bigint, p_nslock bigint, p_excl boolean, p_locks bigint[],
    p_cond_keys bytea[], p_cond_revs bigint[],
    p_op_kinds smallint[], p_op_keys bytea[], p_op_values bytea[], p_op_writers text[],
    p_op_ttls bigint[], p_op_times bigint[], p_distinct boolean,
    p_ev_keys bytea[], p_ev_ops text[], p_ev_values bytea[], p_ev_prevs bytea[],
    p_ev_prevofs bytea[], p_ev_writers text[], p_ev_times bigint[], p_shared boolean[], p_fold bytea[],
    p_run_status text[], p_run_agent text[], p_run_last_step bigint[], p_run_attempt bigint[],
    p_run_fence bigint[], p_run_updated bigint[], p_run_claim_exp bigint[], p_run_parent text[],
    p_run_tail integer[],
    OUT committed boolean, OUT rev bigint, OUT failed integer, OUT cur bigint, OUT now bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_seq regclass;
    v_add record;
    i integer;
BEGIN
    IF p_excl THEN
        PERFORM pg_advisory_xact_lock(p_nslock);
    ELSE
        PERFORM pg_advisory_xact_lock_shared(p_nslock);
        IF cardinality(p_locks) = 1 AND NOT p_shared[1] THEN
            PERFORM pg_advisory_xact_lock(p_locks[1]);
        ELSE
            PERFORM CASE WHEN l.sh THEN pg_advisory_xact_lock_shared(l.h) ELSE pg_advisory_xact_lock(l.h) END
               FROM unnest(p_locks, p_shared) AS l(h, sh);
        END IF;
    END IF;
    now := coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
    -- Counters this commit reads, conditions on, puts or deletes (their
    -- locks held exclusively): their shards go into their bases first, so
    -- that what follows sees each as one record.
    IF cardinality(p_fold) > 0 THEN
        WITH x AS (
            DELETE FROM {{s}}.counters c WHERE c.ns = p_ns AND c.key = ANY (p_fold)
            RETURNING c.key, c.delta, c.rev, c.writer, c.updated_at),
        a AS (
            SELECT x.key, sum(x.delta)::bigint AS d, max(x.rev) AS rev,
                   (array_agg(x.writer ORDER BY x.rev DESC))[1] AS writer,
                   (array_agg(x.updated_at ORDER BY x.rev DESC))[1] AS upd
              FROM x GROUP BY x.key)
        UPDATE {{s}}.records r SET
            value = convert_to(({{s}}.int_of(r.value) + a.d)::text, 'UTF8'),
            writer = CASE WHEN a.rev > r.rev THEN a.writer ELSE r.writer END,
            updated_at = CASE WHEN a.rev > r.rev THEN a.upd ELSE r.updated_at END,
            rev = greatest(r.rev, a.rev)
          FROM a CROSS JOIN LATERAL (
              SELECT t.ctid FROM {{s}}.records t WHERE t.ns = p_ns AND t.key = a.key LIMIT 1) b
         WHERE r.ctid = b.ctid;
    END IF;
    committed := false;
    rev := 0;
    IF cardinality(p_cond_keys) > 0 THEN
        -- Every read of records by a list of keys finds each key in a
        -- subquery of its own (LATERAL, LIMIT 1: never merged into a
        -- join), so that any plan reads each by its key; a write deletes
        -- or updates the rows so found, by ctid (under the keys' locks no
        -- other writer moves them). Joined to the keys directly, a generic
        -- plan made while the namespace was small (PL/pgSQL and pgx keep
        -- them per connection, and without an ANALYZE nothing replaces
        -- them) read the whole namespace by ns, at a cost growing with it
        -- (TestWritesReadByKeyWithoutStatistics).
        SELECT c.i - 1, coalesce(r.rev, 0) INTO failed, cur
          FROM unnest(p_cond_keys, p_cond_revs) WITH ORDINALITY AS c(key, want, i)
          LEFT JOIN LATERAL (
              SELECT t.rev FROM {{s}}.records t
               WHERE t.ns = p_ns AND t.key = c.key AND (t.expires_at IS NULL OR t.expires_at > now) LIMIT 1) r ON true
         WHERE coalesce(r.rev, 0) <> c.want
         ORDER BY c.i
         LIMIT 1;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    committed := true;
    failed := -1;
    cur := 0;
    IF cardinality(p_op_keys) = 0 AND cardinality(p_ev_keys) = 0 THEN
        RETURN;
    END IF;
    -- The next revision, announced to readers of history (see draw).
    SELECT d.rev, d.seq INTO rev, v_seq FROM {{s}}.draw(p_ns, now) d;
    -- Events first, so that PrevOf sees the records as they were.
    IF cardinality(p_ev_keys) > 0 THEN
        INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
        SELECT p_ns, CASE WHEN e.i = 1 THEN rev ELSE nextval(v_seq) END, rev, e.key, e.op, e.value,
               CASE WHEN e.prevof IS NULL THEN e.prev ELSE (
                   SELECT r.value FROM {{s}}.records r
                    WHERE r.ns = p_ns AND r.key = e.prevof AND (r.expires_at IS NULL OR r.expires_at > now)) END,
               e.writer, CASE WHEN e.at = 0 THEN now ELSE e.at END
          FROM unnest(p_ev_keys, p_ev_ops, p_ev_values, p_ev_prevs, p_ev_prevofs, p_ev_writers, p_ev_times)
               WITH ORDINALITY AS e(key, op, value, prev, prevof, writer, at, i)
         ORDER BY e.i;
    END IF;
    IF p_distinct THEN
        IF 2 = ANY (p_op_kinds) THEN
            DELETE FROM {{s}}.records r
             USING unnest(p_op_kinds, p_op_keys) AS o(kind, key) CROSS JOIN LATERAL (
                   SELECT t.ctid FROM {{s}}.records t WHERE t.ns = p_ns AND t.key = o.key LIMIT 1) b
             WHERE o.kind = 2 AND r.ctid = b.ctid;
        END IF;
        IF 1 = ANY (p_op_kinds) THEN
            INSERT INTO {{s}}.records AS r (ns, key, value, writer, rev, crev, updated_at, expires_at, run_rev,
                run_status, run_agent, run_last_step, run_attempt, run_fence, run_updated, run_claim_exp,
                run_parent, run_tail)
            SELECT p_ns, o.key, o.value, o.writer, rev, rev, o.at, CASE WHEN o.ttl > 0 THEN now + o.ttl END,
                   CASE WHEN o.rs IS NOT NULL THEN rev END, o.rs, o.ra, o.rl, o.rat, o.rf, o.ru, o.rc, o.rp, o.rt
              FROM unnest(p_op_kinds, p_op_keys, p_op_values, p_op_writers, p_op_ttls, p_op_times,
                          p_run_status, p_run_agent, p_run_last_step, p_run_attempt, p_run_fence,
                          p_run_updated, p_run_claim_exp, p_run_parent, p_run_tail)
                   AS o(kind, key, value, writer, ttl, at, rs, ra, rl, rat, rf, ru, rc, rp, rt)
             WHERE o.kind = 1
            ON CONFLICT (ns, key) DO UPDATE SET
                value = excluded.value, writer = excluded.writer, rev = excluded.rev,
                crev = CASE WHEN r.expires_at IS NOT NULL AND r.expires_at <= now THEN excluded.crev ELSE r.crev END,
                updated_at = excluded.updated_at, expires_at = excluded.expires_at, run_rev = excluded.run_rev,
                run_status = excluded.run_status, run_agent = excluded.run_agent,
                run_last_step = excluded.run_last_step, run_attempt = excluded.run_attempt,
                run_fence = excluded.run_fence, run_updated = excluded.run_updated,
                run_claim_exp = excluded.run_claim_exp, run_parent = excluded.run_parent,
                run_tail = excluded.run_tail;
        END IF;
        IF 3 = ANY (p_op_kinds) THEN
            INSERT INTO {{s}}.records AS r (ns, key, value, writer, rev, crev, updated_at, expires_at)
            SELECT p_ns, o.key, convert_to({{s}}.int_of(o.value)::text, 'UTF8'), o.writer, rev, rev, o.at,
                   CASE WHEN o.ttl > 0 THEN now + o.ttl END
              FROM unnest(p_op_kinds, p_op_keys, p_op_values, p_op_writers, p_op_ttls, p_op_times)
                   AS o(kind, key, value, writer, ttl, at)
             WHERE o.kind = 3
            ON CONFLICT (ns, key) DO UPDATE SET
                value = convert_to((CASE WHEN r.expires_at IS NOT NULL AND r.expires_at <= now THEN 0
                    ELSE {{s}}.int_of(r.value) END + {{s}}.int_of(excluded.value))::text, 'UTF8'),
                writer = excluded.writer, rev = excluded.rev,
                crev = CASE WHEN r.expires_at IS NOT NULL AND r.expires_at <= now THEN excluded.crev ELSE r.crev END,
                updated_at = excluded.updated_at, expires_at = excluded.expires_at;
        END IF;
    ELSE
        FOR i IN 1 .. cardinality(p_op_keys) LOOP
            IF p_op_kinds[i] = 1 THEN
                INSERT INTO {{s}}.records AS r (ns, key, value, writer, rev, crev, updated_at, expires_at, run_rev,
                    run_status, run_agent, run_last_step, run_attempt, run_fence, run_updated, run_claim_exp,
                    run_parent, run_tail)
                VALUES (p_ns, p_op_keys[i], p_op_values[i], p_op_writers[i], rev, rev, p_op_times[i],
                        CASE WHEN p_op_ttls[i] > 0 THEN now + p_op_ttls[i] END,
                        CASE WHEN p_run_status[i] IS NOT NULL THEN rev END, p_run_status[i], p_run_agent[i],
                        p_run_last_step[i], p_run_attempt[i], p_run_fence[i], p_run_updated[i],
                        p_run_claim_exp[i], p_run_parent[i], p_run_tail[i])
                ON CONFLICT (ns, key) DO UPDATE SET
                    value = excluded.value, writer = excluded.writer, rev = excluded.rev,
                    crev = CASE WHEN r.expires_at IS NOT NULL AND r.expires_at <= now THEN excluded.crev ELSE r.crev END,
                    updated_at = excluded.updated_at, expires_at = excluded.expires_at, run_rev = excluded.run_rev,
                    run_status = excluded.run_status, run_agent = excluded.run_agent,
                    run_last_step = excluded.run_last_step, run_attempt = excluded.run_attempt,
                    run_fence = excluded.run_fence, run_updated = excluded.run_updated,
                    run_claim_exp = excluded.run_claim_exp, run_parent = excluded.run_parent,
                    run_tail = excluded.run_tail;
            ELSIF p_op_kinds[i] = 3 THEN
                INSERT INTO {{s}}.records AS r (ns, key, value, writer, rev, crev, updated_at, expires_at)
                VALUES (p_ns, p_op_keys[i], convert_to({{s}}.int_of(p_op_values[i])::text, 'UTF8'), p_op_writers[i],
                        rev, rev, p_op_times[i], CASE WHEN p_op_ttls[i] > 0 THEN now + p_op_ttls[i] END)
                ON CONFLICT (ns, key) DO UPDATE SET
                    value = convert_to((CASE WHEN r.expires_at IS NOT NULL AND r.expires_at <= now THEN 0
                        ELSE {{s}}.int_of(r.value) END + {{s}}.int_of(excluded.value))::text, 'UTF8'),
                    writer = excluded.writer, rev = excluded.rev,
                    crev = CASE WHEN r.expires_at IS NOT NULL AND r.expires_at <= now THEN excluded.crev ELSE r.crev END,
                    updated_at = excluded.updated_at, expires_at = excluded.expires_at;
            ELSIF p_op_kinds[i] = 2 THEN
                DELETE FROM {{s}}.records r WHERE r.ns = p_ns AND r.key = p_op_keys[i];
            END IF;
        END LOOP;
    END IF;
    -- Adds to shards last (no other op touches their counters), in key
    -- order (see add_shared).
    IF 4 = ANY (p_op_kinds) THEN
        FOR v_add IN
            SELECT o.key, {{s}}.int_of(o.value) AS delta, o.writer, o.at
              FROM unnest(p_op_kinds, p_op_keys, p_op_values, p_op_writers, p_op_times)
                   WITH ORDINALITY AS o(kind, key, value, writer, at, i)
             WHERE o.kind = 4
             ORDER BY o.key, o.i
        LOOP
            PERFORM {{s}}.add_shared(p_ns, v_add.key, v_add.delta, v_add.writer, v_add.at, rev, now);
        END LOOP;
    END IF;
END
$$;

-- claim_run claims a workflow run (p_id, record p_key) for agent p_agent
-- (p_agent_json: the agent as Go's encoding/json writes it), as claim of
-- schema version 3 does and taking the same locks in the same order (see
-- 003_claim.sql), but reading the run's fields from its run_* columns and
-- writing them back: a new head before the run's tail, in value, and in
-- the columns. The answers are claim's, and outcome 0 when the columns do
-- not hold (run_rev is not rev): the caller then claims the run with
-- package state's portable code, having written nothing here. claim stays,
-- for processes of earlier versions sharing the database during an
-- upgrade: what it writes leaves run_rev behind.
CREATE FUNCTION {{s}}.claim_run(p_ns text, p_now bigint, p_nslock bigint, p_lock bigint, p_count_lock bigint,
    p_key bytea, p_id bytea, p_agent text, p_agent_json text, p_ttl bigint, p_count_key bytea,
    p_child_lock bigint, p_child_key bytea, p_parent text,
    OUT outcome integer, OUT now bigint, OUT reclaimed boolean, OUT value bytea, OUT writer text,
    OUT rev bigint, OUT crev bigint, OUT updated_at bigint, OUT expires_at bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_run_rev bigint;
    v_st text;
    v_ag text;
    v_ls bigint;
    v_att bigint;
    v_fence bigint;
    v_upd bigint;
    v_cx bigint;
    v_parent text;
    v_tail integer;
    v_held boolean;
    v_ao text;
    v_head bytea;
    v_old text;
    v_new text;
    v_op text;
    v_l record;
    v_listen boolean;
    v_void text;
    v_k1 bytea;
    v_k2 bytea;
    v_s1 integer;
    v_s2 integer;
    v_n bigint;
BEGIN
    -- As set does (001_init.sql): the locks and the announcement (see
    -- draw) in one statement, then the run and whether anyone listens (see
    -- changed) in one with a snapshot taken after them, the writes in one.
    -- A claim refused has announced a bound it does not draw: readers of
    -- history wait for it as for any writer in flight, until it ends.
    SELECT pg_advisory_xact_lock_shared(p_nslock), pg_advisory_xact_lock(p_lock),
           pg_advisory_xact_lock_shared((a.low >> 32)::integer, a.low::bit(32)::integer), a.seq
      INTO v_l
      FROM (SELECT n.seq, coalesce(pg_sequence_last_value(n.seq), 0) + 1 AS low
              FROM (SELECT) o LEFT JOIN {{s}}.namespaces n ON n.ns = p_ns) a;
    now := coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
    reclaimed := false;
    SELECT t.value, t.writer, t.rev, t.crev, t.updated_at, t.expires_at, t.run_rev, t.run_status, t.run_agent,
           t.run_last_step, t.run_attempt, t.run_fence, t.run_updated, t.run_claim_exp, t.run_parent, t.run_tail,
           EXISTS (SELECT FROM {{s}}.listeners l WHERE l.expires_at > clock_timestamp())
      INTO value, writer, rev, crev, updated_at, expires_at, v_run_rev, v_st, v_ag,
           v_ls, v_att, v_fence, v_upd, v_cx, v_parent, v_tail, v_listen
      FROM (SELECT) o LEFT JOIN {{s}}.records t ON t.ns = p_ns AND t.key = p_key;
    IF rev IS NULL OR (expires_at IS NOT NULL AND expires_at <= now) THEN
        outcome := 1;
        value := NULL; writer := NULL; rev := NULL; crev := NULL; updated_at := NULL; expires_at := NULL;
        RETURN;
    END IF;
    IF v_run_rev IS DISTINCT FROM rev THEN
        -- Not written with its columns (see the records table above).
        outcome := 0;
        value := NULL; writer := NULL; rev := NULL; crev := NULL; updated_at := NULL; expires_at := NULL;
        RETURN;
    END IF;
    IF v_st IS NULL OR v_ag IS NULL OR v_ls IS NULL OR v_att IS NULL OR v_fence IS NULL OR v_upd IS NULL
       OR v_cx IS NULL OR v_parent IS NULL OR v_tail IS NULL THEN
        RAISE EXCEPTION 'the run columns of stored run % are incomplete', convert_from(p_key, 'UTF8');
    END IF;
    IF v_st = 'waiting' THEN
        outcome := 6;
        RETURN;
    END IF;
    IF v_st NOT IN ('created', 'claimed', 'running') THEN
        outcome := 2;
        RETURN;
    END IF;
    -- The claim is live while the run has an agent and an expiry after now.
    v_held := v_ag <> '' AND v_cx > now;
    IF v_held AND v_ag <> p_agent_json THEN
        outcome := 3;
        RETURN;
    END IF;
    -- A fresh claim of a created run writes the counter of claimed runs:
    -- its lock comes before the revision, so that the counter's revisions
    -- increase with its writes.
    IF NOT v_held AND v_st = 'created' THEN
        IF v_parent <> '' AND p_parent IS DISTINCT FROM v_parent THEN
            -- Call again with the parent's counter and its lock.
            outcome := 7;
            writer := v_parent;
            RETURN;
        END IF;
        -- Shared, as a commit that only adds to a counter takes it (see
        -- add_shared): fresh claims of one namespace do not wait for each
        -- other. Both in the order of every writer's locks. (Assignments:
        -- an expression without a query costs no executor start.)
        IF v_parent = '' THEN
            v_void := pg_advisory_xact_lock_shared(p_count_lock)::text;
        ELSE
            v_void := pg_advisory_xact_lock_shared(least(p_count_lock, p_child_lock))::text ||
                      pg_advisory_xact_lock_shared(greatest(p_count_lock, p_child_lock))::text;
        END IF;
    END IF;
    -- The next revision (see draw).
    IF v_l.seq IS NOT NULL THEN
        rev := nextval(v_l.seq);
    END IF;
    IF v_l.seq IS NULL OR rev < now * 1000 - 100000 THEN
        SELECT n.rev INTO rev FROM {{s}}.next_rev(p_ns, now * 1000) n;
    END IF;
    IF v_listen THEN
        PERFORM pg_notify({{chan_lit}}, CASE WHEN octet_length(p_ns) < 7900 THEN p_ns ELSE '' END);
    END IF;
    v_ao := CASE WHEN v_ag = '' THEN '' ELSE ',"agent_id":' || v_ag END;
    v_old := '{"status":"' || v_st || '"' || v_ao || ',"attempt":' || v_att || ',"fence":' || v_fence ||
        ',"last_step":' || v_ls || '}';
    IF v_held THEN
        -- A heartbeat extends the claim and changes nothing else.
        outcome := 5;
        v_op := 'workflow.heartbeat';
        v_new := v_old;
        v_old := NULL;
    ELSE
        -- A fresh claim, or a takeover from a holder whose claim expired.
        outcome := 4;
        v_op := 'workflow.claim';
        IF v_ag <> '' THEN
            v_op := 'workflow.reclaim';
            reclaimed := true;
        END IF;
        IF v_st = 'created' THEN
            v_st := 'claimed';
            -- The counters, in key order (see add_shared), each with its
            -- shard (see shard_of), written along with the run below. (Two
            -- scalars, not arrays: so that the statement's generic plan is
            -- as cheap as a custom one and it is not planned at each call.)
            IF v_parent = '' THEN
                v_k1 := p_count_key;
            ELSIF p_child_key < p_count_key THEN
                v_k1 := p_child_key;
                v_k2 := p_count_key;
            ELSE
                v_k1 := p_count_key;
                v_k2 := p_child_key;
            END IF;
            v_s1 := {{s}}.shard_of(p_ns, v_k1);
            IF v_k2 IS NOT NULL THEN
                v_s2 := {{s}}.shard_of(p_ns, v_k2);
            END IF;
        END IF;
        v_ag := p_agent_json;
        v_ao := ',"agent_id":' || p_agent_json;
        v_att := v_att + 1;
        v_fence := v_fence + 1;
        v_upd := now;
        v_new := '{"status":"' || v_st || '"' || v_ao || ',"attempt":' || v_att || ',"fence":' || v_fence ||
            ',"last_step":' || v_ls || '}';
    END IF;
    -- The run's new head (backend.AppendRun), then its tail as it was.
    v_cx := now + p_ttl;
    v_head := convert_to('{"status":"' || v_st || '"' || v_ao || ',"last_step":' || v_ls || ',"attempt":' ||
        v_att || ',"fence":' || v_fence || ',"updated_at":' || v_upd || ',"claim_expires_at":' || v_cx ||
        ',"claim_ttl_ms":' || p_ttl, 'UTF8');
    value := v_head || substr(value, v_tail);
    v_tail := octet_length(v_head) + 1;
    -- One statement: the event (a heartbeat's has the run as it was as
    -- its value, and no previous value), the run, and the counters'
    -- shards when every counter's base is there without an expiry (as
    -- add_shared's common case, all or none); otherwise add_shared
    -- makes their bases so after, in key order. One variant per number of
    -- counters: a statement whose parameters may be NULL gets cheaper
    -- custom plans, and PL/pgSQL then plans it at each call, which costs
    -- more than the rest of the claim.
    IF v_k1 IS NULL THEN
        WITH e AS (
            INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
            VALUES (p_ns, rev, rev, p_id, v_op, convert_to(v_new, 'UTF8'), convert_to(v_old, 'UTF8'), p_agent, now))
        UPDATE {{s}}.records t SET value = claim_run.value, writer = '', rev = claim_run.rev, updated_at = now, expires_at = NULL,
               run_rev = claim_run.rev, run_status = v_st, run_agent = v_ag, run_attempt = v_att, run_fence = v_fence,
               run_updated = v_upd, run_claim_exp = v_cx, run_tail = v_tail
         WHERE t.ns = p_ns AND t.key = p_key;
    ELSIF v_k2 IS NULL THEN
        WITH e AS (
            INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
            VALUES (p_ns, rev, rev, p_id, v_op, convert_to(v_new, 'UTF8'), convert_to(v_old, 'UTF8'), p_agent, now)),
        c AS (
            INSERT INTO {{s}}.counters AS c (ns, key, shard, delta, rev, writer, updated_at)
            SELECT p_ns, v_k1, v_s1, 1, claim_run.rev, '', now
             WHERE EXISTS (SELECT FROM {{s}}.records r WHERE r.ns = p_ns AND r.key = v_k1 AND r.expires_at IS NULL)
            ON CONFLICT (ns, key, shard) DO UPDATE SET
                delta = c.delta + excluded.delta,
                writer = CASE WHEN excluded.rev > c.rev THEN excluded.writer ELSE c.writer END,
                updated_at = CASE WHEN excluded.rev > c.rev THEN excluded.updated_at ELSE c.updated_at END,
                rev = greatest(c.rev, excluded.rev)
            RETURNING 1)
        UPDATE {{s}}.records t SET value = claim_run.value, writer = '', rev = claim_run.rev, updated_at = now, expires_at = NULL,
               run_rev = claim_run.rev, run_status = v_st, run_agent = v_ag, run_attempt = v_att, run_fence = v_fence,
               run_updated = v_upd, run_claim_exp = v_cx, run_tail = v_tail
         WHERE t.ns = p_ns AND t.key = p_key
        RETURNING (SELECT count(*) FROM c) INTO v_n;
    ELSE
        WITH e AS (
            INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
            VALUES (p_ns, rev, rev, p_id, v_op, convert_to(v_new, 'UTF8'), convert_to(v_old, 'UTF8'), p_agent, now)),
        c AS (
            INSERT INTO {{s}}.counters AS c (ns, key, shard, delta, rev, writer, updated_at)
            SELECT p_ns, k.key, k.shard, 1, claim_run.rev, '', now
              FROM (VALUES (1, v_k1, v_s1), (2, v_k2, v_s2)) AS k(i, key, shard)
             WHERE EXISTS (SELECT FROM {{s}}.records r WHERE r.ns = p_ns AND r.key = v_k1 AND r.expires_at IS NULL)
               AND EXISTS (SELECT FROM {{s}}.records r WHERE r.ns = p_ns AND r.key = v_k2 AND r.expires_at IS NULL)
             ORDER BY k.i
            ON CONFLICT (ns, key, shard) DO UPDATE SET
                delta = c.delta + excluded.delta,
                writer = CASE WHEN excluded.rev > c.rev THEN excluded.writer ELSE c.writer END,
                updated_at = CASE WHEN excluded.rev > c.rev THEN excluded.updated_at ELSE c.updated_at END,
                rev = greatest(c.rev, excluded.rev)
            RETURNING 1)
        UPDATE {{s}}.records t SET value = claim_run.value, writer = '', rev = claim_run.rev, updated_at = now, expires_at = NULL,
               run_rev = claim_run.rev, run_status = v_st, run_agent = v_ag, run_attempt = v_att, run_fence = v_fence,
               run_updated = v_upd, run_claim_exp = v_cx, run_tail = v_tail
         WHERE t.ns = p_ns AND t.key = p_key
        RETURNING (SELECT count(*) FROM c) INTO v_n;
    END IF;
    IF v_k1 IS NOT NULL AND v_n = 0 THEN
        PERFORM {{s}}.add_shared(p_ns, v_k1, 1, '', now, rev, now);
        IF v_k2 IS NOT NULL THEN
            PERFORM {{s}}.add_shared(p_ns, v_k2, 1, '', now, rev, now);
        END IF;
    END IF;
    writer := '';
    updated_at := now;
    expires_at := NULL;
END
$$;
