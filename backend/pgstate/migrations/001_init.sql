-- Schema version 1 of package pgstate. {{s}} is the schema, quoted as an
-- identifier; {{s_lit}} is its name as a string literal. A released
-- migration is never edited: later versions add files.
--
-- Times are integer Unix milliseconds, as everywhere in package backend.
-- Keys are bytea so that they order bytewise and accept any cursor bytes
-- whatever the database's encoding and collation.

-- One row per namespace that was ever written to. seq is the namespace's
-- revision sequence (versions, fences and event ids come from it): per
-- namespace, so that one tenant cannot watch another's write rate, never
-- reset, and kept at or above the commits' clock in microseconds (the
-- database's, or an injected one: see next_rev), so that neither a Reset nor a failover to a replica that
-- missed the latest writes can hand out a revision twice.
CREATE TABLE {{s}}.namespaces (
    ns  text COLLATE "C" PRIMARY KEY,
    seq regclass NOT NULL
);

CREATE TABLE {{s}}.records (
    ns         text COLLATE "C" NOT NULL,
    key        bytea  NOT NULL,
    value      bytea  NOT NULL,
    writer     text   NOT NULL,
    rev        bigint NOT NULL,
    crev       bigint NOT NULL,
    updated_at bigint NOT NULL,
    expires_at bigint,           -- NULL: never
    PRIMARY KEY (ns, key)        -- point reads, ordered prefix listing and counting
) WITH (fillfactor = 85);        -- room for HOT updates of a record in place
CREATE INDEX records_expiry ON {{s}}.records (expires_at) WHERE expires_at IS NOT NULL; -- sweeping

CREATE TABLE {{s}}.events (
    ns     text COLLATE "C" NOT NULL,
    id     bigint NOT NULL,
    rev    bigint NOT NULL,
    key    bytea  NOT NULL,
    op     text   NOT NULL,
    value  bytea,
    prev   bytea,
    writer text   NOT NULL,
    at     bigint NOT NULL,
    PRIMARY KEY (ns, id)         -- history newest first, trimming to a count
);
CREATE INDEX events_key ON {{s}}.events (ns, key, id); -- history of one key
CREATE INDEX events_at ON {{s}}.events (at);           -- trimming by age

-- Shards of the counters (keys that package state keeps with backend.OpAdd
-- only, under layout.CountPrefix): a commit that only adds to a counter
-- takes the counter's lock shared and adds to one of 32 rows, one that no
-- other adder in flight writes (see add_shared), so that concurrent
-- adders neither wait for each other's lock nor for each other's row, and
-- share the fsync of group commit like writers of different keys. The
-- counter's record in records stays (its base: value, create revision,
-- expiry) and shards exist only while it never expires; its value is the
-- base's plus the shards' deltas, its revision, writer and time the
-- latest write's (see merged). A write that reads or conditions on a
-- counter, puts or deletes it, and every read of one, takes its lock
-- exclusively: it waits for the adders in flight and sees an exact sum.
CREATE TABLE {{s}}.counters (
    ns         text COLLATE "C" NOT NULL,
    key        bytea  NOT NULL,
    shard      integer NOT NULL,
    delta      bigint NOT NULL,
    rev        bigint NOT NULL,
    writer     text   NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (ns, key, shard)
);

