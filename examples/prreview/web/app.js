// The PR-review demo's page: it renders the snapshots and log lines the
// dashboard pushes over server-sent events, and posts one request per button.
// Everything it shows comes from the sidecar or from the agents' own reports.
'use strict';

const KINDS = ['security', 'performance', 'style'];
const TITLES = { security: 'Security', performance: 'Performance', style: 'Style', aggregator: 'Aggregator' };
const svg = (d) => `<svg viewBox="0 0 24 24" width="15" height="15" fill="none" stroke="currentColor" stroke-width="2.2" stroke-linejoin="round" aria-hidden="true"><path d="${d}"/></svg>`;
const ICONS = {
  security: svg('M12 3l8 3v6c0 5-3.5 8-8 9-4.5-1-8-4-8-9V6z'),
  performance: svg('M13 2L4 14h7l-1 8 9-12h-7z'),
  style: svg('M4 20h4L19 9l-4-4L4 16zM14 6l4 4'),
};
const $ = (sel, root = document) => root.querySelector(sel);

let S = null;             // the latest snapshot
let clockOffset = 0;      // server time minus browser time, in seconds
const lang = { security: 'go', performance: 'go', style: 'go' };
let logFilter = 'event'; // events first: tool calls are one click away

// short shows a large version or fence (a Redis revision has 16 digits) as
// its last six digits, which tell neighbouring values apart; the whole
// number is in the title.
function short(n) {
  if (n == null || n === '') return '—';
  const s = String(n);
  return s.length <= 7 ? esc(s) : `<span class="num" title="${esc(s)}">…${esc(s.slice(-6))}</span>`;
}
// statusLabel names a run's status for the audience: a join parent that
// its children released is "ready to aggregate", not "created".
function statusLabel(r) {
  if (!r) return '';
  if (S && S.pipeline && r.run_id === S.pipeline.parent && r.status === 'created') return 'ready to aggregate';
  return r.status;
}
// ago says how long ago an epoch-seconds time was, for the log.
function ago(sec) {
  const d = now() - sec;
  if (d < 0.05) return 'now';
  if (d < 60) return d.toFixed(1) + 's ago';
  if (d < 3600) return Math.floor(d / 60) + 'm' + String(Math.floor(d % 60)).padStart(2, '0') + 's ago';
  return Math.floor(d / 3600) + 'h ago';
}

