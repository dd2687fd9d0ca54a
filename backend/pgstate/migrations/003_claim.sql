-- Schema version 3 of package pgstate: workflow claims in one step
-- (backend.Claimer).

-- claim claims a workflow run (p_id, record p_key) for agent p_agent
-- (p_agent_json: the agent as Go's encoding/json writes it), following
-- exactly the rules of package state (claim.go) and writing the same
-- records and event: the run, which holds its claim (internal/layout), the
-- counter of claimed runs (p_count_key) when a created run becomes
-- claimed, and one history event. A heartbeat is the holder claiming
-- again. It takes the locks commit takes on the keys it writes: p_locks,
-- sorted, up front, and p_late_lock (the counter's, when it sorts after
-- every lock of p_locks, else NULL and in p_locks) only when the counter
-- is written, so that heartbeats and takeovers do not wait for claims of
-- other runs.
--
-- outcome is 1 not found, 2 not claimable (done, failed, or any status
-- other than created, claimed and running), 3 held by another agent, 4
-- acquired, 5 renewed (backend.ClaimOutcome). value/writer/... are the run
-- record: as written when the claim succeeded, as read otherwise.
--
-- The run's JSON (layout.RunValue as Go's json.Marshal writes it) is not
-- decoded: the fields claims change, which come first (status to
-- claim_ttl_ms), are matched as text at the start of the value, the
-- agent's JSON string kept as it is, and every byte after claim_ttl_ms is
-- kept as it is (as the Redis driver's claim.lua does).
CREATE FUNCTION {{s}}.claim(p_ns text, p_now bigint, p_nslock bigint, p_locks bigint[], p_late_lock bigint,
    p_key bytea, p_id bytea, p_agent text, p_agent_json text, p_ttl bigint, p_count_key bytea,
    OUT outcome integer, OUT now bigint, OUT reclaimed boolean, OUT value bytea, OUT writer text,
    OUT rev bigint, OUT crev bigint, OUT updated_at bigint, OUT expires_at bigint)
LANGUAGE plpgsql AS $$
DECLARE
    r {{s}}.records%ROWTYPE;
    m text[];
    v_st text;
    v_ag text;
    v_att bigint;
    v_fence bigint;
    v_claim text;
    v_old text;
    v_new text;
    v_op text;
    v_seq regclass;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(p_nslock);
    IF cardinality(p_locks) = 1 THEN
        PERFORM pg_advisory_xact_lock(p_locks[1]);
    ELSE
        PERFORM pg_advisory_xact_lock(h) FROM unnest(p_locks) AS h;
    END IF;
    now := coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
    reclaimed := false;
    SELECT * INTO r FROM {{s}}.records t WHERE t.ns = p_ns AND t.key = p_key;
    IF NOT FOUND OR (r.expires_at IS NOT NULL AND r.expires_at <= now) THEN
        outcome := 1;
        RETURN;
    END IF;
    SELECT r.value, r.writer, r.rev, r.crev, r.updated_at, r.expires_at
      INTO value, writer, rev, crev, updated_at, expires_at;
    m := regexp_match(convert_from(r.value, 'UTF8'),
        '^\{"status":"([a-z_]+)"(,"agent_id":"(?:[^"\\]|\\.)*")?,"last_step":(-?[0-9]+),"attempt":(-?[0-9]+),'
        '"fence":(-?[0-9]+),"updated_at":(-?[0-9]+)(?:,"claim_expires_at":(-?[0-9]+))?(?:,"claim_ttl_ms":-?[0-9]+)?(.*)$');
    IF m IS NULL THEN
        RAISE EXCEPTION 'stored run is not in the layout package state writes';
    END IF;
    v_st := m[1];
    IF v_st NOT IN ('created', 'claimed', 'running') THEN
        outcome := 2;
        RETURN;
    END IF;
    v_ag := coalesce(m[2], '');
    -- The claim is live while the run has an agent and an expiry after now.
    IF v_ag <> '' AND coalesce(m[7]::bigint, 0) > now AND v_ag <> ',"agent_id":' || p_agent_json THEN
        outcome := 3;
        RETURN;
    END IF;
    -- The next revision: the namespace's sequence, unless the namespace is
    -- new or the sequence fell behind the clock (next_rev handles both).
    SELECT n.seq INTO v_seq FROM {{s}}.namespaces n WHERE n.ns = p_ns;
    IF FOUND THEN
        rev := nextval(v_seq);
    END IF;
    IF v_seq IS NULL OR rev < now * 1000 - 100000 THEN
        SELECT n.rev, n.seq INTO rev, v_seq FROM {{s}}.next_rev(p_ns, now * 1000) n;
    END IF;
    v_claim := ',"claim_expires_at":' || (now + p_ttl) || ',"claim_ttl_ms":' || p_ttl || m[8];
    v_old := '{"status":"' || v_st || '"' || v_ag || ',"attempt":' || m[4] || ',"fence":' || m[5] ||
        ',"last_step":' || m[3] || '}';
    IF v_ag <> '' AND coalesce(m[7]::bigint, 0) > now THEN
        -- A heartbeat extends the claim and changes nothing else.
        outcome := 5;
        v_op := 'workflow.heartbeat';
        value := convert_to('{"status":"' || v_st || '"' || v_ag || ',"last_step":' || m[3] || ',"attempt":' ||
            m[4] || ',"fence":' || m[5] || ',"updated_at":' || m[6] || v_claim, 'UTF8');
        INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
        VALUES (p_ns, rev, rev, p_id, v_op, convert_to(v_old, 'UTF8'), NULL, p_agent, now);
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
            IF p_late_lock IS NOT NULL THEN
                PERFORM pg_advisory_xact_lock(p_late_lock);
            END IF;
            INSERT INTO {{s}}.records AS t (ns, key, value, writer, rev, crev, updated_at, expires_at)
            VALUES (p_ns, p_count_key, '\x31', '', rev, rev, now, NULL)
            ON CONFLICT (ns, key) DO UPDATE SET
                value = convert_to((CASE WHEN t.expires_at IS NOT NULL AND t.expires_at <= now THEN 0
                    ELSE {{s}}.int_of(t.value) END + 1)::text, 'UTF8'),
                writer = excluded.writer, rev = excluded.rev,
                crev = CASE WHEN t.expires_at IS NOT NULL AND t.expires_at <= now THEN excluded.crev ELSE t.crev END,
                updated_at = excluded.updated_at, expires_at = NULL;
        END IF;
        v_ag := ',"agent_id":' || p_agent_json;
        v_att := m[4]::bigint + 1;
        v_fence := m[5]::bigint + 1;
        v_new := '{"status":"' || v_st || '"' || v_ag || ',"attempt":' || v_att || ',"fence":' || v_fence ||
            ',"last_step":' || m[3] || '}';
        value := convert_to('{"status":"' || v_st || '"' || v_ag || ',"last_step":' || m[3] || ',"attempt":' ||
            v_att || ',"fence":' || v_fence || ',"updated_at":' || now || v_claim, 'UTF8');
        INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
        VALUES (p_ns, rev, rev, p_id, v_op, convert_to(v_new, 'UTF8'), convert_to(v_old, 'UTF8'), p_agent, now);
    END IF;
    UPDATE {{s}}.records t SET value = claim.value, writer = '', rev = claim.rev, updated_at = now, expires_at = NULL
     WHERE t.ns = p_ns AND t.key = p_key;
    writer := '';
    updated_at := now;
    expires_at := NULL;
END
$$;
