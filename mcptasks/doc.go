// Package mcptasks gives any mcp-go server durable MCP tasks over a
// *state.Store: a long tool call returns a task id at once, the client polls
// the task from any replica behind any load balancer, and the task outlives
// the process that started it.
//
// Both protocol eras are served on the same endpoint:
//
//   - 2026-07-28, the io.modelcontextprotocol/tasks extension: a tools/call of
//     an enabled tool from a client that declared the extension (in the
//     request's _meta clientCapabilities) returns the flat CreateTaskResult
//     (resultType "task"); tasks/get returns the DetailedTask with the
//     result, the error or the outstanding inputRequests inline; tasks/update
//     takes inputResponses; tasks/cancel acknowledges. A client that did not
//     declare the extension gets -32021 on tasks/ requests, and its tools/call
//     runs as a plain call. Over HTTP, Mcp-Name must name the task.
//   - 2025-11-25: capabilities.tasks and execution.taskSupport "optional"; a
//     tools/call with params.task returns {task}; tasks/get, tasks/result
//     (which waits until the task is terminal), tasks/list (the caller's
//     tasks only) and tasks/cancel.
//
// # Use
//
//	s := server.NewMCPServer("my-server", "1.0.0", mcptasks.ServerOptions()...)
//	s.AddTool(reportTool, reportHandler)
//	tasks, err := mcptasks.New(st, s, &mcptasks.Options{Owner: ownerFromToken})
//	tasks.Enable("report")
//	http.Handle("/mcp", auth(tasks.Handler(server.NewStreamableHTTPServer(s, server.WithStateLess(true)))))
//	defer tasks.Close(ctx) // before the store
//
// For stdio, wrap the transport's input and output with Tasks.Stdio and give
// them to server.NewStdioServer(s).Listen. A tool handler learns that it runs
// as a task, its attempt and its deadline from FromContext, and may save
// progress with Execution.Checkpoint and report it with Execution.SetMessage.
// Hosts (a console, a per-tenant limit) read and cancel an owner's tasks with
// Get, List, Cancel and Live.
//
// # How a task is kept
//
// A task is an entry of the store (namespace Options.Namespace, "mcp-tasks")
// holding its owner, the call's params, its status and its outcome, with the
// task's TTL, beside a workflow run whose claim its execution runs under. Both
// are committed before the tools/call is answered, so a tasks/get a moment
// later on another replica finds the task. The task's listing entry and its
// last checkpoint carry the same TTL: when the task expires, every request
// answers as for an unknown task, and the store's sweeper removes its entries
// as it removes any expired entry. The run is deleted (state.Store.DeleteRun)
// as soon as it finishes, which it does once the task is finished or gone: the
// record keeps the outcome, fence and attempt the run held. A run whose
// worker died before deleting it is deleted by a later sweep, and the run of
// a task that expired unfinished is taken over by a sweep, finished and
// deleted. A task's writes keep its content out of history (their events
// record sizes: state.Write.Private), and the same sweep trims the
// namespace's history to Options.HistoryMaxAge (MaxTTL by default).
//
// # Execution: at-least-once, recorded once
//
// The replica that accepted the call claims the task's run and runs the call
// through the server's own HandleMessage, with a context that does not end
// with the HTTP request, so the server's middleware, validation and hooks run
// as for any call. Heartbeats renew the claim every third of
// Options.ClaimTTL. If the process dies, the claim expires and another
// replica's sweep (every Options.SweepInterval) claims the run and runs the
// call again from the start: Execution.Attempt is then greater than 1 and
// Execution.LastCheckpoint returns what the earlier attempt saved. A
// graceful Close gives claims back, so another replica takes over at its
// next sweep. Execution is therefore at-least-once: a handler that has side
// effects must make them safe to repeat (state.Store.Once does that for one
// effect). The outcome is recorded once, fenced by the claim: a worker whose
// claim was taken over cannot write a checkpoint or a result after its
// successor wrote, and once an outcome is recorded no later one replaces it.
//
// The call's context ends when the task is cancelled (from any replica: the
// worker follows the task's entry with the store's WaitKey, which needs no
// polling), when the task's TTL passes, when the claim is lost, or when the
// process closes Tasks. Nothing is recorded for a call stopped by this
// package.
//
// # Results are exact
//
// A call that returns a result, even one with isError true, completes the
// task with exactly that result; only a JSON-RPC error of the call fails it,
// with exactly that error. (The 2025-11-25 text suggests "failed" for
// isError results; the official clients then drop the result, so this
// package keeps the result and follows the 2026-07-28 rule in both eras.)
//
// # Owners and limits
//
// A task belongs to the Owner that Options.Owner returns for the request
// that created it: a namespace and a principal. Every other owner gets, for
// every request about it, the answer for an unknown task (-32602), and
// tasks/list shows each owner its own tasks only. Task ids carry 160 random
// bits. Options.MaxTTL caps a task's TTL (a longer one asked for is cut, as
// 2025-11-25 allows, and the task reports it), and Options.MaxLive bounds an
// owner's unfinished tasks: one more is refused with -32600 naming the limit.
//
// # Input during a task (2026-07-28)
//
// A call that returns an input_required result (multi round-trip requests)
// puts the task in input_required with its inputRequests, under keys prefixed
// with the round ("r1.name"), so that no key is used twice over the task's
// life. tasks/update records answers to outstanding keys (others are
// ignored); when every request of the round is answered, the call runs again
// with the answers and its requestState. A 2025-11-25 task whose call asks for
// input fails: that era delivers such requests on the tasks/result stream,
// which this package does not keep.
//
// # Status notifications
//
// A 2026-07-28 subscriptions/listen that asks for task notifications
// (notifications.taskIds) and nothing else is answered by the front on the
// request's own stream (SSE over HTTP, lines over stdio; Serve,
// HandleStream): it acknowledges the caller's own tasks among the ids, sends
// a notifications/tasks with the task as tasks/get shows it at once and at
// every change (from any replica, through WaitKey), and ends once every task
// followed is finished. A listen asking for other kinds too goes to mcp-go,
// which agrees to no task ids (its subscription filter has none, and the two
// cannot share one stream); a listen asking for task ids from a client that
// did not declare the extension gets -32021. 2025-11-25's optional
// notifications/tasks/status are not sent: that era delivers them on a
// session's stream, which a stateless replica does not keep.
//
// # Not done
//
// Tools are enabled as "optional": a "required" tool would make mcp-go
// refuse the plain call this package runs it through.
package mcptasks