function esc(v) {
  return String(v ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
function cls(s) { return String(s || '').toLowerCase().replace(/[^a-z0-9]+/g, '-'); }
function now() { return Date.now() / 1000 + clockOffset; }
function fmtTime(ts) {
  const d = new Date(ts);
  if (isNaN(d)) return '';
  const t = d.toLocaleTimeString('en-US', { hour: 'numeric', minute: '2-digit', second: '2-digit', hour12: true });
  return t.replace(/ (AM|PM)$/, '.' + String(d.getMilliseconds()).padStart(3, '0') + ' $1');
}
function expiry(at, finishedRun) {
  if (at == null || finishedRun) return '<span class="muted">—</span>';
  return `<span class="expiry" data-at="${at}"></span>`;
}
function tickExpiries() {
  for (const el of document.querySelectorAll('.expiry[data-at]')) {
    const left = Number(el.dataset.at) - now();
    el.classList.toggle('gone', left <= 0);
    el.classList.toggle('soon', left > 0 && left < 2);
    el.textContent = left > 0 ? `in ${left.toFixed(1)}s` : `expired ${(-left).toFixed(1)}s ago`;
  }
}
setInterval(tickExpiries, 100);
function tickLogTimes() {
  const lines = $('#log').children;
  for (let i = Math.max(0, lines.length - 400); i < lines.length; i++) {
    const t = lines[i].querySelector('.t[data-ts]');
    if (t) t.textContent = ago(Number(t.dataset.ts));
  }
}
setInterval(tickLogTimes, 1000);

// ---- notices and actions -------------------------------------------------

let noticeTimer = null;
function notice(level, text) {
  const n = $('#notice');
  n.dataset.level = level;
  $('#notice-text').textContent = text;
  n.hidden = false;
  clearTimeout(noticeTimer);
  if (level === 'ok') noticeTimer = setTimeout(() => { n.hidden = true; }, 6000);
}
$('#notice-close').addEventListener('click', () => { $('#notice').hidden = true; });

// ---- presenter layout ------------------------------------------------------
// On a projector-sized window (1280×720 and the like) everything the talk
// needs fits on one screen: controls, the three agents, the board and the
// log. It is on by itself when the window is short, and the header's button
// forces it on or off.
function presenterWanted() {
  const forced = localStorage.getItem('prreview-presenter');
  if (forced === 'on') return true;
  if (forced === 'off') return false;
  return window.innerHeight <= 820 && window.innerWidth >= 1000;
}
function applyPresenter() {
  const on = presenterWanted();
  document.body.classList.toggle('presenter', on);
  $('#presenter').classList.toggle('on', on);
  $('#presenter').textContent = on ? 'Presenter layout: on' : 'Presenter layout: off';
}
$('#presenter').addEventListener('click', () => {
  localStorage.setItem('prreview-presenter', presenterWanted() ? 'off' : 'on');
  applyPresenter();
});
window.addEventListener('resize', applyPresenter);
applyPresenter();

async function act(path, body, btn) {
  if (btn) btn.disabled = true;
  try {
    const res = await fetch('/api/' + path, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body || {}),
    });
    let out;
    try { out = await res.json(); } catch { out = { error: `The dashboard answered ${res.status} ${res.statusText}.` }; }
    if (!res.ok || out.error) {
      notice('error', out.error || `The dashboard answered ${res.status}.`);
      return null;
    }
    notice('ok', out.message || 'Done.');
    return out;
  } catch (e) {
    notice('error', `The dashboard does not answer (${e.message}): is prreview still running?`);
    return null;
  } finally {
    if (btn) btn.disabled = false;
  }
}

// ---- static controls -----------------------------------------------------

$('#pr-form').addEventListener('submit', (e) => {
  e.preventDefault();
  act('pr', { input: $('#pr-input').value }, $('#load-pr'));
});
$('#register').addEventListener('click', (e) => act('register', {}, e.currentTarget));
$('#reset').addEventListener('click', (e) => act('reset', {}, e.currentTarget));
$('#change-pr').addEventListener('click', async (e) => {
  if (await act('change-pr', {}, e.currentTarget)) { $('#pr-input').value = ''; $('#pr-input').focus(); }
});
$('#aggregate').addEventListener('click', (e) => act('aggregate', {}, e.currentTarget));
for (const b of document.querySelectorAll('#pace button')) {
  b.addEventListener('click', () => act('pace', { pace: b.dataset.pace }));
}
$('#clear-logs').addEventListener('click', () => act('clear-logs', {}));
for (const b of document.querySelectorAll('#log-filter button')) {
  b.addEventListener('click', () => {
    logFilter = b.dataset.filter;
    for (const o of document.querySelectorAll('#log-filter button')) o.classList.toggle('on', o === b);
    $('#log').dataset.filter = logFilter;
    for (const l of $('#log').children) l.hidden = !shown(l.dataset.level);
  });
}

async function loadBundled() {
  try {
    const res = await fetch('/api/prs');
    const { prs } = await res.json();
    const box = $('#bundled-list');
    box.innerHTML = '';
    for (const p of prs) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'chip' + (p.id === 'mcp-call-tool-result' ? ' talk' : '');
      b.dataset.id = p.id;
      b.title = `${p.repo}#${p.number} by @${p.author}`;
      b.textContent = p.title;
      b.addEventListener('click', () => { $('#pr-input').value = 'bundled:' + p.id; act('pr', { input: 'bundled:' + p.id }, b); });
      box.appendChild(b);
    }
  } catch (e) {
    notice('error', 'Could not list the bundled PRs: ' + e.message);
  }
}

