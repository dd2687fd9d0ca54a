#!/usr/bin/env node
// The PR-review demo's style reviewer in JavaScript, on the official MCP
// TypeScript SDK (@modelcontextprotocol/sdk). It is a drop-in for the Go
// agent ("prreview agent -kind style"): the same flags, the same use of the
// sidecar's tools (discover by tags, claim, resume, checkpoint with its
// fence, publish under a lease, finish) and the same JSON lines on stdout,
// so the dashboard cannot tell them apart except by the "lang" field.
//
//   npm ci --prefix examples/prreview/node
//   node examples/prreview/node/reviewer.mjs -kind style -sidecar http://127.0.0.1:8000 -demo d-123456
//   node examples/prreview/node/reviewer.mjs -analyze some.diff    # findings of a diff as JSON, no sidecar
//
// The rules are ../review/rules/style.json, the very file the Go reviewer
// embeds: the two find the same things (a Go test checks it).

import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const here = dirname(fileURLToPath(import.meta.url));
const RULES = JSON.parse(readFileSync(join(here, '..', 'review', 'rules', 'style.json'), 'utf8'));
for (const r of RULES.rules) {
  r.re = new RegExp(r.pattern, r.flags || '');
  r.unlessRe = r.unless ? new RegExp(r.unless, 'i') : null;
  r.filesRe = r.files ? new RegExp(r.files) : null;
}
const SEVERITIES = ['high', 'medium', 'low', 'info'];
const DATA_TTL = 24 * 3600;

// ---- diffs and the style rules (as review/diff.go and review/rules.go) ----

export function parseDiff(text) {
  const files = [];
  let cur = null;
  let hunk = null;
  let n = 0;
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  const headerPath = (s) => {
    s = s.split('\t')[0].trim();
    if (s === '/dev/null') return '';
    return s.startsWith('a/') || s.startsWith('b/') ? s.slice(2) : s;
  };
  lines.forEach((raw, i) => {
    if (raw.startsWith('diff --git ')) {
      const rest = raw.slice('diff --git '.length);
      const j = rest.lastIndexOf(' b/');
      cur = { path: j >= 0 ? rest.slice(j + 3) : '', deleted: false, hunks: [] };
      files.push(cur);
      hunk = null;
    } else if (!cur && raw.startsWith('--- ')) {
      cur = { path: headerPath(raw.slice(4)), deleted: false, hunks: [] };
      files.push(cur);
      hunk = null;
    } else if (!hunk && raw.startsWith('--- ')) {
      const p = headerPath(raw.slice(4));
      if (p && !cur.path) cur.path = p;
    } else if (!hunk && raw.startsWith('+++ ')) {
      const p = headerPath(raw.slice(4));
      if (p) cur.path = p; else cur.deleted = true;
    } else if (raw.startsWith('@@')) {
      if (!cur) throw new Error(`line ${i + 1}: a hunk before any file header`);
      const m = / \+(\d+)[ ,]/.exec(raw);
      if (!m) throw new Error(`line ${i + 1}: malformed hunk header ${JSON.stringify(raw)}`);
      hunk = { lines: [] };
      cur.hunks.push(hunk);
      n = Number(m[1]);
    } else if (hunk && raw !== '' && (raw[0] === '+' || raw[0] === ' ')) {
      hunk.lines.push({ kind: raw[0], n, text: raw.slice(1) });
      n++;
    } else if (hunk && raw !== '' && raw[0] === '-') {
      hunk.lines.push({ kind: '-', n: 0, text: raw.slice(1) });
    } else if (hunk && raw === '' && i < lines.length - 1) {
      hunk.lines.push({ kind: ' ', n, text: '' });
      n++;
    }
  });
  if (files.length === 0) throw new Error('not a unified diff');
  return files;
}

function snippet(s) {
  s = s.trim();
  const r = [...s];
  return r.length > 120 ? r.slice(0, 117).join('') + '...' : s;
}

export function reviewFile(file) {
  const out = [];
  for (const h of file.hunks) {
    for (const l of h.lines) {
      if (l.kind !== '+') continue;
      for (const r of RULES.rules) {
        if (r.filesRe && !r.filesRe.test(file.path)) continue;
        if (!r.re.test(l.text) || (r.unlessRe && r.unlessRe.test(l.text))) continue;
        out.push({ kind: 'style', rule: r.id, severity: r.severity, file: file.path, line: l.n, message: r.message, snippet: snippet(l.text) });
      }
    }
  }
  return out;
}

function countFindings(fs) {
  if (fs.length === 0) return 'no findings';
  const by = {};
  for (const f of fs) by[f.severity] = (by[f.severity] || 0) + 1;
  const parts = SEVERITIES.filter((s) => by[s]).map((s) => `${by[s]} ${s}`);
  return `${fs.length} ${fs.length === 1 ? 'finding' : 'findings'} (${parts.join(', ')})`;
}

