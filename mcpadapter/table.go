package mcpadapter

import "github.com/statesidecar/state"

// Parameters several tools share.
var (
	pKey         = param{name: "key", kind: kString, required: true, desc: "The key (any non-empty string, such as plan/42)."}
	pIfVer       = param{name: "if_version", kind: kInt, min: 0, desc: "Only write if the key's current version is this one (the version state_get or state_set returned; 0 = the key must not exist). Otherwise nothing is written and the error names the current version."}
	pRunID       = param{name: "run_id", kind: kString, required: true, desc: "The run's id, as returned by workflow_create or workflow_discover."}
	pLimit       = param{name: "limit", kind: kInt, min: 1, desc: "Maximum number of items in this page."}
	pCursor      = param{name: "cursor", kind: kString, desc: "next_cursor of the previous page, to continue the listing."}
	pResource    = param{name: "resource_id", kind: kString, required: true, desc: "The resource to lock, such as pr:42:comments."}
	pHolder      = param{name: "holder_id", kind: kString, required: true, desc: "Who holds the lease: your agent id."}
	pLeaseTTL    = param{name: "ttl_seconds", kind: kSeconds, required: true, desc: "How long the lease lasts from now, in seconds (fractions allowed)."}
	pSession     = param{name: "session_id", kind: kString, required: true, desc: "The session's id."}
	pWaitTimeout = param{name: "timeout_seconds", kind: kSeconds, max: MaxWaitTimeout, def: DefaultWaitTimeout.Seconds(),
		desc: "How long to wait at most, in seconds (fractions allowed, at most 60). Called as a task, omit it to wait as long as the task lives (its ttl)."}
)