// ---- agent panels (built once, then updated) ------------------------------

function buildPanels() {
  const box = $('#agents');
  for (const k of KINDS) {
    const el = document.createElement('div');
    el.className = 'agent';
    el.dataset.kind = k;
    el.innerHTML = `
      <div class="agent-head">
        <h3><span class="ico">${ICONS[k]}</span>${TITLES[k]} Reviewer</h3>
        <span class="badge review-status"></span>
      </div>
      <p class="about"></p>
      <div class="lang-box" hidden>
        <span class="seg small lang"><button type="button" data-lang="go" class="on">Go · mcp-go</button><button type="button" data-lang="node">Node · TS SDK</button></span>
        <div class="lang-note"></div>
      </div>
      <div class="review-line"></div>
      <div class="progress"><span style="width:0%"></span></div>
      <div class="btn-row">
        <button type="button" class="btn spawn">Spawn Agent</button>
        <button type="button" class="btn spawn3">Spawn 3 (Race Test)</button>
        <button type="button" class="btn danger crash">Crash Active</button>
        <button type="button" class="btn freeze" title="SIGSTOP the agent holding the claim; press again to SIGCONT it">Freeze</button>
      </div>
      <div class="takeover" hidden></div>
      <div class="zombie" hidden></div>
      <div class="race" hidden></div>`;
    $('.spawn', el).addEventListener('click', (e) => act('spawn', { kind: k, count: 1, lang: lang[k] }, e.currentTarget));
    $('.spawn3', el).addEventListener('click', (e) => act('spawn', { kind: k, count: 3, lang: lang[k] }, e.currentTarget));
    $('.crash', el).addEventListener('click', (e) => act('crash', { kind: k }, e.currentTarget));
    $('.freeze', el).addEventListener('click', (e) => act(e.currentTarget.dataset.thaw ? 'thaw' : 'freeze', { kind: k }, e.currentTarget));
    for (const b of el.querySelectorAll('.lang button')) {
      b.addEventListener('click', () => {
        if (b.disabled) return;
        lang[k] = b.dataset.lang;
        for (const o of el.querySelectorAll('.lang button')) o.classList.toggle('on', o === b);
      });
    }
    box.appendChild(el);
  }
}

// spawn3State enables Spawn 3 only when the run is free to race for.
function spawn3State(b) {
  const held = Number(b.dataset.heldUntil || 0) > now();
  const fin = b.dataset.finished === 'true';
  b.disabled = held || fin;
  b.textContent = fin ? 'Spawn 3 · review finished' : held ? `Spawn 3 · held by ${b.dataset.holder}` : 'Spawn 3 (Race Test)';
  b.title = fin ? 'The review is finished: nothing to race for (Reset Demo to run it again)' :
    held ? 'The run is held: racers would only stand by. Wait until the claim expires, or crash the holder.' : 'Three agents race to claim the run at once: exactly one wins';
}
setInterval(() => { for (const b of document.querySelectorAll('.spawn3')) spawn3State(b); }, 250);

function runOf(kind) {
  if (!S || !S.pipeline || !S.runs) return null;
  const id = kind === 'aggregate' ? S.pipeline.parent : S.pipeline.children[kind];
  return S.runs.find((r) => r.run_id === id) || null;
}
function totalOf(runID) {
  const w = (S.workers || []).find((w) => w.run_id === runID && w.total);
  return w ? w.total : 0;
}