function sortFindings(fs) {
  const rank = (s) => { const i = SEVERITIES.indexOf(s); return i < 0 ? SEVERITIES.length : i; };
  return fs.slice().sort((a, b) => rank(a.severity) - rank(b.severity) || (a.file < b.file ? -1 : a.file > b.file ? 1 : 0) || a.line - b.line);
}

// ---- flags (the Go agent's, with one or two dashes) ----

function parseDuration(s) {
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g;
  const unit = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1000, m: 60000, h: 3600000 };
  if (s === '0') return 0;
  let total = 0;
  let seen = '';
  for (const m of s.matchAll(re)) { total += Number(m[1]) * unit[m[2]]; seen += m[0]; }
  if (seen !== s) throw new Error(`invalid duration ${JSON.stringify(s)}`);
  return total;
}

function parseArgs(argv) {
  const o = { kind: '', sidecar: process.env.PRREVIEW_SIDECAR || '', id: '', demo: '', claimTTL: 5000, stepDelay: 1200,
    standby: 120000, barrier: false, exitOnEOF: false, analyze: '' };
  const bools = new Set(['barrier', 'exit-on-stdin-eof']);
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    if (!a.startsWith('-')) throw new Error(`unexpected argument ${JSON.stringify(a)}`);
    a = a.replace(/^--?/, '');
    let v;
    [a, v] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    if (bools.has(a)) v = v === undefined ? 'true' : v;
    else if (v === undefined) v = argv[++i];
    if (v === undefined) throw new Error(`flag -${a} needs a value`);
    switch (a) {
      case 'kind': o.kind = v; break;
      case 'sidecar': o.sidecar = v; break;
      case 'id': o.id = v; break;
      case 'demo': o.demo = v; break;
      case 'claim-ttl': o.claimTTL = parseDuration(v); break;
      case 'step-delay': o.stepDelay = parseDuration(v); break;
      case 'standby': o.standby = parseDuration(v); break;
      case 'barrier': o.barrier = v === 'true'; break;
      case 'exit-on-stdin-eof': o.exitOnEOF = v === 'true'; break;
      case 'analyze': o.analyze = v; break;
      default: throw new Error(`unknown flag -${a}`);
    }
  }
  if (o.analyze) return o;
  if (o.kind !== 'style') throw new Error(`-kind ${JSON.stringify(o.kind)}: the Node reviewer reviews style only`);
  if (!o.sidecar) throw new Error('-sidecar is required (or PRREVIEW_SIDECAR)');
  if (!o.demo) throw new Error("-demo is required: the dashboard's demo tag");
  if (!(o.claimTTL > 0)) throw new Error('-claim-ttl must be positive');
  if (!o.id) o.id = 'style-node-' + randomBytes(2).toString('hex');
  return o;
}

// ---- the agent ----

class FencedOut extends Error {}
class ToolError extends Error {}

const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

class Agent {
  constructor(o) {
    this.o = o;
    this.run = '';
    this.fence = 0;
    this.lastBeat = 0;
    this.release = null;
    this.go = new Promise((r) => { this.release = r; });
  }

  emit(l) {
    process.stdout.write(JSON.stringify({ ts: new Date().toISOString(), agent: this.o.id, kind: 'style', lang: 'node', ...l }) + '\n');
  }

  event(name, msg, data) { this.emit({ type: 'event', event: name, msg, ...(data ? { data } : {}) }); }

  async connect() {
    let url = new URL(this.o.sidecar);
    if (url.pathname === '' || url.pathname === '/') url = new URL('/mcp', url);
    const headers = {};
    if (process.env.PRREVIEW_SIDECAR_TOKEN) headers.Authorization = `Bearer ${process.env.PRREVIEW_SIDECAR_TOKEN}`;
    this.client = new Client({ name: 'prreview-' + this.o.id, version: '1.0.0' });
    await this.client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
  }

  // call calls a tool, logs it as a "tool" line and returns its result.
  async call(tool, args) {
    const start = performance.now();
    const line = { type: 'tool', tool, args };
    try {
      const res = await this.client.callTool({ name: tool, arguments: args });
      const text = res.content?.find((c) => c.type === 'text')?.text ?? '';
      line.ms = Math.round((performance.now() - start) * 1000) / 1000;
      if (res.isError) {
        line.error = text;
        this.emit(line);
        throw new ToolError(text);
      }
      const out = res.structuredContent ?? JSON.parse(text);
      line.result = abbreviate(out);
      this.emit(line);
      return out;
    } catch (e) {
      if (!(e instanceof ToolError)) {
        line.error = `the sidecar does not answer: ${e.message}`;
        line.ms = Math.round((performance.now() - start) * 1000) / 1000;
        this.emit(line);
      }
      throw e;
    }
  }