-- One row per process listening for the schema's changes (Driver.Notify),
-- so that writers send notifications only when someone listens: a
-- notifying commit takes a lock that serialises every notifying commit of
-- the database, which costs concurrent writers much of their throughput.
-- A listener refreshes its row well before it expires; a row left by a
-- listener that died stops counting when it expires.
CREATE TABLE {{s}}.listeners (
    id         text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

-- go_json encodes t as a JSON string exactly as Go's encoding/json does
-- (which also escapes <, >, &, U+2028 and U+2029), so that history written
-- here reads byte for byte as history written by package state. STABLE,
-- as to_json is: so that calls inline (an IMMUTABLE function calling a
-- STABLE one does not, and costs a SQL function call, several µs).
CREATE FUNCTION {{s}}.go_json(t text) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
    SELECT replace(replace(replace(replace(replace(to_json(t)::text,
        '<', '\u003c'), '>', '\u003e'), '&', '\u0026'), chr(8232), '\u2028'), chr(8233), '\u2029')
$$;

-- int_of reads v as a decimal integer, as backend.OpAdd does: 0 when v is
-- NULL or not a decimal integer (an optional sign and up to 18 digits).
CREATE FUNCTION {{s}}.int_of(v bytea) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN encode(v, 'escape') ~ '^[+-]?[0-9]{1,18}$' THEN encode(v, 'escape')::bigint ELSE 0 END
$$;

-- shard_of picks the shard of counter p_key that the caller's commit adds
-- to: the first, from the server process's id modulo 32 on, whose
-- advisory lock (a hash of the schema, namespace and counter, xor the
-- shard's number) the commit gets without waiting, held until it ends; so
-- concurrent adders write rows of their own, however the process ids
-- fall. With more than 32 adders of one counter in flight the last ones
-- share rows, and wait for each other's row locks. (Statements without
-- queries only: called in an expression, it costs no executor start.)
CREATE FUNCTION {{s}}.shard_of(p_ns text, p_key bytea) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_lock bigint := hashtextextended({{s_lit}} || ' shard ' || p_ns || ' ' || encode(p_key, 'hex'), 0);
    v_pid integer := pg_backend_pid() % 32;
BEGIN
    FOR i IN 0 .. 31 LOOP
        IF pg_try_advisory_xact_lock(v_lock # ((v_pid + i) % 32)) THEN
            RETURN (v_pid + i) % 32;
        END IF;
    END LOOP;
    RETURN v_pid;
END
$$;

-- add_shared adds p_delta to counter p_key (see the counters table) for
-- a commit at revision p_rev and time p_now that holds the counter's lock
-- shared: to a shard no other adder in flight writes, after making sure
-- the base exists and never expires (an absent or expired one is a new
-- counter of 0, created at p_rev; a live one with an expiry keeps its
-- value and loses the expiry, as an OpAdd without TTL writes none). In the
-- common case the base is there without an expiry and only the shard's
-- row is written.
--
-- The shard: see shard_of. A writer adds to its counters in key order, so
-- that two writers sharing rows of two counters cannot wait for each
-- other in a cycle.
CREATE FUNCTION {{s}}.add_shared(p_ns text, p_key bytea, p_delta bigint, p_writer text, p_at bigint,
    p_rev bigint, p_now bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_shard integer := {{s}}.shard_of(p_ns, p_key);
BEGIN
    -- The common case in one statement: the base is there without an
    -- expiry, and only the shard's row is written.
    INSERT INTO {{s}}.counters AS c (ns, key, shard, delta, rev, writer, updated_at)
    SELECT p_ns, p_key, v_shard, p_delta, p_rev, p_writer, p_at
     WHERE EXISTS (SELECT FROM {{s}}.records r WHERE r.ns = p_ns AND r.key = p_key AND r.expires_at IS NULL)
    ON CONFLICT (ns, key, shard) DO UPDATE SET
        delta = c.delta + excluded.delta,
        writer = CASE WHEN excluded.rev > c.rev THEN excluded.writer ELSE c.writer END,
        updated_at = CASE WHEN excluded.rev > c.rev THEN excluded.updated_at ELSE c.updated_at END,
        rev = greatest(c.rev, excluded.rev);
    IF FOUND THEN
        RETURN;
    END IF;
    -- Adders of one counter meet here once: the first locks the row, the
    -- others find it done when it commits.
    UPDATE {{s}}.records r
       SET value = CASE WHEN r.expires_at <= p_now THEN '\x30' ELSE r.value END,
           crev = CASE WHEN r.expires_at <= p_now THEN p_rev ELSE r.crev END,
           writer = p_writer, rev = p_rev, updated_at = p_at, expires_at = NULL
     WHERE r.ns = p_ns AND r.key = p_key AND r.expires_at IS NOT NULL;
    IF NOT FOUND THEN
        INSERT INTO {{s}}.records (ns, key, value, writer, rev, crev, updated_at, expires_at)
        VALUES (p_ns, p_key, '\x30', p_writer, p_rev, p_rev, p_at, NULL)
        ON CONFLICT (ns, key) DO NOTHING;
    END IF;
    INSERT INTO {{s}}.counters AS c (ns, key, shard, delta, rev, writer, updated_at)
    VALUES (p_ns, p_key, v_shard, p_delta, p_rev, p_writer, p_at)
    ON CONFLICT (ns, key, shard) DO UPDATE SET
        delta = c.delta + excluded.delta,
        writer = CASE WHEN excluded.rev > c.rev THEN excluded.writer ELSE c.writer END,
        updated_at = CASE WHEN excluded.rev > c.rev THEN excluded.updated_at ELSE c.updated_at END,
        rev = greatest(c.rev, excluded.rev);
END
$$;

-- merged reads the records p_keys of namespace p_ns, in order, absent ones
-- as a row of NULLs after the key: a counter with shards as one record,
-- the base's plus the shards' deltas, at the latest write's revision,
-- writer and time. The caller holds the locks of the counters exclusively
-- (or the namespace's), so that no adder is in flight and the sum is
-- exact.
CREATE FUNCTION {{s}}.merged(p_ns text, p_keys bytea[])
RETURNS TABLE (key bytea, value bytea, writer text, rev bigint, crev bigint, updated_at bigint, expires_at bigint)
LANGUAGE sql STABLE AS $$
    SELECT k.key,
           CASE WHEN c.d IS NULL THEN r.value ELSE convert_to(({{s}}.int_of(r.value) + c.d)::text, 'UTF8') END,
           CASE WHEN c.rev > r.rev THEN c.writer ELSE r.writer END,
           greatest(r.rev, c.rev), r.crev,
           CASE WHEN c.rev > r.rev THEN c.upd ELSE r.updated_at END, r.expires_at
      FROM unnest(p_keys) WITH ORDINALITY AS k(key, i)
      LEFT JOIN LATERAL (SELECT t.* FROM {{s}}.records t WHERE t.ns = p_ns AND t.key = k.key LIMIT 1) r ON true
      LEFT JOIN LATERAL (
          SELECT sum(x.delta)::bigint AS d, max(x.rev) AS rev,
                 (array_agg(x.writer ORDER BY x.rev DESC))[1] AS writer,
                 (array_agg(x.updated_at ORDER BY x.rev DESC))[1] AS upd
            FROM {{s}}.counters x WHERE x.ns = p_ns AND x.key = k.key) c ON r.key IS NOT NULL
     ORDER BY k.i
$$;

-- read_counters reads p_keys as GetMany does when some are counters: it
-- first takes the counters' locks exclusively (p_locks, sorted; p_excl:
-- the namespace's instead, when there are too many), so that it waits for
-- the adders in flight, then reads every key with merged, in a statement
-- of its own that sees what they committed. Each row also gives the time
-- the read was evaluated at.
CREATE FUNCTION {{s}}.read_counters(p_ns text, p_now bigint, p_nslock bigint, p_excl boolean,
    p_locks bigint[], p_keys bytea[])
RETURNS TABLE (key bytea, value bytea, writer text, rev bigint, crev bigint,
    updated_at bigint, expires_at bigint, now bigint)
LANGUAGE plpgsql AS $$
BEGIN
    IF p_excl THEN
        PERFORM pg_advisory_xact_lock(p_nslock);
    ELSE
        PERFORM pg_advisory_xact_lock(h) FROM unnest(p_locks) AS h;
    END IF;
    RETURN QUERY
    SELECT m.key, m.value, m.writer, m.rev, m.crev, m.updated_at, m.expires_at,
           coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
      FROM {{s}}.merged(p_ns, p_keys) m;
END
$$;

-- list_counted lists the live records of namespace p_ns from p_lower
-- (p_after: after it) up to p_end (NULL: no bound), at most p_limit, in
-- key order, as List does when the range holds counters: under the
-- namespace's lock taken exclusively, so that no adder is in flight, with
-- each counter as merged reads it.
CREATE FUNCTION {{s}}.list_counted(p_ns text, p_nslock bigint, p_lower bytea, p_after boolean, p_end bytea,
    p_now bigint, p_limit integer)
RETURNS TABLE (key bytea, value bytea, writer text, rev bigint, crev bigint, updated_at bigint, expires_at bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_now bigint := coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
    v_keys bytea[];
BEGIN
    PERFORM pg_advisory_xact_lock(p_nslock);
    IF p_after THEN
        v_keys := ARRAY(SELECT r.key FROM {{s}}.records r
             WHERE r.ns = p_ns AND r.key > p_lower AND (p_end IS NULL OR r.key < p_end)
               AND (r.expires_at IS NULL OR r.expires_at > v_now)
             ORDER BY r.key LIMIT p_limit);
    ELSE
        v_keys := ARRAY(SELECT r.key FROM {{s}}.records r
             WHERE r.ns = p_ns AND r.key >= p_lower AND (p_end IS NULL OR r.key < p_end)
               AND (r.expires_at IS NULL OR r.expires_at > v_now)
             ORDER BY r.key LIMIT p_limit);
    END IF;
    RETURN QUERY SELECT m.* FROM {{s}}.merged(p_ns, v_keys) m;
END
$$;

-- create_ns registers namespace p_ns and creates its revision sequence,
-- starting at p_floor, the commit's time in microseconds. Concurrent first
-- writers of a namespace serialise on an advisory lock; the loser finds the
-- row.
CREATE FUNCTION {{s}}.create_ns(p_ns text, p_floor bigint) RETURNS regclass
LANGUAGE plpgsql AS $$
DECLARE
    v_seq regclass;
    v_name text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('pgstate create_ns ' || {{s_lit}}, 0));
    SELECT n.seq INTO v_seq FROM {{s}}.namespaces n WHERE n.ns = p_ns;
    IF FOUND THEN
        RETURN v_seq;
    END IF;
    v_name := 'rev_' || md5(p_ns);
    EXECUTE format('CREATE SEQUENCE %I.%I AS bigint START WITH %s', {{s_lit}}, v_name, greatest(p_floor, 1));
    v_seq := format('%I.%I', {{s_lit}}, v_name)::regclass;
    INSERT INTO {{s}}.namespaces (ns, seq) VALUES (p_ns, v_seq);
    RETURN v_seq;
END
$$;

-- next_rev draws the next revision of namespace p_ns. The caller holds the
-- locks of every key it writes, so a key's revisions increase in the order
-- of its writes. p_floor is the commit's time in microseconds: the
-- database clock's, or the injected clock's (so that revisions under an
-- injected clock depend on it and on the writes only, not on when a test
-- runs). When the sequence has fallen more than 100 ms behind p_floor it is
-- first moved up to it:
-- revisions then stay above every revision handed out before a failover to
-- a replica that missed the latest writes, or before a restore from backup,
-- since those happened at an earlier time. The move happens under a
-- session-level advisory lock held only around setval, so that no two moves
-- race and no commit waits for another's.
CREATE FUNCTION {{s}}.next_rev(p_ns text, p_floor bigint, OUT rev bigint, OUT seq regclass)
LANGUAGE plpgsql AS $$
DECLARE
    v_floor bigint;
    v_lock bigint;
BEGIN
    SELECT n.seq INTO seq FROM {{s}}.namespaces n WHERE n.ns = p_ns;
    IF NOT FOUND THEN
        seq := {{s}}.create_ns(p_ns, p_floor);
    END IF;
    rev := nextval(seq);
    v_floor := p_floor;
    IF rev >= v_floor - 100000 THEN
        RETURN;
    END IF;
    v_lock := hashtextextended('pgstate reseed ' || seq::oid::text, 0);
    PERFORM pg_advisory_lock(v_lock);
    BEGIN
        EXECUTE format('SELECT setval(%L::regclass, %s) FROM %s WHERE last_value < %s',
            seq::text, v_floor, seq::text, v_floor - 100000);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM pg_advisory_unlock(v_lock);
        RAISE;
    END;
    PERFORM pg_advisory_unlock(v_lock);
    rev := nextval(seq);
END
$$;

-- changed tells the schema's listeners, if any, that namespace p_ns
-- changed: a notification on the schema's channel, delivered if and when
-- the caller's transaction commits, with the namespace as payload ('' when
-- it is too long for one: any namespace). A writer checks for listeners
-- (here, for reset; draw, set, lease and claim check themselves) in a
-- statement after the one that took its announcement lock (see draw),
-- whose snapshot is taken after it, so that a listener that registers in
-- between finds the writer in pg_locks and waits for it (see
-- await_writers).
CREATE FUNCTION {{s}}.changed(p_ns text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM {{s}}.listeners l WHERE l.expires_at > clock_timestamp()) THEN
        PERFORM pg_notify({{chan_lit}}, CASE WHEN octet_length(p_ns) < 7900 THEN p_ns ELSE '' END);
    END IF;
END
$$;

-- await_writers waits, at most p_wait_ms, until every transaction that was
-- drawing revisions when it started (holding an announcement lock, see
-- draw, in any schema of the database) has ended, and reports whether they
-- all did. A listener calls it after its row in listeners committed: a
-- writer that did not see the row then has ended, its changes visible.
CREATE FUNCTION {{s}}.await_writers(p_wait_ms integer) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_end timestamptz := clock_timestamp() + p_wait_ms * interval '1 millisecond';
    v_db oid := (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
    v_txs text[];
BEGIN
    SELECT array_agg(DISTINCT k.virtualtransaction) INTO v_txs
      FROM pg_locks k WHERE k.locktype = 'advisory' AND k.objsubid = 2 AND k.database = v_db;
    WHILE v_txs IS NOT NULL LOOP
        IF clock_timestamp() >= v_end THEN
            RETURN false;
        END IF;
        PERFORM pg_sleep(0.001);
        SELECT array_agg(DISTINCT k.virtualtransaction) INTO v_txs
          FROM pg_locks k WHERE k.locktype = 'advisory' AND k.objsubid = 2 AND k.database = v_db
           AND k.virtualtransaction = ANY (v_txs);
    END LOOP;
    RETURN true;
END
$$;

-- draw draws the next revision of namespace p_ns for a write at p_now
-- (Unix ms) that holds the namespace's lock and the locks of the keys it
-- writes, and tells listeners that p_ns changed (see changed).
--
-- Revisions come from the namespace's sequence (see next_rev), before the
-- writer commits: a writer may commit revision 11 while revision 10 is
-- still in flight. So that a reader of history never moves past an event
-- that is not visible yet (see history), a writer first announces a lower
-- bound of the revisions it is about to draw: the sequence's last value
-- plus one, held until it commits or rolls back as a shared advisory lock
-- on two int4 keys (the bound's high and low 32 bits, so that pg_locks
-- shows it whole as classid and objid, with objsubid 2; the driver's other
-- advisory locks are bigint ones, objsubid 1). A writer that draws a
-- revision has announced it before, so a reader that reads the sequence
-- and then pg_locks finds every revision drawn up to what it read either
-- announced or committed. The lock waits for nothing: no one takes it
-- exclusively.
--
-- Each statement costs an executor start, and set, lease and claim, the
-- hot paths, inline these steps with their own statements (announcing
-- along with their locks, checking for listeners along with their read):
-- here the lookup of the sequence, its last value and the announcement
-- are one statement, the check for listeners (which must see the
-- listeners registered before the announcement, see changed) a second.
CREATE FUNCTION {{s}}.draw(p_ns text, p_now bigint, OUT rev bigint, OUT seq regclass)
LANGUAGE plpgsql AS $$
DECLARE
    v_l record;
BEGIN
    SELECT pg_advisory_xact_lock_shared((a.low >> 32)::integer, a.low::bit(32)::integer), a.seq
      INTO v_l
      FROM (SELECT n.seq, coalesce(pg_sequence_last_value(n.seq), 0) + 1 AS low
              FROM (SELECT) o LEFT JOIN {{s}}.namespaces n ON n.ns = p_ns) a;
    seq := v_l.seq;
    IF seq IS NOT NULL THEN
        rev := nextval(seq);
    END IF;
    IF seq IS NULL OR rev < p_now * 1000 - 100000 THEN
        SELECT n.rev, n.seq INTO rev, seq FROM {{s}}.next_rev(p_ns, p_now * 1000) n;
    END IF;
    PERFORM pg_notify({{chan_lit}}, CASE WHEN octet_length(p_ns) < 7900 THEN p_ns ELSE '' END)
      FROM {{s}}.listeners l WHERE l.expires_at > clock_timestamp() LIMIT 1;
END
$$;

-- history reads the events of namespace p_ns with ids below p_before,
-- newest first, at most p_limit, up to the namespace's settled horizon:
-- the highest id below which no event is still in flight. In three steps,
-- each with a snapshot of its own (a PL/pgSQL function's statements each
-- take one under read committed): the sequence's last value S first, then
-- the smallest bound announced (see draw) by a writer holding p_nslock,
-- the namespace's lock, then the events up to the lesser of S and that
-- bound minus one. A writer that drew an id up to S announced it before S
-- was read, so it is either still in pg_locks, and its ids are above the
-- horizon, or it ended before the events are read, and they are visible
-- (or were rolled back). So a reader that has seen an event sees every
-- earlier one, and one that follows history with a cursor misses none.
-- Under a stricter isolation level than read committed the steps share one
-- snapshot and this no longer holds.
CREATE FUNCTION {{s}}.history(p_ns text, p_nslock bigint, p_before bigint, p_limit integer)
RETURNS TABLE (id bigint, rev bigint, key bytea, op text, value bytea, prev bytea, writer text, at bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_seq regclass;
    v_h bigint;
    v_low bigint;
BEGIN
    SELECT n.seq INTO v_seq FROM {{s}}.namespaces n WHERE n.ns = p_ns;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_h := coalesce(pg_sequence_last_value(v_seq), 0);
    WITH l AS MATERIALIZED (
        SELECT k.pid, k.objsubid, (k.classid::bigint << 32) | k.objid::bigint AS v
          FROM pg_locks k
         WHERE k.locktype = 'advisory' AND k.objsubid IN (1, 2)
           AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()))
    SELECT min(m.v) INTO v_low
      FROM l m
     WHERE m.objsubid = 2
       AND EXISTS (SELECT FROM l n WHERE n.pid = m.pid AND n.objsubid = 1 AND n.v = p_nslock);
    IF v_low IS NOT NULL THEN
        v_h := least(v_h, v_low - 1);
    END IF;
    RETURN QUERY
    SELECT e.id, e.rev, e.key, e.op, e.value, e.prev, e.writer, e.at
      FROM {{s}}.events e
     WHERE e.ns = p_ns AND e.id < p_before AND e.id <= v_h
     ORDER BY e.id DESC
     LIMIT p_limit;
END
$$;

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
CREATE FUNCTION {{s}}.commit(
    p_ns text, p_now bigint, p_nslock bigint, p_excl boolean, p_locks bigint[],
    p_cond_keys bytea[], p_cond_revs bigint[],
    p_op_kinds smallint[], p_op_keys bytea[], p_op_values bytea[], p_op_writers text[],
    p_op_ttls bigint[], p_op_times bigint[], p_distinct boolean,
    p_ev_keys bytea[], p_ev_ops text[], p_ev_values bytea[], p_ev_prevs bytea[],
    p_ev_prevofs bytea[], p_ev_writers text[], p_ev_times bigint[], p_shared boolean[], p_fold bytea[],
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
            INSERT INTO {{s}}.records AS r (ns, key, value, writer, rev, crev, updated_at, expires_at)
            SELECT p_ns, o.key, o.value, o.writer, rev, rev, o.at, CASE WHEN o.ttl > 0 THEN now + o.ttl END
              FROM unnest(p_op_kinds, p_op_keys, p_op_values, p_op_writers, p_op_ttls, p_op_times)
                   AS o(kind, key, value, writer, ttl, at)
             WHERE o.kind = 1
            ON CONFLICT (ns, key) DO UPDATE SET
                value = excluded.value, writer = excluded.writer, rev = excluded.rev,
                crev = CASE WHEN r.expires_at IS NOT NULL AND r.expires_at <= now THEN excluded.crev ELSE r.crev END,
                updated_at = excluded.updated_at, expires_at = excluded.expires_at;
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
                INSERT INTO {{s}}.records AS r (ns, key, value, writer, rev, crev, updated_at, expires_at)
                VALUES (p_ns, p_op_keys[i], p_op_values[i], p_op_writers[i], rev, rev, p_op_times[i],
                        CASE WHEN p_op_ttls[i] > 0 THEN now + p_op_ttls[i] END)
                ON CONFLICT (ns, key) DO UPDATE SET
                    value = excluded.value, writer = excluded.writer, rev = excluded.rev,
                    crev = CASE WHEN r.expires_at IS NOT NULL AND r.expires_at <= now THEN excluded.crev ELSE r.crev END,
                    updated_at = excluded.updated_at, expires_at = excluded.expires_at;
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

-- set is commit's fast path for its commonest shape, package state's Set:
-- one put and one history event of it (the same value and writer, the
-- record's live value as the previous value, the commit's time), under at
-- most one condition, on the put's key (p_cond: the revision the key must
-- have, NULL for none). It writes what commit would, with one read of the
-- record and no arrays, in three statements (each costs an executor start)
-- and no calls of other PL/pgSQL functions: draw's steps inlined (see
-- draw). The first takes the namespace's lock shared, the key's, then the
-- announcement of the revision it may draw; the second, with a snapshot
-- taken after them, reads the record and whether anyone listens (see
-- changed); the third writes the event and the record. A write whose
-- condition fails has announced a bound it does not draw: readers of
-- history wait for it as for any writer in flight, until it ends.
CREATE FUNCTION {{s}}.set(p_ns text, p_now bigint, p_nslock bigint, p_lock bigint, p_key bytea,
    p_value bytea, p_writer text, p_ttl bigint, p_time bigint, p_cond bigint, p_ev_key bytea, p_ev_op text,
    OUT committed boolean, OUT rev bigint, OUT cur bigint, OUT now bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_l record;
    v_live boolean;
    v_value bytea;
    v_crev bigint;
    v_listen boolean;
BEGIN
    SELECT pg_advisory_xact_lock_shared(p_nslock), pg_advisory_xact_lock(p_lock),
           pg_advisory_xact_lock_shared((a.low >> 32)::integer, a.low::bit(32)::integer), a.seq
      INTO v_l
      FROM (SELECT n.seq, coalesce(pg_sequence_last_value(n.seq), 0) + 1 AS low
              FROM (SELECT) o LEFT JOIN {{s}}.namespaces n ON n.ns = p_ns) a;
    now := coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
    SELECT t.key IS NOT NULL AND (t.expires_at IS NULL OR t.expires_at > now), t.value, t.rev, t.crev,
           EXISTS (SELECT FROM {{s}}.listeners l WHERE l.expires_at > clock_timestamp())
      INTO v_live, v_value, cur, v_crev, v_listen
      FROM (SELECT) o LEFT JOIN {{s}}.records t ON t.ns = p_ns AND t.key = p_key;
    IF NOT v_live THEN
        cur := 0;
    END IF;
    committed := p_cond IS NULL OR p_cond = cur;
    rev := 0;
    IF NOT committed THEN
        RETURN;
    END IF;
    IF v_l.seq IS NOT NULL THEN
        rev := nextval(v_l.seq);
    END IF;
    IF v_l.seq IS NULL OR rev < now * 1000 - 100000 THEN
        SELECT n.rev INTO rev FROM {{s}}.next_rev(p_ns, now * 1000) n;
    END IF;
    IF v_listen THEN
        PERFORM pg_notify({{chan_lit}}, CASE WHEN octet_length(p_ns) < 7900 THEN p_ns ELSE '' END);
    END IF;
    WITH e AS (
        INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
        VALUES (p_ns, rev, rev, p_ev_key, p_ev_op, p_value, CASE WHEN v_live THEN v_value END, p_writer, now))
    INSERT INTO {{s}}.records AS t (ns, key, value, writer, rev, crev, updated_at, expires_at)
    VALUES (p_ns, p_key, p_value, p_writer, rev, CASE WHEN v_live THEN v_crev ELSE rev END, p_time,
            CASE WHEN p_ttl > 0 THEN now + p_ttl END)
    ON CONFLICT (ns, key) DO UPDATE SET
        value = excluded.value, writer = excluded.writer, rev = excluded.rev, crev = excluded.crev,
        updated_at = excluded.updated_at, expires_at = excluded.expires_at;
END
$$;

-- lock_read starts a read-modify-write (Driver.Update): inside the
-- caller's transaction it takes the locks a commit takes (see commit) on the
-- keys it reads, then reads them, one row per key in order (absent keys with
-- a NULL rev), each row also giving the time the read was evaluated at;
-- with p_merge (some keys are counters) each counter as one record (see
-- merged), exact since its lock is held exclusively.
CREATE FUNCTION {{s}}.lock_read(p_ns text, p_now bigint, p_nslock bigint, p_excl boolean,
    p_locks bigint[], p_keys bytea[], p_merge boolean)
RETURNS TABLE (key bytea, value bytea, writer text, rev bigint, crev bigint,
    updated_at bigint, expires_at bigint, now bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_now bigint;
BEGIN
    IF p_excl THEN
        PERFORM pg_advisory_xact_lock(p_nslock);
    ELSE
        PERFORM pg_advisory_xact_lock_shared(p_nslock);
        PERFORM pg_advisory_xact_lock(h) FROM unnest(p_locks) AS h;
    END IF;
    v_now := coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
    IF p_merge THEN -- some keys are counters (see merged)
        RETURN QUERY
        SELECT m.key, m.value, m.writer, m.rev, m.crev, m.updated_at, m.expires_at, v_now
          FROM {{s}}.merged(p_ns, p_keys) m;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT k.key, r.value, r.writer, r.rev, r.crev, r.updated_at, r.expires_at, v_now
      FROM unnest(p_keys) WITH ORDINALITY AS k(key, i)
      LEFT JOIN LATERAL (SELECT t.* FROM {{s}}.records t WHERE t.ns = p_ns AND t.key = k.key LIMIT 1) r ON true
     ORDER BY k.i;
END
$$;

-- lease acquires (p_action 1), renews (2) or releases (3) a lease in one
-- step, following exactly the rules of package state (lease.go) and
-- writing the same record and history event: the record's writer is the
-- holder and its crev the fence. A new tenure's event leaves the fence 0,
-- for history to fill in with the event's revision, as package state does.
-- present/writer/.../value describe the lease after the action when ok (as
-- it was before, for a release), otherwise the live lease that prevented
-- it, if any.
CREATE FUNCTION {{s}}.lease(p_ns text, p_now bigint, p_nslock bigint, p_lock bigint, p_action integer,
    p_resource bytea, p_holder text, p_ttl bigint, p_key bytea, p_value bytea,
    OUT ok boolean, OUT now bigint, OUT takeover boolean, OUT present boolean, OUT writer text,
    OUT rev bigint, OUT crev bigint, OUT updated_at bigint, OUT expires_at bigint, OUT value bytea)
LANGUAGE plpgsql AS $$
DECLARE
    v_l record;
    v_listen boolean;
    v_live boolean;
    v_mine boolean;
    v_rev bigint;
    v_op text;
    v_prev bytea;
    v_value bytea;
    v_fence bigint;
    v_exp bigint;
BEGIN
    -- As set does: the locks and the announcement (see draw) in one
    -- statement, then the record and whether anyone listens (see changed)
    -- in one with a snapshot taken after them, then the writes in one.
    SELECT pg_advisory_xact_lock_shared(p_nslock), pg_advisory_xact_lock(p_lock),
           pg_advisory_xact_lock_shared((a.low >> 32)::integer, a.low::bit(32)::integer), a.seq
      INTO v_l
      FROM (SELECT n.seq, coalesce(pg_sequence_last_value(n.seq), 0) + 1 AS low
              FROM (SELECT) o LEFT JOIN {{s}}.namespaces n ON n.ns = p_ns) a;
    now := coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
    takeover := false;
    SELECT t.key IS NOT NULL, t.writer, t.rev, t.crev, t.updated_at, t.expires_at, t.value,
           EXISTS (SELECT FROM {{s}}.listeners l WHERE l.expires_at > clock_timestamp())
      INTO present, writer, rev, crev, updated_at, expires_at, value, v_listen
      FROM (SELECT) o LEFT JOIN {{s}}.records t ON t.ns = p_ns AND t.key = p_key;
    v_live := present AND (expires_at IS NULL OR expires_at > now);
    v_mine := v_live AND writer = p_holder;
    -- Release and renew need the caller's live lease; acquire a free one.
    IF NOT v_mine AND (p_action <> 1 OR v_live) THEN
        ok := false;
        present := v_live;
        IF NOT v_live THEN
            writer := NULL; rev := NULL; crev := NULL; updated_at := NULL; expires_at := NULL; value := NULL;
        END IF;
        RETURN;
    END IF;
    ok := true;
    -- The next revision (see draw).
    IF v_l.seq IS NOT NULL THEN
        v_rev := nextval(v_l.seq);
    END IF;
    IF v_l.seq IS NULL OR v_rev < now * 1000 - 100000 THEN
        SELECT n.rev INTO v_rev FROM {{s}}.next_rev(p_ns, now * 1000) n;
    END IF;
    IF v_listen THEN
        PERFORM pg_notify({{chan_lit}}, CASE WHEN octet_length(p_ns) < 7900 THEN p_ns ELSE '' END);
    END IF;
    IF v_live OR (present AND writer <> p_holder) THEN -- the lease as it was, live or taken over
        v_prev := convert_to('{"holder":' || {{s}}.go_json(writer) || ',"fence":' || crev ||
            ',"expires_at":' || coalesce(expires_at, 0) || '}', 'UTF8');
    END IF;
    IF p_action = 3 THEN
        -- The outputs stay the lease as it was.
        WITH e AS (
            INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
            VALUES (p_ns, v_rev, v_rev, p_resource, 'lease.release', NULL, v_prev, p_holder, now))
        DELETE FROM {{s}}.records t WHERE t.ns = p_ns AND t.key = p_key;
        RETURN;
    END IF;
    v_op := 'lease.acquire';
    IF v_mine THEN
        IF p_action = 2 THEN
            v_op := 'lease.renew';
        END IF;
        v_fence := crev;
    ELSE
        IF present AND writer <> p_holder THEN
            v_op := 'lease.takeover';
            takeover := true;
        END IF;
        v_fence := 0;
        crev := v_rev;
    END IF;
    v_exp := now + p_ttl;
    v_value := convert_to('{"holder":' || {{s}}.go_json(p_holder) || ',"fence":' || v_fence ||
        ',"expires_at":' || v_exp || '}', 'UTF8');
    WITH e AS (
        INSERT INTO {{s}}.events (ns, id, rev, key, op, value, prev, writer, at)
        VALUES (p_ns, v_rev, v_rev, p_resource, v_op, v_value, v_prev, p_holder, now))
    INSERT INTO {{s}}.records AS t (ns, key, value, writer, rev, crev, updated_at, expires_at)
    VALUES (p_ns, p_key, p_value, p_holder, v_rev, crev, now, v_exp)
    ON CONFLICT (ns, key) DO UPDATE SET
        value = excluded.value, writer = excluded.writer, rev = excluded.rev, crev = excluded.crev,
        updated_at = excluded.updated_at, expires_at = excluded.expires_at;
    present := true;
    writer := p_holder;
    rev := v_rev;
    updated_at := now;
    expires_at := v_exp;
    value := p_value;
END
$$;

-- reset wipes namespace p_ns (Driver.Reset) under the namespace's lock
-- taken exclusively, so that it waits for the commits in flight and no
-- commit interleaves. The namespace's row and sequence stay: revisions and
-- event ids go on increasing. p_los/p_his are the bounds of the counted
-- prefixes (a NULL upper bound: none).
CREATE FUNCTION {{s}}.reset(p_ns text, p_nslock bigint, p_los bytea[], p_his bytea[],
    OUT records bigint, OUT events bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(p_nslock);
    SELECT coalesce(sum((SELECT count(*) FROM {{s}}.records r
                          WHERE r.ns = p_ns AND r.key >= p.lo AND (p.hi IS NULL OR r.key < p.hi))), 0)
      INTO records
      FROM unnest(p_los, p_his) AS p(lo, hi);
    DELETE FROM {{s}}.records r WHERE r.ns = p_ns;
    DELETE FROM {{s}}.counters c WHERE c.ns = p_ns;
    DELETE FROM {{s}}.events e WHERE e.ns = p_ns;
    GET DIAGNOSTICS events = ROW_COUNT;
    -- Announced as a write (see draw), so that a listener registering
    -- meanwhile waits for it (see changed).
    PERFORM pg_advisory_xact_lock_shared(0, 1);
    PERFORM {{s}}.changed(p_ns);
END
$$;

-- sweep deletes, in every namespace, at most p_limit records expired
-- before p_now - p_grace and at most p_limit events beyond the retention
-- limits (older than p_max_age ms; beyond the p_max_events newest of their
-- namespace), unless another process is sweeping this schema: then it
-- returns swept = false at once, having waited for nothing. Callers are
-- never blocked for long: each call is one short transaction.
CREATE FUNCTION {{s}}.sweep(p_lock bigint, p_now bigint, p_grace bigint, p_limit integer,
    p_max_age bigint, p_max_events bigint,
    OUT swept boolean, OUT records bigint, OUT events bigint, OUT more boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_now bigint;
    v_budget bigint := p_limit;
    v_n bigint;
BEGIN
    records := 0;
    events := 0;
    more := false;
    swept := pg_try_advisory_xact_lock(p_lock);
    IF NOT swept THEN
        RETURN;
    END IF;
    v_now := coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
    WITH d AS (
        DELETE FROM {{s}}.records r
         WHERE r.ctid = ANY (ARRAY(SELECT t.ctid FROM {{s}}.records t
                                    WHERE t.expires_at <= v_now - p_grace LIMIT p_limit))
           AND r.expires_at <= v_now - p_grace
        RETURNING 1)
    SELECT count(*) INTO records FROM d;
    IF p_max_age > 0 THEN
        WITH d AS (
            DELETE FROM {{s}}.events e
             WHERE e.ctid = ANY (ARRAY(SELECT t.ctid FROM {{s}}.events t
                                        WHERE t.at < v_now - p_max_age ORDER BY t.at LIMIT v_budget))
            RETURNING 1)
        SELECT count(*) INTO v_n FROM d;
        events := events + v_n;
        v_budget := v_budget - v_n;
    END IF;
    IF p_max_events > 0 AND v_budget > 0 THEN
        WITH d AS (
            DELETE FROM {{s}}.events e
             WHERE e.ctid = ANY (ARRAY(
                 SELECT x.ctid
                   FROM {{s}}.namespaces n
                  CROSS JOIN LATERAL (SELECT t.id FROM {{s}}.events t WHERE t.ns = n.ns
                                       ORDER BY t.id DESC OFFSET p_max_events LIMIT 1) AS edge
                  CROSS JOIN LATERAL (SELECT t.ctid FROM {{s}}.events t WHERE t.ns = n.ns AND t.id <= edge.id
                                       ORDER BY t.id LIMIT v_budget) AS x
                  LIMIT v_budget))
            RETURNING 1)
        SELECT count(*) INTO v_n FROM d;
        events := events + v_n;
        v_budget := v_budget - v_n;
    END IF;
    more := records >= p_limit OR v_budget <= 0;
END
$$;