// table is the 21 tools: the Python sidecar's 19 in its registration
// order, then the long-polls.
var table = []tool{
	{
		name:  "state_set",
		title: "Set a key",
		desc: "Store a JSON value under a key (create or overwrite) and return its new version. Any JSON value works, null included. " +
			"ttl_seconds makes the entry expire; a write without ttl_seconds removes an earlier TTL. agent_id records the writer in the history. " +
			"For a safe read-modify-write pass if_version = the version state_get returned: if another agent wrote in between, nothing is written and the error names the current version.",
		params: []param{pKey,
			{name: "value", kind: kJSON, required: true, desc: "The value: any JSON value (object, array, string, number, boolean or null)."},
			{name: "ttl_seconds", kind: kSeconds, desc: "Expire the entry this many seconds from now (fractions allowed). Omit to keep it until deleted."},
			{name: "agent_id", kind: kString, desc: "Your agent id, recorded as the writer."},
			pIfVer},
		hints:  hints{idempotent: true},
		result: setResult{},
		run:    stateSet,
	},
	{
		name:  "state_get",
		title: "Get a key",
		desc: "Read the value stored under a key. found is false and value null when the key is missing or expired (a stored null reads back with found true). " +
			"Also returns the entry's version (for if_version), the agent_id that wrote it, updated_at and expires_at (epoch seconds).",
		params: []param{pKey},
		hints:  hints{readOnly: true, idempotent: true},
		result: getResult{},
		run:    stateGet,
	},
	{
		name:  "state_delete",
		title: "Delete a key",
		desc: "Delete a key. ok is true only when a live key was deleted (false when it was missing or had expired). " +
			"With if_version the key is deleted only if its current version is that one.",
		params: []param{pKey, pIfVer},
		hints:  hints{destructive: true, idempotent: true},
		result: deleteResult{},
		run:    stateDelete,
	},
	{
		name:  "state_list",
		title: "List keys",
		desc: "List the live keys that start with prefix (literal and case-sensitive; omit it for all keys), in byte order. " +
			"A page holds up to limit keys (default 1000); when next_cursor is not null, call again with cursor = next_cursor for more.",
		params: []param{{name: "prefix", kind: kString, desc: "Only keys starting with this exact text."}, pLimit, pCursor},
		hints:  hints{readOnly: true, idempotent: true},
		result: listResult{},
		run:    stateList,
	},
	{
		name:  "workflow_create",
		title: "Create a workflow run",
		desc: "Register a new workflow run in status 'created' and return its run_id. Tags (string values) let workers find it with workflow_discover. " +
			"Lifecycle: created → claimed (workflow_claim) → running (workflow_checkpoint) → done | failed (workflow_checkpoint with status). " +
			"Fan-out/fan-in: create the aggregating run with join=true (it waits, status 'waiting', and cannot be claimed), then each piece of work with parent_run_id = its run_id; " +
			"when every child is done or failed the parent becomes 'created' and exactly one aggregator claims it. " +
			"Pass an idempotency_key when you may retry: a retry with the same key returns the same run with replayed=true instead of creating another.",
		params: []param{
			{name: "name", kind: kString, required: true, desc: "What the run does, such as pr-review-42."},
			{name: "tags", kind: kTags, desc: "String labels to discover the run by, such as {\"pipeline\": \"pr-review\"}."},
			{name: "parent_run_id", kind: kString, desc: "Create the run as a child of this open run (its status counts the children; a join parent waits for them)."},
			{name: "join", kind: kBool, desc: "Make this run a join parent: it waits until it has children and all of them are done or failed, then becomes claimable."},
			{name: "idempotency_key", kind: kString, desc: "A key naming this request (such as order-7-refund): a retry with the same key within the server's window (24 h unless configured) returns the run the first call made."}},
		hints:  hints{},
		result: createResult{},
		run:    workflowCreate,
	},
	{
		name:  "workflow_discover",
		title: "Find workflow runs",
		desc: "Find workflow runs, newest first: tags matches runs having every given tag pair, status keeps one status, parent_run_id keeps the children of one run, and claimable=true keeps only runs you can claim now " +
			"(created ones, and claimed or running ones whose claim expired because their worker stopped sending heartbeats). " +
			"A page holds up to limit runs (default 100); when next_cursor is not null, call again with cursor = next_cursor. " +
			"A worker's loop: workflow_discover(tags, claimable=true) → workflow_claim → workflow_resume → workflow_checkpoint for each step.",
		params: []param{
			{name: "tags", kind: kTags, desc: "Only runs having all of these tags."},
			{name: "status", kind: kEnum, enum: statusNames, desc: "Only runs in this status."},
			{name: "claimable", kind: kBool, desc: "Only runs that can be claimed now, including crashed workers' runs."},
			{name: "parent_run_id", kind: kString, desc: "Only the children of this run."},
			pLimit, pCursor},
		hints:  hints{readOnly: true, idempotent: true},
		result: runsResult{},
		run:    workflowDiscover,
	},
	{
		name:  "workflow_claim",
		title: "Claim a workflow run",
		desc: "Atomically claim a run for agent_id: of any number of racing workers exactly one gets claimed=true; the others get claimed=false with the reason and should pick another run. " +
			"The claim lasts claim_ttl_seconds unless kept alive: every workflow_checkpoint is a heartbeat that extends it, and so is calling workflow_claim again as the holder. " +
			"When a claim expires (its worker crashed or stalled) any worker may claim the run again: attempt goes up, a larger fence is issued, and the new worker calls workflow_resume to continue from the last checkpoint. " +
			"Pass the returned fence and your agent_id to workflow_checkpoint so that a worker whose claim was taken over cannot overwrite its successor's work. Done and failed runs cannot be claimed.",
		params: []param{pRunID,
			{name: "agent_id", kind: kString, required: true, desc: "Your agent id."},
			{name: "claim_ttl_seconds", kind: kSeconds, desc: "How long the claim lasts without a heartbeat, in seconds. Defaults to the server's setting (600 unless configured)."}},
		hints:  hints{},
		result: claimResult{},
		run:    workflowClaim,
	},
	{
		name:  "workflow_checkpoint",
		title: "Checkpoint a workflow step",
		desc: "Save the output of one step of a run: replaying a step overwrites its output, and last_step only goes up. The run moves to 'running', and the call is a heartbeat that extends your claim. " +
			"Pass agent_id and fence (from workflow_claim) so that the write is refused if your claim expired and another worker took the run over; then stop working on it. " +
			"Finish the run with its last checkpoint: status 'done' on success or 'failed', in the same atomic write; a finished run accepts no more checkpoints. " +
			"Checkpointing an unknown run is an error.",
		params: []param{pRunID,
			{name: "step", kind: kInt, min: 0, required: true, desc: "The step number (an integer >= 0)."},
			{name: "output", kind: kJSON, required: true, desc: "The step's output: any JSON value."},
			{name: "agent_id", kind: kString, desc: "Your agent id: the write is refused unless you hold the run's live claim."},
			{name: "fence", kind: kInt, min: 1, desc: "The fence workflow_claim returned: the write is refused unless your claim still carries it."},
			{name: "status", kind: kEnum, enum: []string{"done", "failed"}, desc: "Finish the run: done or failed."}},
		hints:  hints{idempotent: true},
		result: checkpointResult{},
		run:    workflowCheckpoint,
	},
	{
		name:  "workflow_resume",
		title: "Resume a workflow run",
		desc: "Get what a worker needs to continue a run: last_step, the output of every checkpointed step (step_outputs, keyed by step number as a string, ascending) and the run itself (meta). " +
			"Call it after workflow_claim, above all when attempt > 1 (a previous worker crashed), and continue after last_step.",
		params: []param{pRunID},
		hints:  hints{readOnly: true, idempotent: true},
		result: resumeResult{},
		run:    workflowResume,
	},
	{
		name:   "workflow_status",
		title:  "Get a workflow run's status",
		desc:   "Get a run's status, last_step, agent_id, timestamps, attempt, fence and claim expiry, without its step outputs; for a child run its parent_run_id, and for a parent the counts of its children by status (children; null for a run without children).",
		params: []param{pRunID},
		hints:  hints{readOnly: true, idempotent: true},
		result: statusResult{},
		run:    workflowStatus,
	},
	{
		name:  "workflow_list",
		title: "List workflow runs",
		desc: "List all workflow runs, newest first. A page holds up to limit runs (default 100); when next_cursor is not null, call again with cursor = next_cursor. " +
			"Use workflow_discover to filter by tags, status or claimability.",
		params: []param{pLimit, pCursor},
		hints:  hints{readOnly: true, idempotent: true},
		result: runsResult{},
		run:    workflowList,
	},
	{
		name:  "lease_acquire",
		title: "Acquire a lease",
		desc: "Take an exclusive, expiring lock on resource_id, for example before a side effect only one agent may perform. " +
			"acquired=false when another holder has it: holder and expires_at say who and until when. Acquiring again as the current holder succeeds and extends the lease, so retrying is safe. " +
			"Extend a long task's lease with lease_renew before it expires and free it with lease_release. " +
			"fence grows with every new holder: give it to whatever the lease protects so that it can refuse a holder whose lease expired.",
		params: []param{pResource, pHolder, pLeaseTTL},
		hints:  hints{},
		result: acquireResult{},
		run:    leaseAcquire,
	},
	{
		name:  "lease_release",
		title: "Release a lease",
		desc: "Free your lease on resource_id so that others can take it at once. released=false when holder_id does not hold a live lease " +
			"(it expired, another holder took it, or there was none); releasing twice is harmless.",
		params: []param{pResource, pHolder},
		hints:  hints{idempotent: true},
		result: releaseResult{},
		run:    leaseRelease,
	},
	{
		name:  "lease_renew",
		title: "Renew a lease",
		desc: "Extend your live lease on resource_id to expire ttl_seconds from now (a heartbeat). " +
			"renewed=false and expires_at=null when holder_id no longer holds it (it expired or another holder took it): stop the protected work, or lease_acquire it again.",
		params: []param{pResource, pHolder,
			{name: "ttl_seconds", kind: kSeconds, required: true, desc: "The lease's new lifetime from now, in seconds (fractions allowed)."}},
		hints:  hints{},
		result: renewResult{},
		run:    leaseRenew,
	},
	{
		name:  "sidecar_health",
		title: "Check health",
		desc: "Check the state server: status ('ok' or 'error: <reason>'), backend, uptime_s, version, and the numbers of keys, workflow runs (also by status), " +
			"leases, sessions and history entries in your namespace.",
		hints:  hints{readOnly: true, idempotent: true},
		result: healthResult{},
		run:    sidecarHealth,
	},
	{
		name:  "sidecar_reset",
		title: "Reset all state",
		desc: "Irreversibly delete ALL state in your namespace: keys, workflow runs and their outputs, leases, sessions and history. Returns the number of records cleared. " +
			"It is disabled unless the server's operator enabled it. Never call it to recover from an error.",
		hints:  hints{destructive: true, idempotent: true},
		result: resetResult{},
		run:    sidecarReset,
	},
	{
		name:  "session_save",
		title: "Save a session",
		desc: "Save a snapshot of an agent's conversational context (a JSON object) under session_id, replacing any earlier snapshot (nothing is merged). " +
			"Get it back after a crash or a hand-off with session_restore.",
		params: []param{pSession,
			{name: "context", kind: kObject, required: true, desc: "The snapshot: a JSON object."}},
		hints:  hints{idempotent: true},
		result: saveResult{},
		run:    sessionSave,
	},
	{
		name:   "session_restore",
		title:  "Restore a session",
		desc:   "Get the snapshot saved under session_id; found=false and context=null when there is none.",
		params: []param{pSession},
		hints:  hints{readOnly: true, idempotent: true},
		result: restoreResult{},
		run:    sessionRestore,
	},
	{
		name:  "history_log",
		title: "Read the audit history",
		desc: "Read the audit log of state changes, newest first: key writes and deletes; workflow create, claim, reclaim, heartbeat, checkpoint, finish and release, and link, join, rejoin and replay (children, join parents, idempotent retries); " +
			"lease acquire, renew, release and takeover; session saves and deletes. Each entry has op, new_value, previous_value, agent_id (the id the writer claimed), principal (who the server authenticated; absent when none) and written_at (epoch seconds). " +
			"Old entries are trimmed by the server's retention.",
		params: []param{
			{name: "key", kind: kString, desc: "Only entries of this key, run id, resource id or session id (exact match)."},
			{name: "n", kind: kInt, min: 1, def: 10, desc: "How many entries to return (1 to 1000)."}},
		hints:  hints{readOnly: true, idempotent: true},
		result: historyResult{},
		run:    historyLog,
	},
	{
		name:  "state_wait",
		title: "Wait for a key to change",
		desc: "Wait until a key changes, instead of polling state_get: returns as soon as the key's version is greater than after_version " +
			"(changed true, with the entry as state_get shows it), or the key is deleted or expires when after_version is not 0 (changed true, found false), " +
			"or timeout_seconds pass (changed false, with the entry as it is). after_version 0 waits for the key to exist. " +
			"Loop: call with after_version = the version you have; on changed act and call again with the new version; on changed false just call again.",
		params: []param{pKey,
			{name: "after_version", kind: kInt, min: 0, def: 0, desc: "The version you have already seen (state_get's version); 0 = none: wait for the key to exist."},
			pWaitTimeout},
		hints:  hints{readOnly: true, idempotent: true},
		result: stateWaitResult{},
		run:    stateWait,
	},
	{
		name:  "workflow_wait",
		title: "Wait for a workflow run's status",
		desc: "Wait until a workflow run reaches one of the statuses in until (default done or failed), instead of polling workflow_status: " +
			"returns at once if it already has (reached true), as soon as it does, or when timeout_seconds pass (reached false). " +
			"Either way the result shows the run's status as workflow_status does.",
		params: []param{pRunID,
			{name: "until", kind: kEnumList, enum: statusNames, desc: "The statuses to wait for (default [\"done\", \"failed\"])."},
			pWaitTimeout},
		hints:  hints{readOnly: true, idempotent: true},
		result: workflowWaitResult{},
		run:    workflowWait,
	},
}

// statusNames are the run statuses, which workflow_discover accepts.
var statusNames = func() []string {
	names := make([]string, len(state.Statuses))
	for i, s := range state.Statuses {
		names[i] = string(s)
	}
	return names
}()
