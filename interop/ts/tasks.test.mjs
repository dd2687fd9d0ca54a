// Interop test of durable MCP tasks: the official clients drive the Go
// state sidecar's tasks (workflow_wait and state_wait called as tasks) on
// two replicas behind a round-robin balancer:
//   - 2025-11-25: the TypeScript SDK v1's client.experimental.tasks
//     (callToolStream, getTask, getTaskResult, listTasks, cancelTask), and
//     @modelcontextprotocol/ext-tasks 0.2.2 over @modelcontextprotocol/client
//     (a v1 task session);
//   - 2026-07-28: ext-tasks 0.2.2 with a rawDispatch over fetch and
//     v2RequestFraming (a v2 task session).
// In each era: create on one replica, poll on the other, kill the creator
// with SIGKILL mid-task (the other takes the task over), cancel from the
// other replica, and a foreign token sees nothing.
//
// It is run by TestInteropTasks in cmd/state-sidecar, which starts the two
// replicas (tokens tok-a and tok-b in namespace team, tok-x in namespace
// other; a task claim TTL of 2 s) and sets:
//   BALANCER_URL  the round-robin balancer's base URL
//   CONTROL_URL   GET /replicas, POST /kill/{0,1}, POST /start/{0,1}
//   TOKEN, SAME_NS_TOKEN, FOREIGN_TOKEN, BACKEND
// By hand: npm ci --prefix interop/ts && go test ./cmd/state-sidecar -run InteropTasks -v

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import {
  createTaskSessionFromClient, resultFromTaskOutcome, toolDeclarationFromMcpTool,
} from '@modelcontextprotocol/ext-tasks/client';

const { BALANCER_URL, CONTROL_URL, TOKEN, SAME_NS_TOKEN, FOREIGN_TOKEN, BACKEND } = process.env;
if (!BALANCER_URL || !CONTROL_URL || !TOKEN || !SAME_NS_TOKEN || !FOREIGN_TOKEN) {
  throw new Error('run this through the Go test (go test ./cmd/state-sidecar -run InteropTasks), which starts the replicas and sets BALANCER_URL, CONTROL_URL and the tokens');
}
const WAIT_MS = 90_000;
const info = { name: 'tasks-interop', version: '1.0.0' };

// ---- the cluster -----------------------------------------------------------

async function control(method, path) {
  const res = await fetch(CONTROL_URL + path, { method });
  assert.ok(res.ok, `${method} ${path}: HTTP ${res.status}`);
  return res.status === 204 ? undefined : res.json();
}
const replicas = () => control('GET', '/replicas');

