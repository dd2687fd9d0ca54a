-- Schema version 3 of package pgstate: workflow claims in one step
-- (backend.Claimer).

-- claim claims a workflow run (p_id, record p_key) for agent p_agent
-- (p_agent_json: the agent as Go's encoding/json writes it), following
-- exactly the rules of package state (claim.go) and writing the same
-- records and event: the run, which holds its claim (internal/layout), the
-- counter of claimed runs (p_count_key) when a created run becomes
-- claimed, and one history event. A heartbeat is the holder claiming
-- again. It takes the locks commit takes on the keys it writes: the run's
-- (p_lock) first, and the counter's (p_count_lock) only when it writes
-- the counter, as Update does (lock the run, read it, lock the counters to
-- commit), so that heartbeats and takeovers do not wait for claims of
-- other runs and a claim never deadlocks with a checkpoint of its run.
-- The counter's lock is taken shared and the claim adds to a shard of the
-- counter (add_shared in 001_init.sql), as a commit that only adds to a
-- counter does, so that fresh claims of one namespace do not commit one
-- at a time.
--
-- outcome is 1 not found, 2 not claimable (done, failed, or any status
-- other than created, claimed, running and waiting), 3 held by another
-- agent, 4 acquired, 5 renewed, 6 a join parent waiting for its children
-- (backend.ClaimOutcome). value/writer/... are the run record: as written
-- when the claim succeeded, as read otherwise.
--
-- A fresh claim of a child run (parent_run_id right after claim_ttl_ms)
-- also counts one more claimed child of its parent (p_child_key,
-- layout.ChildCount(parent, "claimed")), under that counter's lock
-- (p_child_lock, shared too). The caller cannot know the parent before the run is
-- read, and the lock's number is computed by the caller: so a first call
-- without them answers outcome 7 with the parent's id (in writer) and
-- writes nothing, and the caller calls again with the parent's counter and
-- its lock. Claims of runs without a parent, renewals and refusals take
-- one call.
--
-- The run's JSON (layout.RunValue as Go's json.Marshal writes it) is not
-- decoded: the fields claims change, which come first (status to
-- claim_ttl_ms), are read as text at the start of the value, the
-- agent's JSON string kept as it is, and every byte after claim_ttl_ms is
-- kept as it is (as the Redis driver's claim.lua does).

CREATE FUNCTION {{s}}.claim(p_ns text, p_now bigint, p_nslock bigint, p_lock bigint, p_count_lock bigint,
    p_key bytea, p_id bytea, p_agent text, p_agent_json text, p_ttl bigint, p_count_key bytea,
    p_child_lock bigint, p_child_key bytea, p_parent text,
    OUT outcome integer, OUT now bigint, OUT reclaimed boolean, OUT value bytea, OUT writer text,
    OUT rev bigint, OUT crev bigint, OUT updated_at bigint, OUT expires_at bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_text text;
    v_p integer;
    v_st text;
    v_ag text;
    v_ls text;
    v_f2 text;
    v_f3 text;
    v_f4 text;
    v_att bigint;
    v_fence bigint;
    v_upd text;
    v_cx bigint;
    v_held boolean;
    v_claim text;
    v_old text;
    v_new text;
    v_op text;
    v_l record;
    v_listen boolean;
    v_void text;
    v_parent text;
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
    SELECT t.value, t.writer, t.rev, t.crev, t.updated_at, t.expires_at,
           EXISTS (SELECT FROM {{s}}.listeners l WHERE l.expires_at > clock_timestamp())
      INTO value, writer, rev, crev, updated_at, expires_at, v_listen
      FROM (SELECT) o LEFT JOIN {{s}}.records t ON t.ns = p_ns AND t.key = p_key;
    IF rev IS NULL OR (expires_at IS NOT NULL AND expires_at <= now) THEN
        outcome := 1;
        value := NULL; writer := NULL; rev := NULL; crev := NULL; updated_at := NULL; expires_at := NULL;
        RETURN;
    END IF;
    -- The fields claims change, as Go writes them: status, agent_id (absent
    -- or a JSON string, in which every quote is escaped, so that it cannot
    -- contain ,"last_step":), then numbers, which contain no comma. (Plain
    -- string functions: a regular expression with captures costs a
    -- millisecond here.)
    v_text := convert_from(value, 'UTF8');
    v_p := strpos(v_text, ',"last_step":');
    IF left(v_text, 11) <> '{"status":"' OR v_p = 0 THEN
        RAISE EXCEPTION 'stored run is not in the layout package state writes';
    END IF;
    v_st := substr(v_text, 12, v_p - 12);
    v_ag := substr(v_st, strpos(v_st, '"') + 1);
    v_st := left(v_st, strpos(v_st, '"') - 1);
    v_text := substr(v_text, v_p + 13);
    v_ls := split_part(v_text, ',', 1);
    v_f2 := split_part(v_text, ',', 2);
    v_f3 := split_part(v_text, ',', 3);
    v_f4 := split_part(v_text, ',', 4);
    IF (v_ag <> '' AND left(v_ag, 12) <> ',"agent_id":') OR left(v_f2, 10) <> '"attempt":'
       OR left(v_f3, 8) <> '"fence":' OR left(v_f4, 13) <> '"updated_at":' THEN
        RAISE EXCEPTION 'stored run is not in the layout package state writes';
    END IF;
    v_att := substr(v_f2, 11)::bigint;
    v_fence := substr(v_f3, 9)::bigint;
    v_upd := substr(v_f4, 14);
    -- The rest: the claim's expiry and TTL when present, then every byte
    -- after them, kept as it is.
    v_text := substr(v_text, length(v_ls) + length(v_f2) + length(v_f3) + length(v_f4) + 4);
    v_cx := 0;
    IF left(v_text, 20) = ',"claim_expires_at":' THEN
        v_f2 := split_part(substr(v_text, 2), ',', 1);
        v_cx := substr(v_f2, 20)::bigint;
        v_text := substr(v_text, length(v_f2) + 2);
    END IF;
    IF left(v_text, 16) = ',"claim_ttl_ms":' THEN
        v_text := substr(v_text, length(split_part(substr(v_text, 2), ',', 1)) + 2);
    END IF;
    IF v_st = 'waiting' THEN
        outcome := 6;
        RETURN;
    END IF;
    IF v_st NOT IN ('created', 'claimed', 'running') THEN
        outcome := 2;
        RETURN;
    END IF;
    v_held := v_ag <> '' AND v_cx > now;
    -- The claim is live while the run has an agent and an expiry after now.
    IF v_held AND v_ag <> ',"agent_id":' || p_agent_json THEN
        outcome := 3;
        RETURN;
    END IF;
    -- A fresh claim of a created run writes the counter of claimed runs:
    -- its lock comes before the revision, so that the counter's revisions
    -- increase with its writes.
    IF NOT v_held AND v_st = 'created' THEN
        IF left(v_text, 18) = ',"parent_run_id":"' THEN
            v_parent := (convert_from(value, 'UTF8')::json) ->> 'parent_run_id';
            IF p_parent IS DISTINCT FROM v_parent THEN
                -- Call again with the parent's counter and its lock.
                outcome := 7;
                writer := v_parent;
                RETURN;
            END IF;
        END IF;
        -- Shared, as a commit that only adds to a counter takes it (see
        -- add_shared): fresh claims of one namespace do not wait for each
        -- other. Both in the order of every writer's locks. (Assignments:
        -- an expression without a query costs no executor start.)
        IF v_parent IS NULL THEN
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
    v_claim := ',"claim_expires_at":' || (now + p_ttl) || ',"claim_ttl_ms":' || p_ttl || v_text;
    v_old := '{"status":"' || v_st || '"' || v_ag || ',"attempt":' || v_att || ',"fence":' || v_fence ||
        ',"last_step":' || v_ls || '}';
    IF v_held THEN
        -- A heartbeat extends the claim and changes nothing else.
        outcome := 5;
        v_op := 'workflow.heartbeat';
        value := convert_to('{"status":"' || v_st || '"' || v_ag || ',"last_step":' || v_ls || ',"attempt":' ||
            v_att || ',"fence":' || v_fence || ',"updated_at":' || v_upd || v_claim, 'UTF8');
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
            IF v_parent IS NULL THEN
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
        v_ag := ',"agent_id":' || p_agent_json;
        v_att := v_att + 1;
        v_fence := v_fence + 1;
        v_new := '{"status":"' || v_st || '"' || v_ag || ',"attempt":' || v_att || ',"fence":' || v_fence ||
            ',"last_step":' || v_ls || '}';
        value := convert_to('{"status":"' || v_st || '"' || v_ag || ',"last_step":' || v_ls || ',"attempt":' ||
            v_att || ',"fence":' || v_fence || ',"updated_at":' || now || v_claim, 'UTF8');
    END IF;
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
        UPDATE {{s}}.records t SET value = claim.value, writer = '', rev = claim.rev, updated_at = now, expires_at = NULL
         WHERE t.ns = p_ns AND t.key = p_key;
    ELSIF v_k2 IS NULL THEN
        WITH e AS (
            INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
            VALUES (p_ns, rev, rev, p_id, v_op, convert_to(v_new, 'UTF8'), convert_to(v_old, 'UTF8'), p_agent, now)),
        c AS (
            INSERT INTO {{s}}.counters AS c (ns, key, shard, delta, rev, writer, updated_at)
            SELECT p_ns, v_k1, v_s1, 1, claim.rev, '', now
             WHERE EXISTS (SELECT FROM {{s}}.records r WHERE r.ns = p_ns AND r.key = v_k1 AND r.expires_at IS NULL)
            ON CONFLICT (ns, key, shard) DO UPDATE SET
                delta = c.delta + excluded.delta,
                writer = CASE WHEN excluded.rev > c.rev THEN excluded.writer ELSE c.writer END,
                updated_at = CASE WHEN excluded.rev > c.rev THEN excluded.updated_at ELSE c.updated_at END,
                rev = greatest(c.rev, excluded.rev)
            RETURNING 1)
        UPDATE {{s}}.records t SET value = claim.value, writer = '', rev = claim.rev, updated_at = now, expires_at = NULL
         WHERE t.ns = p_ns AND t.key = p_key
        RETURNING (SELECT count(*) FROM c) INTO v_n;
    ELSE
        WITH e AS (
            INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
            VALUES (p_ns, rev, rev, p_id, v_op, convert_to(v_new, 'UTF8'), convert_to(v_old, 'UTF8'), p_agent, now)),
        c AS (
            INSERT INTO {{s}}.counters AS c (ns, key, shard, delta, rev, writer, updated_at)
            SELECT p_ns, k.key, k.shard, 1, claim.rev, '', now
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
        UPDATE {{s}}.records t SET value = claim.value, writer = '', rev = claim.rev, updated_at = now, expires_at = NULL
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