function renderPanels() {
  for (const k of KINDS) {
    const el = $(`.agent[data-kind="${k}"]`);
    $('.about', el).textContent = S.about[k] || '';
    const nodeOK = S.node.available && S.node.kinds.includes(k);
    const lb = $('.lang-box', el);
    lb.hidden = !S.node.kinds.includes(k);
    const nodeBtn = $('.lang button[data-lang="node"]', el);
    nodeBtn.disabled = !nodeOK;
    $('.lang-note', el).textContent = nodeOK ? 'The Node agent uses the official MCP TypeScript SDK.' : S.node.hint;
    if (!nodeOK && lang[k] === 'node') { lang[k] = 'go'; }

    const r = runOf(k);
    const st = $('.review-status', el);
    st.className = 'badge review-status ' + (r ? r.status : '');
    st.textContent = r ? r.status : '';
    const total = r ? totalOf(r.run_id) : 0;
    const fin = r && (r.status === 'done' || r.status === 'failed');
    const holder = r && r.agent_id && !fin ? (S.workers || []).find((w) => w.id === r.agent_id) : null;
    let line = '<span class="muted">No run yet: register a workflow.</span>';
    if (r) {
      line = `<span class="mono id">${esc(r.run_id)}</span>`;
      if (r.attempt) line += ` · attempt <b>${r.attempt}</b> · fence <b class="mono">${short(r.fence)}</b>`;
      line += ` · step <b>${r.last_step}${total ? '/' + total : ''}</b>`;
      if (r.agent_id && !fin) {
        line += ` · held by <span class="mono id">${esc(r.agent_id)}</span>`;
        if (holder && !holder.alive) line += ' <span class="dead" title="the process is gone: its claim runs out">☠ dead</span>';
        else if (holder && holder.frozen) line += ' <span class="frozen-mark" title="SIGSTOP: it misses its heartbeats">❄ frozen</span>';
        line += ` <span class="claim-left">claim ${expiry(r.claim_expires_at, fin)}</span>`;
      }
      if (r.agent_id && fin) line += ` · by <span class="mono id">${esc(r.agent_id)}</span>`;
    }
    $('.review-line', el).innerHTML = line;

    // Spawn 3 races for a free run: while the run is held or finished there
    // is nothing to race for, so the button says so instead of racing.
    const s3 = $('.spawn3', el);
    const heldUntil = r && r.agent_id && !fin && r.claim_expires_at ? r.claim_expires_at : 0;
    s3.dataset.heldUntil = String(heldUntil);
    s3.dataset.finished = fin ? 'true' : '';
    s3.dataset.holder = r && r.agent_id ? r.agent_id : '';
    spawn3State(s3);

    // Freeze toggles: the holder is stopped, then continued.
    const fz = $('.freeze', el);
    const frozen = (S.workers || []).find((w) => w.kind === k && w.alive && w.frozen);
    fz.dataset.thaw = frozen ? frozen.id : '';
    fz.textContent = frozen ? `Thaw ${frozen.id}` : 'Freeze';
    fz.classList.toggle('thaw', !!frozen);

    // A takeover: the agent that claimed after a crash, and where it resumed.
    const tk = $('.takeover', el);
    const successor = r && r.attempt > 1 ? (S.workers || []).find((w) => w.run_id === r.run_id && w.attempt === r.attempt && w.fence === r.fence) : null;
    tk.hidden = !successor;
    if (successor) {
      const from = successor.resumed_from ? `resumed from checkpoint ${successor.resumed_from}` : 'started over: no checkpoint to resume from';
      const text = `⟳ Taken over by ${successor.id} at attempt ${successor.attempt}: ${from}`;
      if (tk.dataset.text !== text) { tk.dataset.text = text; tk.textContent = text; tk.classList.remove('flash'); void tk.offsetWidth; tk.classList.add('flash'); }
    } else { tk.dataset.text = ''; }

    // A zombie: a frozen agent, continued after its claim was taken over,
    // whose late write its fence refused.
    const zb = $('.zombie', el);
    const zombie = (S.workers || []).find((w) => w.kind === k && w.thawed && w.state === 'fenced out');
    zb.hidden = !zombie;
    if (zombie) zb.textContent = `✋ Zombie ${zombie.id}'s late write was refused by its fence ${zombie.fence}: ${zombie.detail || ''}`;
    const pct = r && total ? Math.min(100, (100 * r.last_step) / total) : (r && r.status === 'done' ? 100 : 0);
    $('.progress > span', el).style.width = pct + '%';

    const race = (S.races || []).find((x) => x.kind === k);
    const rb = $('.race', el);
    rb.hidden = !race;
    if (race) {
      const settled = race.members.every((m) => m.outcome === 'won' || m.outcome === 'lost' || !['waiting', 'claiming', 'at barrier'].includes(m.outcome));
      const winners = race.members.filter((m) => m.outcome === 'won').length;
      let title = `Race test: ${race.members.length} agents released together`;
      if (!race.released) title = `Race test: ${race.members.length} agents gathering at the barrier…`;
      else if (settled && winners === 0) title += ' · no winner: the run was not free to claim (held or finished)';
      else if (settled) title += winners === 1 ? ' · exactly one winner' : ` · ${winners} winners`;
      rb.dataset.winners = String(winners);
      const members = race.members.slice().sort((a, b) => (b.outcome === 'won') - (a.outcome === 'won'));
      rb.innerHTML = `<div class="race-title">${esc(title)}</div><ul>` + members.map((m) => {
        if (m.outcome === 'won') return `<li class="won" data-outcome="won">★ ${esc(m.id)} won the claim</li>`;
        if (m.outcome === 'lost') return `<li class="lost" data-outcome="lost">✗ ${esc(m.id)} lost: ${esc(m.reason)}</li>`;
        return `<li class="waiting" data-outcome="${esc(m.outcome)}">… ${esc(m.id)} ${esc(m.outcome)}${m.reason ? ': ' + esc(m.reason) : ''}</li>`;
      }).join('') + '</ul>';
    }
  }
}

