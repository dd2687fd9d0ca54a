// Interop test: the official MCP TypeScript SDK (@modelcontextprotocol/sdk)
// drives the Go state sidecar over stdio and over Streamable HTTP.
//
// It is run by TestInteropTypeScriptSDK in cmd/state-sidecar, which builds the
// sidecar, starts it in HTTP mode and sets:
//   SIDECAR_BIN     the built binary (spawned here in stdio mode)
//   SIDECAR_URL     the HTTP sidecar's base URL (http://127.0.0.1:port)
//   SIDECAR_TOKEN   its bearer token (a token of the default namespace)
//   SIDECAR_DB_PATH the SQLite file both sidecars share
// By hand: npm ci --prefix interop/ts && go test ./cmd/state-sidecar -run Interop -v

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const { SIDECAR_BIN, SIDECAR_URL, SIDECAR_TOKEN, SIDECAR_DB_PATH } = process.env;
if (!SIDECAR_BIN || !SIDECAR_URL || !SIDECAR_TOKEN || !SIDECAR_DB_PATH) {
  throw new Error('run this through the Go test (go test ./cmd/state-sidecar -run Interop), which sets SIDECAR_BIN, SIDECAR_URL, SIDECAR_TOKEN and SIDECAR_DB_PATH');
}

const TOOLS = [
  'state_set', 'state_get', 'state_delete', 'state_list',
  'workflow_create', 'workflow_discover', 'workflow_claim', 'workflow_checkpoint',
  'workflow_resume', 'workflow_status', 'workflow_list',
  'lease_acquire', 'lease_release', 'lease_renew',
  'sidecar_health', 'sidecar_reset',
  'session_save', 'session_restore',
  'history_log',
];

// 2^53 + 1: a JavaScript number cannot hold it, so JSON.stringify cannot
// send it. It is written with a hand-made JSON-RPC request over plain HTTP,
// and the SDK must then receive every digit in the text content.
const BIG = '9007199254740993';

const authHeaders = { Authorization: `Bearer ${SIDECAR_TOKEN}` };

