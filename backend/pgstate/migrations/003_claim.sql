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
--
-- Each PL/pgSQL statement, even an assignment, costs the server a few
-- microseconds more than the work it names (each expression is set up
-- again in every transaction), and under concurrency that is much of a
-- claim's cost: so values are computed in the SQL statements the claim
-- runs anyway where they can be (the time with the locks, the split of
-- the run's numbers and the shard's lock with the read, the outputs with
-- the write), a string is built once where it is used, and the common
-- case takes the fewest steps.

CREATE FUNCTION {{s}}.claim(p_ns text, p_now bigint, p_nslock bigint, p_lock bigint, p_count_lock bigint,
    p_key bytea, p_id bytea, p_agent text, p_agent_json text, p_ttl bigint, p_count_key bytea,
    p_child_lock bigint, p_child_key bytea, p_parent text,
    OUT outcome integer, OUT now bigint, OUT reclaimed boolean, OUT value bytea, OUT writer text,
    OUT rev bigint, OUT crev bigint, OUT updated_at bigint, OUT expires_at bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_seq regclass;
    v_text text;
    v_p integer;
    v_f text[];
    v_st text;
    v_ag text;
    v_cx bigint;
    v_held boolean;
    v_listen boolean;
    v_void text;
    v_parent text;
    v_k1 bytea;
    v_k2 bytea;
    v_pid integer;
    v_lock bigint;
    v_s1 integer;
    v_s2 integer;
    v_rev bigint;
    v_ev text;
    v_new text;
    v_n bigint;
BEGIN
    -- As set does (001_init.sql): the locks and the announcement (see
    -- draw) in one statement, which also reads the time once it holds
    -- them, then the run and whether anyone listens (see changed) in one
    -- with a snapshot taken after them, the writes in one. A claim refused
    -- has announced a bound it does not draw: readers of history wait for
    -- it as for any writer in flight, until it ends.
    SELECT a.seq, coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
      INTO v_seq, now
      FROM (SELECT n.seq, coalesce(pg_sequence_last_value(n.seq), 0) + 1 AS low
              FROM (SELECT) o LEFT JOIN {{s}}.namespaces n ON n.ns = p_ns) a
     WHERE pg_advisory_xact_lock_shared(p_nslock)::text || pg_advisory_xact_lock(p_lock)::text ||
           pg_advisory_xact_lock_shared((a.low >> 32)::integer, a.low::bit(32)::integer)::text = '';
    -- The fields claims change, as Go writes them: status, agent_id (absent
    -- or a JSON string, in which every quote is escaped, so that it cannot
    -- contain ,"last_step":), then numbers, which contain no comma: split
    -- at once, the four always there and the claim's expiry and TTL when
    -- present, from a prefix long enough for six of them (what follows may
    -- be long). (Plain string functions: a regular expression with
    -- captures costs about half a millisecond here.) Also the first shard
    -- of the counter of claimed runs to try, and its lock (see shard_of).
    SELECT t.value, t.writer, t.rev, t.crev, t.updated_at, t.expires_at,
           EXISTS (SELECT FROM {{s}}.listeners l WHERE l.expires_at > clock_timestamp()),
           false, x.v, x.p, string_to_array(substr(x.v, x.p + 13, 256), ','),
           pg_backend_pid() % 32,
           hashtextextended({{s_lit}} || ' shard ' || p_ns || ' ' || encode(p_count_key, 'hex'), 0)
      INTO value, writer, rev, crev, updated_at, expires_at, v_listen, reclaimed, v_text, v_p, v_f,
           v_pid, v_lock
      FROM (SELECT) o LEFT JOIN {{s}}.records t ON t.ns = p_ns AND t.key = p_key
      CROSS JOIN LATERAL (SELECT convert_from(t.value, 'UTF8') AS v,
                                 strpos(convert_from(t.value, 'UTF8'), ',"last_step":') AS p) x;
    IF rev IS NULL OR (expires_at IS NOT NULL AND expires_at <= now) THEN
        outcome := 1;
        value := NULL; writer := NULL; rev := NULL; crev := NULL; updated_at := NULL; expires_at := NULL;
        RETURN;
    END IF;
    IF left(v_text, 11) <> '{"status":"' OR v_p = 0 THEN
        RAISE EXCEPTION 'stored run is not in the layout package state writes';
    END IF;
    v_st := substr(v_text, 12, v_p - 12);
    v_ag := substr(v_st, strpos(v_st, '"') + 1);
    v_st := left(v_st, strpos(v_st, '"') - 1);
    IF (v_ag <> '' AND left(v_ag, 12) <> ',"agent_id":')
       OR left(v_f[2], 10) <> '"attempt":' OR left(v_f[3], 8) <> '"fence":' OR left(v_f[4], 13) <> '"updated_at":' THEN
        RAISE EXCEPTION 'stored run is not in the layout package state writes';
    END IF;
    -- Where the rest starts: the claim's expiry and TTL when present, then
    -- every byte after them, kept as it is.
    v_p := v_p + 13 + length(v_f[1]) + length(v_f[2]) + length(v_f[3]) + length(v_f[4]) + 3;
    IF substr(v_text, v_p, 20) = ',"claim_expires_at":' THEN
        v_cx := substr(v_f[5], 20)::bigint;
        v_p := v_p + length(v_f[5]) + 1;
        IF substr(v_text, v_p, 16) = ',"claim_ttl_ms":' THEN
            v_p := v_p + length(v_f[6]) + 1;
        END IF;
    ELSIF substr(v_text, v_p, 16) = ',"claim_ttl_ms":' THEN
        v_p := v_p + length(v_f[5]) + 1;
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
    v_held := v_ag <> '' AND coalesce(v_cx, 0) > now;
    IF v_held THEN
        IF v_ag <> ',"agent_id":' || p_agent_json THEN
            outcome := 3;
            RETURN;
        END IF;
    ELSIF v_st = 'created' THEN
        -- A fresh claim of a created run writes the counter of claimed
        -- runs: its lock comes before the revision, so that the counter's
        -- revisions increase with its writes. Shared, as a commit that only
        -- adds to a counter takes it (see add_shared): fresh claims of one
        -- namespace do not wait for each other. (Assignments: an
        -- expression without a query costs no executor start.) Then the
        -- counter's shard: shard_of's steps, inlined (a call of a PL/pgSQL
        -- function costs more than the claim's other steps together); the
        -- first try, from the read, takes it but when another claim in
        -- flight holds that shard.
        IF substr(v_text, v_p, 18) = ',"parent_run_id":"' THEN
            v_parent := v_text::json ->> 'parent_run_id';
        END IF;
        IF v_parent IS NULL THEN
            v_void := pg_advisory_xact_lock_shared(p_count_lock)::text;
            v_k1 := p_count_key;
            v_s1 := v_pid;
            IF NOT pg_try_advisory_xact_lock(v_lock # v_pid) THEN
                FOR i IN 1 .. 31 LOOP
                    IF pg_try_advisory_xact_lock(v_lock # ((v_pid + i) % 32)) THEN
                        v_s1 := (v_pid + i) % 32;
                        EXIT;
                    END IF;
                END LOOP;
            END IF;
        ELSIF p_parent IS DISTINCT FROM v_parent THEN
            -- A child's fresh claim also counts one more claimed child of
            -- its parent: call again with the parent's counter and its lock.
            outcome := 7;
            writer := v_parent;
            RETURN;
        ELSE
            -- Both counters' locks in the order of every writer's locks,
            -- their shards in key order (see add_shared).
            v_void := pg_advisory_xact_lock_shared(least(p_count_lock, p_child_lock))::text ||
                      pg_advisory_xact_lock_shared(greatest(p_count_lock, p_child_lock))::text;
            v_k1 := least(p_count_key, p_child_key);
            v_k2 := greatest(p_count_key, p_child_key);
            v_lock := hashtextextended({{s_lit}} || ' shard ' || p_ns || ' ' || encode(v_k1, 'hex'), 0);
            v_s1 := v_pid;
            FOR i IN 0 .. 31 LOOP
                IF pg_try_advisory_xact_lock(v_lock # ((v_pid + i) % 32)) THEN
                    v_s1 := (v_pid + i) % 32;
                    EXIT;
                END IF;
            END LOOP;
            v_lock := hashtextextended({{s_lit}} || ' shard ' || p_ns || ' ' || encode(v_k2, 'hex'), 0);
            v_s2 := v_pid;
            FOR i IN 0 .. 31 LOOP
                IF pg_try_advisory_xact_lock(v_lock # ((v_pid + i) % 32)) THEN
                    v_s2 := (v_pid + i) % 32;
                    EXIT;
                END IF;
            END LOOP;
        END IF;
    END IF;
    -- The next revision (see draw).
    v_rev := nextval(v_seq);
    IF v_rev IS NULL OR v_rev < now * 1000 - 100000 THEN
        SELECT n.rev INTO v_rev FROM {{s}}.next_rev(p_ns, now * 1000) n;
    END IF;
    IF v_listen THEN
        PERFORM pg_notify({{chan_lit}}, CASE WHEN octet_length(p_ns) < 7900 THEN p_ns ELSE '' END);
    END IF;
    -- The run as claimed: a heartbeat extends the claim and changes
    -- nothing else; a fresh claim, or a takeover from a holder whose claim
    -- expired, also sets the agent, counts one more attempt and fence, and
    -- a created run becomes claimed. The event's value is the run's
    -- fields claims change as they are after it (a heartbeat's: as they
    -- were, and no previous value).
    IF v_held THEN
        v_ev := '{"status":"' || v_st || '"' || v_ag || ',"attempt":' || substr(v_f[2], 11)::bigint ||
            ',"fence":' || substr(v_f[3], 9)::bigint || ',"last_step":' || v_f[1] || '}';
        v_new := '{"status":"' || v_st || '"' || v_ag || ',"last_step":' || v_f[1] || ',"attempt":' ||
            substr(v_f[2], 11)::bigint || ',"fence":' || substr(v_f[3], 9)::bigint || ',"updated_at":' ||
            substr(v_f[4], 14);
    ELSE
        v_ev := '{"status":"' || CASE WHEN v_st = 'created' THEN 'claimed' ELSE v_st END || '","agent_id":' ||
            p_agent_json || ',"attempt":' || (substr(v_f[2], 11)::bigint + 1) || ',"fence":' ||
            (substr(v_f[3], 9)::bigint + 1) || ',"last_step":' || v_f[1] || '}';
        v_new := '{"status":"' || CASE WHEN v_st = 'created' THEN 'claimed' ELSE v_st END || '","agent_id":' ||
            p_agent_json || ',"last_step":' || v_f[1] || ',"attempt":' || (substr(v_f[2], 11)::bigint + 1) ||
            ',"fence":' || (substr(v_f[3], 9)::bigint + 1) || ',"updated_at":' || now;
    END IF;
    -- One statement: the event, the run, and the counters' shards when
    -- every counter's base is there without an expiry (as add_shared's
    -- common case, all or none); otherwise add_shared makes their bases so
    -- after, in key order. It also gives the outputs. One variant per
    -- number of counters: a statement whose parameters may be NULL gets
    -- cheaper custom plans, and PL/pgSQL then plans it at each call, which
    -- costs more than the rest of the claim.
    IF v_k1 IS NULL THEN
        WITH e AS (
            INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
            VALUES (p_ns, v_rev, v_rev, p_id,
                    CASE WHEN v_held THEN 'workflow.heartbeat' WHEN v_ag <> '' THEN 'workflow.reclaim'
                         ELSE 'workflow.claim' END,
                    convert_to(v_ev, 'UTF8'),
                    CASE WHEN NOT v_held THEN convert_to('{"status":"' || v_st || '"' || v_ag || ',"attempt":' ||
                        substr(v_f[2], 11)::bigint || ',"fence":' || substr(v_f[3], 9)::bigint || ',"last_step":' ||
                        v_f[1] || '}',
                        'UTF8') END,
                    p_agent, now))
        UPDATE {{s}}.records t SET value = convert_to(v_new || ',"claim_expires_at":' || (now + p_ttl) ||
                   ',"claim_ttl_ms":' || p_ttl || substr(v_text, v_p), 'UTF8'),
               writer = '', rev = v_rev, updated_at = now, expires_at = NULL
         WHERE t.ns = p_ns AND t.key = p_key
        RETURNING CASE WHEN v_held THEN 5 ELSE 4 END, NOT v_held AND v_ag <> '', t.value, t.writer, t.rev,
                  t.updated_at, t.expires_at
             INTO outcome, reclaimed, value, writer, rev, updated_at, expires_at;
    ELSIF v_k2 IS NULL THEN
        WITH e AS (
            INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
            VALUES (p_ns, v_rev, v_rev, p_id, CASE WHEN v_ag <> '' THEN 'workflow.reclaim' ELSE 'workflow.claim' END,
                    convert_to(v_ev, 'UTF8'),
                    convert_to('{"status":"' || v_st || '"' || v_ag || ',"attempt":' ||
                        substr(v_f[2], 11)::bigint || ',"fence":' || substr(v_f[3], 9)::bigint || ',"last_step":' ||
                        v_f[1] || '}', 'UTF8'),
                    p_agent, now)),
        c AS (
            INSERT INTO {{s}}.counters AS c (ns, key, shard, delta, rev, writer, updated_at)
            SELECT p_ns, v_k1, v_s1, 1, v_rev, '', now
             WHERE EXISTS (SELECT FROM {{s}}.records r WHERE r.ns = p_ns AND r.key = v_k1 AND r.expires_at IS NULL)
            ON CONFLICT (ns, key, shard) DO UPDATE SET
                delta = c.delta + excluded.delta,
                writer = CASE WHEN excluded.rev > c.rev THEN excluded.writer ELSE c.writer END,
                updated_at = CASE WHEN excluded.rev > c.rev THEN excluded.updated_at ELSE c.updated_at END,
                rev = greatest(c.rev, excluded.rev)
            RETURNING 1)
        UPDATE {{s}}.records t SET value = convert_to(v_new || ',"claim_expires_at":' || (now + p_ttl) ||
                   ',"claim_ttl_ms":' || p_ttl || substr(v_text, v_p), 'UTF8'),
               writer = '', rev = v_rev, updated_at = now, expires_at = NULL
         WHERE t.ns = p_ns AND t.key = p_key
        RETURNING 4, v_ag <> '', t.value, t.writer, t.rev, t.updated_at, t.expires_at, (SELECT count(*) FROM c)
             INTO outcome, reclaimed, value, writer, rev, updated_at, expires_at, v_n;
        IF v_n = 0 THEN
            PERFORM {{s}}.add_shared(p_ns, v_k1, 1, '', now, v_rev, now);
        END IF;
    ELSE
        WITH e AS (
            INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
            VALUES (p_ns, v_rev, v_rev, p_id, CASE WHEN v_ag <> '' THEN 'workflow.reclaim' ELSE 'workflow.claim' END,
                    convert_to(v_ev, 'UTF8'),
                    convert_to('{"status":"' || v_st || '"' || v_ag || ',"attempt":' ||
                        substr(v_f[2], 11)::bigint || ',"fence":' || substr(v_f[3], 9)::bigint || ',"last_step":' ||
                        v_f[1] || '}', 'UTF8'),
                    p_agent, now)),
        c AS (
            INSERT INTO {{s}}.counters AS c (ns, key, shard, delta, rev, writer, updated_at)
            SELECT p_ns, k.key, k.shard, 1, v_rev, '', now
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
        UPDATE {{s}}.records t SET value = convert_to(v_new || ',"claim_expires_at":' || (now + p_ttl) ||
                   ',"claim_ttl_ms":' || p_ttl || substr(v_text, v_p), 'UTF8'),
               writer = '', rev = v_rev, updated_at = now, expires_at = NULL
         WHERE t.ns = p_ns AND t.key = p_key
        RETURNING 4, v_ag <> '', t.value, t.writer, t.rev, t.updated_at, t.expires_at, (SELECT count(*) FROM c)
             INTO outcome, reclaimed, value, writer, rev, updated_at, expires_at, v_n;
        IF v_n = 0 THEN
            PERFORM {{s}}.add_shared(p_ns, v_k1, 1, '', now, v_rev, now);
            PERFORM {{s}}.add_shared(p_ns, v_k2, 1, '', now, v_rev, now);
        END IF;
    END IF;
END
$$;