// ---- the rest of the page --------------------------------------------------

function renderHeader() {
  const sc = $('#sidecar');
  sc.dataset.healthy = String(!!S.sidecar.healthy);
  const a = $('#sidecar-url');
  a.textContent = S.sidecar.url;
  a.href = S.sidecar.url + '/healthz';
  let meta = S.sidecar.healthy ? `${S.sidecar.backend} · v${S.sidecar.version}` : 'not reachable';
  if (S.sidecar.own) meta += ' · started by the demo';
  $('#sidecar-meta').textContent = meta;
  const cl = $('#console-link');
  cl.hidden = !S.sidecar.own;
  cl.href = S.sidecar.url + '/ui/';
  $('#ttl-hint').textContent = `Claim TTL ${S.claim_ttl}s: a crashed agent's run can be taken over ${S.claim_ttl}s after its last heartbeat. ` +
    `Steps take ${S.paces[S.pace]} at this pace.`;
  for (const b of document.querySelectorAll('#pace button')) b.classList.toggle('on', b.dataset.pace === S.pace);
}

function renderPR() {
  const info = $('#pr-info');
  const p = S.pr;
  info.classList.toggle('empty', !p);
  $('#pr-title').textContent = p ? p.title : 'Please enter a public GitHub PR URL above to begin.';
  $('#pr-author').textContent = p ? '@' + p.author : 'N/A';
  $('#pr-branch').textContent = p ? p.branch : 'N/A';
  $('#pr-ref').textContent = p ? `${p.repo}#${p.number} · ${p.source === 'bundled' ? 'bundled sample PR (offline)' : 'live from GitHub'}` : '';
  $('#pr-files').innerHTML = p ? (p.files || []).map((f) =>
    `<li>${esc(f.path)} <span class="add">+${f.added}</span> <span class="del">−${f.removed}</span></li>`).join('') : '';
  const parent = runOf('aggregate');
  $('#run-id').textContent = S.pipeline ? S.pipeline.parent : 'No Active Run';
  const rs = $('#run-status');
  rs.className = 'badge ' + (parent ? parent.status : '') + (parent && statusLabel(parent) !== parent.status ? ' ready' : '');
  rs.textContent = parent ? statusLabel(parent) : '';
}

const ENDED = new Set(['crashed', 'lost race', 'done', 'idle', 'failed', 'fenced out', 'exited', 'orphaned']);