// metric reads one series from a replica's /metrics.
async function metric(base, series) {
  const text = await (await fetch(base + '/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

async function until(what, cond) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// ---- 2025-11-25 clients ----------------------------------------------------

async function v1(base, token = TOKEN) {
  const c = new ClientV1(info, { capabilities: {} });
  await c.connect(new TransportV1(new URL(base + '/mcp'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  await c.listTools(); // tells the client which tools take tasks
  return c;
}

// structured returns a plain call's structured content.
async function structured(c, name, args) {
  const res = await c.callTool({ name, arguments: args });
  assert.ok(!res.isError, `${name}: ${JSON.stringify(res.content)}`);
  return res.structuredContent;
}

// createV1 starts tool as a task through the SDK's callToolStream and
// returns the task id, leaving the stream.
async function createV1(c, name, args, ttl = 120_000) {
  const stream = c.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, { task: { ttl } });
  const first = await stream.next();
  assert.equal(first.value?.type, 'taskCreated', JSON.stringify(first.value));
  await stream.return();
  return first.value.task.taskId;
}

async function finishRun(c, runId) {
  const claim = await structured(c, 'workflow_claim', { run_id: runId, agent_id: 'finisher' });
  await structured(c, 'workflow_checkpoint', { run_id: runId, step: 1, output: 'ok', agent_id: 'finisher', fence: claim.fence, status: 'done' });
}

async function rejectsUnknown(promise, what) {
  await assert.rejects(promise, (e) => e instanceof McpError && e.code === -32602, what);
}

test(`2025-11-25 (SDK v1, ${BACKEND}): callToolStream across the balancer until the wait ends`, async () => {
  const c = await v1(BALANCER_URL);
  const { tools } = await c.listTools();
  for (const t of tools) {
    const task = t.name === 'workflow_wait' || t.name === 'state_wait';
    assert.equal(t.execution?.taskSupport === 'optional', task, `${t.name}: ${JSON.stringify(t.execution)}`);
  }
  const run = await structured(c, 'workflow_create', { name: 'stream' });
  const seen = [];
  let result;
  for await (const msg of c.experimental.tasks.callToolStream({ name: 'workflow_wait', arguments: { run_id: run.run_id } },
    CallToolResultSchema, { task: { ttl: 120_000 } })) {
    seen.push(msg.type);
    if (msg.type === 'taskCreated') await finishRun(c, run.run_id);
    if (msg.type === 'result') result = msg.result;
    if (msg.type === 'error') throw msg.error;
  }
  assert.deepEqual(seen[0], 'taskCreated');
  assert.equal(result.structuredContent.reached, true);
  assert.equal(result.structuredContent.status, 'done');
  // The task's result is the plain call's.
  const plain = await c.callTool({ name: 'workflow_wait', arguments: { run_id: run.run_id } });
  assert.deepEqual(result.structuredContent, plain.structuredContent);
  await c.close();
});

test(`2025-11-25 (SDK v1, ${BACKEND}): created on one replica, polled, listed and waited for on the other; foreign tokens see nothing`, async () => {
  const [a, b] = await replicas();
  const ca = await v1(a);
  const cb = await v1(b);
  const key = `k-${Date.now()}`;
  const id = await createV1(ca, 'state_wait', { key });
  const got = await cb.experimental.tasks.getTask(id);
  assert.equal(got.taskId, id);
  assert.equal(got.status, 'working');
  const { tasks } = await cb.experimental.tasks.listTasks();
  assert.ok(tasks.some((t) => t.taskId === id), 'listTasks on the other replica lists the task');

  for (const token of [SAME_NS_TOKEN, FOREIGN_TOKEN]) {
    const x = await v1(BALANCER_URL, token);
    await rejectsUnknown(x.experimental.tasks.getTask(id), 'a foreign getTask');
    await rejectsUnknown(x.experimental.tasks.getTaskResult(id, CallToolResultSchema), 'a foreign getTaskResult');
    await rejectsUnknown(x.experimental.tasks.cancelTask(id), 'a foreign cancelTask');
    assert.deepEqual((await x.experimental.tasks.listTasks()).tasks.filter((t) => t.taskId === id), []);
    await x.close();
  }

  // getTaskResult on b blocks until a write through a completes the task.
  const pending = cb.experimental.tasks.getTaskResult(id, CallToolResultSchema);
  await new Promise((r) => setTimeout(r, 200));
  await structured(ca, 'state_set', { key, value: 42 });
  const res = await pending;
  assert.equal(res.structuredContent.changed, true);
  assert.equal(res.structuredContent.value, 42);
  assert.equal(res._meta?.['io.modelcontextprotocol/related-task']?.taskId, id);
  await ca.close();
  await cb.close();
});

test(`2025-11-25 (SDK v1, ${BACKEND}): cancelled from the other replica`, async () => {
  const [a, b] = await replicas();
  const ca = await v1(a);
  const cb = await v1(b);
  const id = await createV1(ca, 'state_wait', { key: `never-${Date.now()}` });
  const cancelled = await cb.experimental.tasks.cancelTask(id);
  assert.equal(cancelled.status, 'cancelled');
  assert.equal((await ca.experimental.tasks.getTask(id)).status, 'cancelled');
  await assert.rejects(cb.experimental.tasks.cancelTask(id), (e) => e instanceof McpError && e.code === -32602, 'a second cancel');
  // The wait running on a stops (through the store's change feed).
  await until('the cancelled wait to stop on its replica', async () => (await metric(a, 'state_sidecar_tasks_running')) === 0);
  await ca.close();
  await cb.close();
});

test(`2025-11-25 (SDK v1, ${BACKEND}): the replica running a task is killed; the other takes it over`, async () => {
  const [a, b] = await replicas();
  const ca = await v1(a);
  const cb = await v1(b);
  const run = await structured(cb, 'workflow_create', { name: 'kill-v1' });
  const id = await createV1(ca, 'workflow_wait', { run_id: run.run_id });
  await until('the task to run on replica 0', async () => (await metric(a, 'state_sidecar_tasks_running')) === 1);
  const before = await metric(b, 'state_sidecar_tasks_total{event="taken_over"}');
  await control('POST', '/kill/0');
  await until('replica 1 to take the task over',
    async () => (await metric(b, 'state_sidecar_tasks_total{event="taken_over"}')) > before);
  assert.equal((await cb.experimental.tasks.getTask(id)).status, 'working');
  await finishRun(cb, run.run_id);
  const res = await cb.experimental.tasks.getTaskResult(id, CallToolResultSchema);
  assert.equal(res.structuredContent.reached, true);
  assert.equal(res.structuredContent.status, 'done');
  await cb.close();
  await ca.close().catch(() => {});
  await control('POST', '/start/0');
});

// ---- ext-tasks 0.2.2 ----------------------------------------------------------

// v2Client connects @modelcontextprotocol/client to base: a 2025-11-25
// client (the default, an initialize handshake), or pinned to 2026-07-28.
async function v2Client(base, token, modern) {
  const c = new ClientV2(info, modern ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {});
  await c.connect(new TransportV2(new URL(base + '/mcp'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return c;
}

// rawDispatch posts a framed 2026-07-28 request to base with the headers
// that era requires (Mcp-Method, and Mcp-Name: the tool, or the task).
function rawDispatch(base, token) {
  let id = 0;
  return async (request, options) => {
    const { method, params } = request;
    const res = await fetch(base + '/mcp', {
      method: 'POST',
      signal: options?.signal,
      headers: {
        Authorization: `Bearer ${token}`,
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        'MCP-Protocol-Version': '2026-07-28',
        'Mcp-Method': method,
        'Mcp-Name': params?.taskId ?? params?.name ?? '',
        ...(options?.context?.headers ?? {}),
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++id, ...request }),
    });
    let text = await res.text();
    if (text.startsWith('event:') || text.startsWith('data:')) {
      text = text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5)).join('');
    }
    const msg = JSON.parse(text);
    return msg.error ? { kind: 'error', error: msg.error } : { kind: 'result', result: msg.result };
  };
}

const framing = {
  protocolVersion: '2026-07-28',
  clientInfo: info,
  clientCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};

// session opens an ext-tasks session: a v1 one (2025-11-25) or a v2 one
// (2026-07-28) whose task requests go through rawDispatch to dispatchTo.
async function session(era, base, token = TOKEN, dispatchTo = base) {
  const c = await v2Client(base, token, era === 'v2');
  const opts = era === 'v2'
    ? { endpointId: `sidecar-${token}`, rawDispatch: rawDispatch(dispatchTo, token), v2RequestFraming: framing }
    : { endpointId: `sidecar-${token}` };
  assert.equal(c.getProtocolEra(), era === 'v2' ? 'modern' : 'legacy', 'the client speaks the era under test');
  const s = createTaskSessionFromClient(c, opts);
  const { tools } = await c.listTools();
  const decl = Object.fromEntries(tools.map((t) => [t.name, toolDeclarationFromMcpTool(t)]));
  return { client: c, s, decl };
}

// callAsTask starts tool as a task in session x and returns the execution.
async function callAsTask(x, name, args) {
  const exec = await x.s.callTool(name, args, { declaration: x.decl[name], task: { preference: 'prefer', retentionMs: 120_000 } });
  assert.equal(exec.kind, 'task', `${name} did not become a task`);
  return exec;
}

// plain calls a tool that does not run as a task and returns its structured content.
async function plain(x, name, args) {
  const exec = await x.s.callTool(name, args, { declaration: x.decl[name] });
  const { outcome } = await exec.settle();
  const res = resultFromTaskOutcome(outcome);
  assert.ok(!res.isError, `${name}: ${JSON.stringify(res)}`);
  return res.structuredContent;
}

async function closeSession(x) {
  await x.s.close();
  await x.client.close().catch(() => {});
}

for (const era of ['v1', 'v2']) {
  const label = era === 'v1' ? '2025-11-25' : '2026-07-28';

  test(`${label} (ext-tasks ${era}, ${BACKEND}): a wait runs as a task across the balancer`, async () => {
    const x = await session(era, BALANCER_URL);
    const key = `ext-${era}-${Date.now()}`;
    const exec = await callAsTask(x, 'state_wait', { key });
    await plain(x, 'state_set', { key, value: 'v' });
    const { outcome } = await exec.settle();
    assert.equal(outcome.status, 'completed');
    const res = resultFromTaskOutcome(outcome);
    assert.equal(res.structuredContent.changed, true);
    assert.equal(res.structuredContent.value, 'v');
    await closeSession(x);
  });

  test(`${label} (ext-tasks ${era}, ${BACKEND}): created on one replica, observed on the other; foreign tokens see nothing`, async () => {
    const [a, b] = await replicas();
    const xa = await session(era, a);
    const xb = await session(era, b);
    const key = `ext-${era}-two-${Date.now()}`;
    const exec = await callAsTask(xa, 'state_wait', { key });
    const id = exec.handle.taskId;
    const view = await xb.s.task(id).snapshot();
    assert.equal(view.status, 'working');
    for (const token of [SAME_NS_TOKEN, FOREIGN_TOKEN]) {
      const xf = await session(era, BALANCER_URL, token);
      await assert.rejects(xf.s.task(id).snapshot(), 'a foreign snapshot');
      await assert.rejects(xf.s.task(id).cancel(), 'a foreign cancel');
      if (era === 'v1') {
        const page = await xf.s.listTasks();
        assert.deepEqual(page.tasks.filter((t) => t.taskId === id), []);
      }
      await closeSession(xf);
    }
    assert.equal((await xb.s.task(id).snapshot()).status, 'working', 'foreign calls left the task alone');
    await plain(xb, 'state_set', { key, value: 7 });
    const { outcome } = await exec.settle();
    assert.equal(resultFromTaskOutcome(outcome).structuredContent.value, 7);
    await closeSession(xa);
    await closeSession(xb);
  });

  test(`${label} (ext-tasks ${era}, ${BACKEND}): cancelled from the other replica`, async () => {
    const [a, b] = await replicas();
    const xa = await session(era, a);
    const xb = await session(era, b);
    const exec = await callAsTask(xa, 'state_wait', { key: `never-${era}-${Date.now()}` });
    const id = exec.handle.taskId;
    await xb.s.task(id).cancel();
    const { outcome } = await exec.settle();
    assert.equal(outcome.status, 'cancelled');
    assert.equal((await xb.s.task(id).snapshot()).status, 'cancelled');
    await until('the cancelled wait to stop on its replica', async () => (await metric(a, 'state_sidecar_tasks_running')) === 0);
    await closeSession(xa);
    await closeSession(xb);
  });

  test(`${label} (ext-tasks ${era}, ${BACKEND}): the replica running a task is killed; the other takes it over`, async () => {
    const [a, b] = await replicas();
    // The task is created on replica 0 (a session dispatching to it); it is
    // followed through replica 1.
    const xa = await session(era, a);
    const xb = await session(era, b);
    const run = await plain(xb, 'workflow_create', { name: `kill-${era}` });
    const exec = await callAsTask(xa, 'workflow_wait', { run_id: run.run_id });
    const id = exec.handle.taskId;
    await exec.detach(); // stop following it through replica 0
    await until('the task to run on replica 0', async () => (await metric(a, 'state_sidecar_tasks_running')) === 1);
    const before = await metric(b, 'state_sidecar_tasks_total{event="taken_over"}');
    await control('POST', '/kill/0');
    await until('replica 1 to take the task over',
      async () => (await metric(b, 'state_sidecar_tasks_total{event="taken_over"}')) > before);
    assert.equal((await xb.s.task(id).snapshot()).status, 'working');
    const claim = await plain(xb, 'workflow_claim', { run_id: run.run_id, agent_id: 'w' });
    await plain(xb, 'workflow_checkpoint', { run_id: run.run_id, step: 1, output: 1, agent_id: 'w', fence: claim.fence, status: 'done' });
    const outcome = await xb.s.task(id).result();
    const res = resultFromTaskOutcome(outcome);
    assert.equal(res.structuredContent.reached, true);
    await closeSession(xb);
    await closeSession(xa).catch(() => {});
    await control('POST', '/start/0');
  });
}