  async find(tags) {
    const deadline = Date.now() + this.o.standby;
    let barrier = this.o.barrier;
    for (;;) {
      const claimable = await this.call('workflow_discover', { tags, claimable: true });
      if (barrier) {
        this.emit({ type: 'ready', data: { found: claimable.runs.length } });
        await this.go;
        barrier = false;
      }
      if (claimable.runs.length > 0) {
        const r = claimable.runs[0];
        this.event('discovered', `found style review ${r.run_id} (status ${r.status})`, { run_id: r.run_id, status: r.status, attempt: r.attempt });
        return r;
      }
      const all = await this.call('workflow_discover', { tags });
      const held = all.runs.find((r) => (r.status === 'claimed' || r.status === 'running') && r.claim_expires_at != null);
      if (!held) {
        this.event('idle', all.runs.length ? `nothing to do: style review ${all.runs[0].run_id} is already ${all.runs[0].status}` : 'nothing to do: no style review is waiting');
        return null;
      }
      if (Date.now() > deadline) {
        this.event('idle', `gave up standing by: ${held.run_id} is still held by ${held.agent_id}`);
        return null;
      }
      const until = held.claim_expires_at * 1000;
      this.event('standby', `${held.run_id} is held by ${held.agent_id} until its claim expires at ${new Date(until).toISOString().slice(11, 23)}: standing by`,
        { run_id: held.run_id, holder: held.agent_id, until: held.claim_expires_at });
      await sleep(Math.max(50, Math.min(until - Date.now() + 50, deadline - Date.now())));
    }
  }

  async claim(run) {
    const res = await this.call('workflow_claim', { run_id: run, agent_id: this.o.id, claim_ttl_seconds: this.o.claimTTL / 1000 });
    if (!res.claimed) {
      this.event('lost', 'lost the claim: ' + res.reason, { run_id: run, reason: res.reason });
      return false;
    }
    this.run = run;
    this.fence = res.fence;
    this.lastBeat = Date.now();
    this.event('claimed', `claimed ${run} (attempt ${res.attempt}, fence ${res.fence})`,
      { run_id: run, attempt: res.attempt, fence: res.fence, expires_at: res.expires_at });
    return true;
  }

  // work spends a step's time, heartbeating the claim when a third of its TTL passed.
  async work() {
    const end = Date.now() + this.o.stepDelay;
    for (;;) {
      const next = this.lastBeat + this.o.claimTTL / 3;
      if (next >= end) break;
      await sleep(next - Date.now());
      const res = await this.call('workflow_claim', { run_id: this.run, agent_id: this.o.id, claim_ttl_seconds: this.o.claimTTL / 1000 });
      if (!res.claimed) throw new FencedOut('heartbeat refused: ' + res.reason);
      this.lastBeat = Date.now();
    }
    await sleep(end - Date.now());
  }

  async checkpoint(step, output, done) {
    const args = { run_id: this.run, step, output, agent_id: this.o.id, fence: this.fence };
    if (done) args.status = 'done';
    try {
      await this.call('workflow_checkpoint', args);
    } catch (e) {
      if (e instanceof ToolError) throw new FencedOut(e.message);
      throw e;
    }
    this.lastBeat = Date.now();
  }

  async review() {
    this.event('started', `Style reviewer started in Node (claim TTL ${this.o.claimTTL / 1000}s, ${this.o.stepDelay / 1000}s per step)`);
    const run = await this.find({ pipeline: 'pr-review', demo: this.o.demo, kind: 'style' });
    if (!run || !(await this.claim(run.run_id))) return 0;
    const res = await this.call('workflow_resume', { run_id: run.run_id });
    const parent = res.meta.tags.parent;
    const prKey = `review/${parent}/pr`;
    const got = await this.call('state_get', { key: prKey });
    if (!got.found) throw new Error(`the pull request is not in the store (${prKey})`);
    const pr = got.value;
    const files = parseDiff(pr.diff);
    const total = files.length + 2;
    const ref = `${pr.repo}#${pr.number}`;
    if (res.last_step > 0) {
      this.event('resumed', `resuming ${run.run_id} after step ${res.last_step} of ${total}: a previous attempt did steps 1-${res.last_step}`,
        { run_id: run.run_id, last_step: res.last_step, total });
    }
    let findings = [];
    for (let s = 1; s <= res.last_step && s < total; s++) {
      findings.push(...(res.step_outputs[String(s)]?.findings ?? []));
    }
    if (res.last_step < 1) {
      await this.checkpoint(1, { step: 'load', pr: ref, files: files.map((f) => f.path), by: this.o.id }, false);
      this.event('step', `step 1/${total}: loaded ${ref} from the store (${files.length} files)`, { run_id: run.run_id, step: 1, total });
    }
    for (const [i, f] of files.entries()) {
      const step = i + 2;
      if (step <= res.last_step) continue;
      await this.work();
      const fs = reviewFile(f);
      await this.checkpoint(step, { step: 'file', file: f.path, ...(fs.length ? { findings: fs } : {}), by: this.o.id }, false);
      findings.push(...fs);
      this.event('step', `step ${step}/${total}: ${f.path}: ${countFindings(fs)}`, { run_id: run.run_id, step, total, file: f.path, findings: fs.length });
    }
    await this.work();
    findings = sortFindings(findings);
    await this.publish(parent, run.run_id, res.meta.attempt, files.length, findings);
    await this.checkpoint(total, { step: 'publish', total_findings: findings.length, by: this.o.id }, true);
    this.event('done', `finished ${run.run_id}: ${countFindings(findings)}`, { run_id: run.run_id, step: total, total, findings: findings.length });
    return 0;
  }