function renderBoard() {
  const ws = (S.workers || []).slice().sort((a, b) => (b.alive - a.alive));
  const running = ws.filter((w) => w.alive).length;
  $('#running-count').textContent = `${running} Running`;
  if (!ws.length) {
    $('#board').innerHTML = '<div class="empty-note">No active reviewer agents are running.<br>Register a workflow and spawn an agent to start the simulation.</div>';
    return;
  }
  const runs = new Map((S.runs || []).map((r) => [r.run_id, r]));
  $('#board').innerHTML = `<table><thead><tr><th>Agent</th><th>PID</th><th>State</th><th>Attempt</th><th>Fence</th><th>Last checkpoint</th><th>Claim expires</th></tr></thead><tbody>` +
    ws.map((w) => {
      const r = runs.get(w.run_id);
      const holder = r && r.agent_id === w.id && r.status !== 'done' && r.status !== 'failed';
      let state = w.state;
      let shown = state;
      if (w.frozen && w.alive) shown = 'frozen (SIGSTOP)';
      else if (state === 'crashed' && holder) shown = 'crashed · dead holder';
      else if (state === 'fenced out' && w.thawed) shown = 'zombie · write refused';
      const rowCls = (w.alive ? '' : 'ended ') + cls(state) + (w.frozen && w.alive ? ' frozen' : '');
      const step = w.total ? `step ${w.step}/${w.total}` : (w.step ? `step ${w.step}` : '—');
      return `<tr class="${rowCls}" data-agent="${esc(w.id)}" data-kind="${esc(w.kind)}" data-state="${esc(state)}" data-attempt="${w.attempt || 0}" data-fence="${w.fence || 0}" data-alive="${w.alive}">
        <td class="mono"><span class="kind-dot k-${esc(w.kind)}"></span>${esc(w.id)} <span class="muted">${esc(w.lang)}</span></td>
        <td class="mono">${w.pid}</td>
        <td title="${esc(w.run_id || '')}"><span class="state ${cls(state)}">${esc(shown)}</span>${w.detail ? `<div class="detail">${esc(w.detail)}</div>` : ''}</td>
        <td class="mono">${w.attempt || '—'}</td>
        <td class="mono">${w.fence ? short(w.fence) : '—'}</td>
        <td class="mono">${step}</td>
        <td>${holder ? expiry(r.claim_expires_at, false) : '<span class="muted">—</span>'}</td>
      </tr>`;
    }).join('') + '</tbody></table>';
}

function renderState() {
  const runs = S.runs || [];
  if (!S.pipeline) {
    $('#runs').innerHTML = '';
    $('#kv').innerHTML = '<div class="empty-note">No state keys written yet.</div>';
    return;
  }
  const order = [S.pipeline.parent, ...KINDS.map((k) => S.pipeline.children[k])];
  const sorted = order.map((id) => runs.find((r) => r.run_id === id)).filter(Boolean);
  $('#runs').innerHTML = `<div class="subhead">Workflow runs</div><table><thead><tr><th>Run</th><th>Role</th><th>Status</th><th>Attempt</th><th>Fence</th><th>Last step</th><th>Agent</th><th>Claim expires</th></tr></thead><tbody>` +
    sorted.map((r) => {
      const role = r.tags.kind ? `${r.tags.kind} review` : 'review (aggregate)';
      const fin = r.status === 'done' || r.status === 'failed';
      return `<tr data-run="${esc(r.run_id)}" data-status="${esc(r.status)}" data-attempt="${r.attempt}">
        <td class="mono">${esc(r.run_id)}</td><td>${esc(role)}</td><td><span class="badge ${esc(r.status)}">${esc(statusLabel(r))}</span></td>
        <td class="mono">${r.attempt}</td><td class="mono">${short(r.fence)}</td><td class="mono">${r.last_step}</td>
        <td class="mono">${esc(r.agent_id || '—')}</td><td>${expiry(r.claim_expires_at, fin)}</td></tr>`;
    }).join('') + '</tbody></table>';
  const kv = S.kv || [];
  $('#kv').innerHTML = `<div class="subhead">KV store · review/${esc(S.pipeline.parent)}/…</div>` + (kv.length ? `<table><thead><tr><th>Key</th><th>Ver</th><th>Written by</th><th>Value</th></tr></thead><tbody>` +
    kv.map((e) => `<tr data-key="${esc(e.key)}"><td class="mono">${esc(e.key.slice(('review/' + S.pipeline.parent + '/').length))}</td><td class="mono">${short(e.version)}</td>
      <td class="mono">${esc(e.agent_id || '—')}</td><td><div class="kv-preview">${esc(readable(e.preview, true))}</div></td></tr>`).join('') +
    '</tbody></table>' : '<div class="empty-note">No state keys written yet.</div>');
}

