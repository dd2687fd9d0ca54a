-- Schema version 2 of package pgstate: history trimming as it is written
-- (backend.HistoryTrimmer).

-- trim removes the oldest events of namespace p_ns beyond its p_keep
-- newest, at most p_limit of them, unless another process is trimming the
-- namespace: then it returns trimmed = false at once, having waited for
-- nothing (pg_try_advisory_xact_lock on p_lock). Event ids have gaps (they
-- come from the revision sequence), so the edge is found by walking the
-- newest p_keep entries of the (ns, id) index, backwards, without touching
-- the table; the delete then costs what it removes.
CREATE FUNCTION {{s}}.trim(p_ns text, p_lock bigint, p_keep bigint, p_limit integer,
    OUT trimmed boolean, OUT events bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_edge bigint;
BEGIN
    events := 0;
    trimmed := pg_try_advisory_xact_lock(p_lock);
    IF NOT trimmed THEN
        RETURN;
    END IF;
    SELECT e.id INTO v_edge FROM {{s}}.events e WHERE e.ns = p_ns ORDER BY e.id DESC OFFSET p_keep LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    WITH d AS (
        DELETE FROM {{s}}.events e
         WHERE e.ns = p_ns AND e.id IN (SELECT t.id FROM {{s}}.events t WHERE t.ns = p_ns AND t.id <= v_edge
                                         ORDER BY t.id LIMIT p_limit)
        RETURNING 1)
    SELECT count(*) INTO events FROM d;
END
$$;