  async publish(parent, runID, attempt, files, findings) {
    const summary = countFindings(findings);
    await this.call('state_set', {
      key: `review/${parent}/findings/style`, agent_id: this.o.id, ttl_seconds: DATA_TTL,
      value: { kind: 'style', agent: this.o.id, lang: 'node', run_id: runID, attempt, fence: this.fence, about: RULES.about,
        files_reviewed: files, summary, findings },
    });
    const resource = `lease/${parent}/comments`;
    const deadline = Date.now() + 60000;
    let lease;
    for (;;) {
      lease = await this.call('lease_acquire', { resource_id: resource, holder_id: this.o.id, ttl_seconds: 10 });
      if (lease.acquired) break;
      if (Date.now() > deadline) throw new Error(`the lease ${resource} stayed held by ${lease.holder}`);
      this.event('lease_wait', `${resource} is held by ${lease.holder}: waiting`);
      await sleep(300);
    }
    const key = `review/${parent}/comments`;
    const cur = await this.call('state_get', { key });
    const thread = cur.found && Array.isArray(cur.value) ? cur.value : [];
    const mine = { kind: 'style', agent: this.o.id, summary, lease_fence: lease.fence, at: Date.now() / 1000 };
    const i = thread.findIndex((c) => c.kind === 'style');
    if (i >= 0) thread[i] = mine; else thread.push(mine);
    await this.call('state_set', { key, value: thread, agent_id: this.o.id, if_version: cur.found ? cur.version : 0, ttl_seconds: DATA_TTL });
    this.event('published', `posted to the shared comment thread under lease fence ${lease.fence}`, { run_id: runID, lease_fence: lease.fence });
    await this.call('lease_release', { resource_id: resource, holder_id: this.o.id });
  }
}

function abbreviate(v, depth = 0) {
  if (typeof v === 'string') return v.length > 160 ? `${v.slice(0, 120)}… (${v.length} bytes)` : v;
  if (Array.isArray(v)) {
    if (depth > 3 && v.length) return `[${v.length} items]`;
    const out = v.slice(0, 8).map((e) => abbreviate(e, depth + 1));
    if (v.length > 8) out.push(`… ${v.length - 8} more`);
    return out;
  }
  if (v && typeof v === 'object') {
    if (depth > 3) return '{…}';
    return Object.fromEntries(Object.entries(v).map(([k, e]) => [k, abbreviate(e, depth + 1)]));
  }
  return v;
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`reviewer.mjs: ${e.message}\n`);
    return 1;
  }
  if (o.analyze) {
    const findings = parseDiff(readFileSync(o.analyze, 'utf8')).flatMap(reviewFile);
    process.stdout.write(JSON.stringify(findings) + '\n');
    return 0;
  }
  const a = new Agent(o);
  let buf = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (d) => {
    buf += d;
    if (buf.split('\n').some((l) => l.trim() === 'go')) a.release();
  });
  process.stdin.on('end', () => {
    if (o.exitOnEOF) {
      a.event('orphaned', 'the dashboard went away: exiting');
      process.exit(3);
    }
  });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { a.event('stopped', 'stopped by a signal'); process.exit(1); });
  try {
    await a.connect();
    return await a.review();
  } catch (e) {
    if (e instanceof FencedOut) {
      a.event('fenced_out', 'stopped without writing: ' + e.message, { run_id: a.run, fence: a.fence });
      return 2;
    }
    a.event('error', `working on ${a.run || 'discovery'}: ${e.message}`);
    return 1;
  }
}

// Exit at once: the stdin listener would keep the process alive. Writes to
// a pipe are synchronous on Linux, so no report line is lost.
process.exit(await main());