function renderReport() {
  const rep = S.report;
  $('#report-card').hidden = !rep;
  if (!rep) { $('#report').innerHTML = ''; return; }
  const counts = ['high', 'medium', 'low', 'info'].filter((s) => rep.counts[s]).map((s) => `<span class="sev ${s}">${rep.counts[s]} ${s}</span>`).join(' ');
  $('#report').innerHTML = `<div class="verdict" data-verdict="${esc(rep.verdict)}">Verdict: <span class="v ${cls(rep.verdict)}">${esc(rep.verdict)}</span> ${counts}</div>
    <div class="muted small">${esc(rep.pr.title)} · ${esc(rep.pr.repo)}#${rep.pr.number} · joined by ${esc(rep.by)} from the three reviews in the store</div>` +
    rep.reviews.map((s) => `<div class="report-section" data-kind="${esc(s.kind)}">
      <h4>${esc(TITLES[s.kind])}: ${esc(s.summary)}</h4>
      <div class="muted small">by ${esc(s.agent || '—')} (${esc(s.lang || '?')}), attempt ${s.attempt || '—'} · ${esc(s.about || '')}</div>
      <ul class="findings">${s.findings.map((f) => `<li><span class="sev ${esc(f.severity)}">${esc(f.severity)}</span>
        <span class="loc">${esc(f.file)}:${f.line}</span> <b>${esc(f.rule)}</b>: ${esc(f.message)}
        <span class="credit">found by <span class="mono id">${esc(f.by || s.agent || '—')}</span>, attempt ${f.attempt || s.attempt || '—'}</span><span class="snip">${esc(f.snippet)}</span></li>`).join('')}</ul>
    </div>`).join('');
}

function render() {
  renderHeader();
  renderPR();
  renderPanels();
  renderBoard();
  renderState();
  renderReport();
  tickExpiries();
  document.body.dataset.ready = 'true';
}

// ---- the log ------------------------------------------------------------------