async function rawCall(name, argsJSON) {
  const res = await fetch(`${SIDECAR_URL}/mcp`, {
    method: 'POST',
    headers: {
      ...authHeaders,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': '2025-11-25',
    },
    body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"${name}","arguments":${argsJSON}}}`,
  });
  const body = await res.text();
  assert.equal(res.status, 200, body);
  const data = body.startsWith('event:') || body.startsWith('data:')
    ? body.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5)).join('')
    : body;
  const msg = JSON.parse(data);
  assert.ok(msg.result && !msg.result.isError, body);
  return msg.result;
}

// structured returns a successful call's structured content, after checking
// that its text content is the same JSON.
async function structured(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(!res.isError, `${name} failed: ${JSON.stringify(res.content)}`);
  assert.ok(res.structuredContent, `${name}: no structuredContent`);
  assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent, `${name}: text and structured content differ`);
  return res.structuredContent;
}

async function exercise(client, label) {
  // Tool list: the 19 Python names, each with an output schema and honest annotations.
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
  for (const t of tools) {
    assert.ok(t.outputSchema, `${t.name}: no output schema`);
    assert.equal(t.annotations?.openWorldHint, false, `${t.name}: openWorldHint`);
  }
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.equal(byName.state_get.annotations.readOnlyHint, true);
  assert.equal(byName.sidecar_reset.annotations.destructiveHint, true);

  // KV round trip, and a big integer written by someone else.
  const key = `interop/${label}`;
  const set = await structured(client, 'state_set', { key, value: { n: 1, s: 'x', list: [true, null] }, agent_id: label });
  assert.equal(set.ok, true);
  const got = await structured(client, 'state_get', { key });
  assert.deepEqual(got.value, { n: 1, s: 'x', list: [true, null] });
  assert.equal(got.agent_id, label);
  assert.equal(got.found, true);

  const bigKey = `interop/big/${label}`;
  await rawCall('state_set', `{"key":"${bigKey}","value":${BIG}}`);
  const big = await client.callTool({ name: 'state_get', arguments: { key: bigKey } });
  assert.ok(!big.isError);
  assert.match(big.content[0].text, new RegExp(`"value":${BIG}[,}]`), 'every digit of the big integer in the text content');

  // Workflow: create, claim, checkpoint, resume.
  const run = await structured(client, 'workflow_create', { name: `pr-review-${label}`, tags: { pipeline: 'interop', via: label } });
  assert.match(run.run_id, /^wf-[0-9a-f]{12}$/);
  assert.equal(run.status, 'created');
  const found = await structured(client, 'workflow_discover', { tags: { via: label }, status: 'created' });
  assert.ok(found.runs.some((r) => r.run_id === run.run_id), 'discover finds the run');
  const claim = await structured(client, 'workflow_claim', { run_id: run.run_id, agent_id: `${label}-worker` });
  assert.equal(claim.claimed, true);
  assert.equal(typeof claim.fence, 'number');
  const lost = await structured(client, 'workflow_claim', { run_id: run.run_id, agent_id: 'someone-else' });
  assert.equal(lost.claimed, false);
  assert.equal(lost.reason, `Workflow is in status 'claimed' (agent: ${label}-worker)`);
  const cp = await structured(client, 'workflow_checkpoint', {
    run_id: run.run_id, step: 1, output: { files: 12 }, agent_id: `${label}-worker`, fence: claim.fence,
  });
  assert.equal(cp.ok, true);
  const resume = await structured(client, 'workflow_resume', { run_id: run.run_id });
  assert.equal(resume.last_step, 1);
  assert.deepEqual(resume.step_outputs, { 1: { files: 12 } });
  assert.equal(resume.meta.status, 'running');

  // Fan-out/fan-in: a join parent waits until its children are done or failed.
  const parent = await structured(client, 'workflow_create', { name: `aggregate-${label}`, join: true, idempotency_key: `fanout-${label}-${Date.now()}` });
  assert.equal(parent.status, 'waiting');
  assert.equal(parent.replayed, false);
  const kids = [];
  for (const part of ['a', 'b']) {
    kids.push(await structured(client, 'workflow_create', { name: `piece-${part}`, parent_run_id: parent.run_id }));
  }
  const early = await structured(client, 'workflow_claim', { run_id: parent.run_id, agent_id: 'aggregator' });
  assert.equal(early.claimed, false);
  assert.match(early.reason, /waiting/);
  const mine = await structured(client, 'workflow_discover', { parent_run_id: parent.run_id });
  assert.deepEqual(mine.runs.map((r) => r.run_id).sort(), kids.map((k) => k.run_id).sort());
  for (const [i, k] of kids.entries()) {
    await structured(client, 'workflow_checkpoint', { run_id: k.run_id, step: 1, output: { part: i }, status: i === 0 ? 'done' : 'failed' });
  }
  const joined = await structured(client, 'workflow_status', { run_id: parent.run_id });
  assert.equal(joined.status, 'created');
  assert.equal(joined.children.done, 1);
  assert.equal(joined.children.failed, 1);
  const agg = await structured(client, 'workflow_claim', { run_id: parent.run_id, agent_id: 'aggregator' });
  assert.equal(agg.claimed, true);

  // An idempotent create: the retry returns the same run.
  const idem = { name: `refund-${label}`, idempotency_key: `refund-${label}-${Date.now()}` };
  const first = await structured(client, 'workflow_create', idem);
  const retry = await structured(client, 'workflow_create', idem);
  assert.equal(retry.run_id, first.run_id);
  assert.equal(retry.replayed, true);
  const plain = await structured(client, 'workflow_status', { run_id: first.run_id });
  assert.equal(plain.children, null);

  // Lease.
  const lease = await structured(client, 'lease_acquire', { resource_id: `printer-${label}`, holder_id: label, ttl_seconds: 30 });
  assert.equal(lease.acquired, true);
  const held = await structured(client, 'lease_acquire', { resource_id: `printer-${label}`, holder_id: 'other', ttl_seconds: 30 });
  assert.equal(held.acquired, false);
  assert.equal(held.reason, `Held by '${label}'`);

  // Bad arguments are tool errors, not protocol errors or crashes.
  for (const [name, args] of [
    ['lease_acquire', { resource_id: 'r', holder_id: 'h', ttl_seconds: -5 }],
    ['state_get', { key: 42 }],
    ['state_set', { value: 1 }],
    ['history_log', { n: 0 }],
    ['workflow_checkpoint', { run_id: 'wf-000000000000', step: 1, output: {} }],
  ]) {
    const res = await client.callTool({ name, arguments: args });
    assert.equal(res.isError, true, `${name}(${JSON.stringify(args)}) must be a tool error: ${JSON.stringify(res)}`);
    assert.ok(res.content[0].text.length > 0, `${name}: the error must say why`);
  }
  const reset = await client.callTool({ name: 'sidecar_reset', arguments: {} });
  assert.equal(reset.isError, true, 'reset is refused unless SIDECAR_ALLOW_RESET');

  const health = await structured(client, 'sidecar_health', {});
  assert.equal(health.status, 'ok');
  assert.equal(health.backend, 'sqlite');
}

test('Streamable HTTP with a bearer token', async () => {
  const transport = new StreamableHTTPClientTransport(new URL(`${SIDECAR_URL}/mcp`), { requestInit: { headers: authHeaders } });
  const client = new Client({ name: 'interop-http', version: '1.0.0' });
  await client.connect(transport);
  try {
    assert.equal(client.getServerVersion()?.name, 'MCP State Sidecar');
    await exercise(client, 'http');
  } finally {
    await client.close();
  }
});

test('Streamable HTTP without a token is refused', async () => {
  const transport = new StreamableHTTPClientTransport(new URL(`${SIDECAR_URL}/mcp`));
  const client = new Client({ name: 'interop-anon', version: '1.0.0' });
  await assert.rejects(client.connect(transport), /401|nauthori/);
});

test('stdio, on the same SQLite file as the HTTP sidecar', async () => {
  const transport = new StdioClientTransport({
    command: SIDECAR_BIN,
    args: ['-transport', 'stdio'],
    env: { ...process.env, STATE_BACKEND: 'sqlite', DB_PATH: SIDECAR_DB_PATH, SIDECAR_AUTH_TOKENS: '' },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d; });
  const client = new Client({ name: 'interop-stdio', version: '1.0.0' });
  await client.connect(transport);
  try {
    await exercise(client, 'stdio');
    // What the HTTP client wrote is visible here: one store, two transports.
    const fromHTTP = await structured(client, 'state_get', { key: 'interop/http' });
    assert.equal(fromHTTP.found, true, 'the HTTP test ran first and its key is in the shared file');
  } finally {
    await client.close();
  }
  assert.match(stderr, /MCP State Sidecar starting/, 'logs go to stderr');
});