function shown(level) {
  if (logFilter === 'all') return true;
  if (logFilter === 'tool') return level === 'tool';
  return level !== 'tool';
}
// readable is a value as JSON for people: times as times, not epoch floats.
// With brief, large integers (Redis revisions) are cut to their last six
// digits too.
function readable(v, brief) {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  return JSON.stringify(v, (k, x) => {
    if (typeof x !== 'number') return x;
    if (x > 1e9 && x < 1e10 && /(^|_)at$/.test(k)) return new Date(x * 1000).toISOString().slice(11, 23) + ' UTC';
    if (brief && Number.isInteger(x) && String(x).length > 7) return '…' + String(x).slice(-6);
    return x;
  }, 2);
}
// ID-like words (run ids, agent ids, keys) never break across lines.
function ids(text) {
  return esc(text).replace(/\b((?:wf|sec|perf|style|agg)-[0-9a-z]+|review\/[\w\/.-]+|lease\/[\w\/.-]+)/g, '<span class="mono id">$1</span>')
    .replace(/\b(\d{8,})\b/g, (m) => short(m)); // a Redis revision: 16 digits
}
// A workflow_claim by the agent that already holds the run with the same
// fence is a heartbeat, and is labelled so.
const holding = new Map();
function isHeartbeat(e) {
  if (e.level !== 'tool' || e.tool !== 'workflow_claim' || !e.result || !e.result.claimed) return false;
  const key = e.source + ' ' + (e.args && e.args.run_id);
  const beat = holding.get(key) === e.result.fence;
  holding.set(key, e.result.fence);
  return beat;
}
function toolSummary(e) {
  const a = e.args || {};
  const what = a.run_id || a.key || a.resource_id || a.prefix || '';
  if (e.error) return `<span class="err">✗ ${ids(e.error)}</span>`;
  let res = '✓';
  const r = e.result || {};
  if (e.tool === 'workflow_claim') res = r.claimed ? `✓ claimed · attempt ${r.attempt} · fence ${short(r.fence)}` : `✗ ${ids(r.reason || 'not claimed')}`;
  else if (e.tool === 'workflow_checkpoint') res = `✓ step ${a.step}${a.status ? ' · ' + esc(a.status) : ''}`;
  else if (e.tool === 'state_set') res = `✓ version ${short(r.version)}`;
  else if (e.tool === 'state_get') res = r.found ? `✓ version ${short(r.version)}` : 'not found';
  else if (e.tool === 'workflow_discover') res = `${(r.runs || []).length} run(s)`;
  return `<span class="what">${ids(String(what))}</span> <span class="res">${res}</span>`;
}
function logLine(e) {
  const el = document.createElement('div');
  const beat = isHeartbeat(e);
  el.className = 'l lv-' + e.level + (beat ? ' heartbeat' : '');
  el.dataset.level = e.level;
  el.dataset.source = e.source;
  if (e.event) el.dataset.event = e.event;
  const srcCls = e.kind || e.source;
  const ts = Date.parse(e.ts) / 1000;
  let body;
  if (e.level === 'tool') {
    const json = `<details><summary>JSON</summary><pre>${esc('→ ' + readable(e.args))}\n${esc(e.error ? '✗ ' + e.error : '← ' + readable(e.result))}</pre></details>`;
    body = (beat ? `<span class="beat-label">♥ heartbeat</span> <span class="what">${ids(String((e.args || {}).run_id || ''))}</span>` :
      `<span class="tool">${esc(e.tool)}</span> ${toolSummary(e)}`) +
      ` <span class="ms">${e.ms != null ? e.ms.toFixed(1) + ' ms' : ''}</span> ${json}`;
  } else {
    body = (e.event ? `<span class="ev">${esc(e.event)}</span> ` : '') + `<span class="msg">${ids(e.text)}</span>`;
  }
  el.innerHTML = `<span class="t" data-ts="${ts}" title="${esc(e.ts)}">${ago(ts)}</span> <span class="src ${esc(srcCls)}"><span class="id">${esc(e.source)}</span></span> ${body}`;
  el.hidden = !shown(e.level);
  return el;
}
function appendLogs(entries) {
  const log = $('#log');
  const stick = log.scrollHeight - log.scrollTop - log.clientHeight < 60;
  const frag = document.createDocumentFragment();
  for (const e of entries) frag.appendChild(logLine(e));
  log.appendChild(frag);
  while (log.children.length > 2000) log.removeChild(log.firstChild);
  if (stick) log.scrollTop = log.scrollHeight;
}

// ---- the event stream ----------------------------------------------------------

function connect() {
  const es = new EventSource('/api/events');
  let lost = false;
  es.addEventListener('state', (ev) => {
    S = JSON.parse(ev.data);
    clockOffset = S.now - Date.now() / 1000;
    if (!$('.agent')) buildPanels();
    render();
    if (lost) { lost = false; $('#notice').hidden = true; }
  });
  es.addEventListener('logs', (ev) => {
    $('#log').innerHTML = '';
    appendLogs(JSON.parse(ev.data));
  });
  es.addEventListener('log', (ev) => appendLogs([JSON.parse(ev.data)]));
  es.addEventListener('cleared', () => { $('#log').innerHTML = ''; });
  es.onerror = () => {
    if (!lost) notice('error', 'Lost the connection to the dashboard: reconnecting… (is prreview still running?)');
    lost = true;
  };
}

loadBundled();
connect();
