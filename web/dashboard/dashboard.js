// trainscope live dashboard (served by `trainscope serve`). Polls the JSON API with a ?since=
// cursor, so each poll carries only new records, and redraws the charts (TSCharts from
// web/src/charts.js, dygraphs underneath) without reloading. Hash routes: #/ run list,
// #/run/<name> one run. A token given as ?token=T in the page URL is sent as a Bearer header.
(function () {
  'use strict';
  const C = window.TSCharts;
  const S = window.TrainscopeSchema;  // metric and event names (include/trainscope/schema.h)
  const M = S.metrics, GPU = S.gpu.fields;
  const GPU0_UTIL = S.gpuMetric(0, GPU.util);
  const { el } = C;
  const f = C.fmt;
  const app = document.getElementById('app');
  const crumb = document.getElementById('crumb');
  const conn = document.getElementById('conn');
  const token = new URLSearchParams(location.search).get('token') || '';
  const POLL_LIVE_MS = 1000, POLL_IDLE_MS = 5000, POLL_LIST_MS = 3000;

  let view = null;  // the current view: {stop()}

  async function api(path, opts = {}) {
    const headers = Object.assign({ Accept: 'application/json' }, opts.headers || {});
    if (token) headers.Authorization = 'Bearer ' + token;
    const r = await fetch(path, Object.assign({}, opts, { headers, credentials: 'same-origin', cache: 'no-store' }));
    const text = await r.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (e) { body = { error: text }; }
    if (!r.ok) throw new Error((body && body.error) || ('HTTP ' + r.status));
    conn.textContent = 'updated ' + new Date().toLocaleTimeString();
    conn.classList.remove('down');
    return body;
  }
  function connError(e) {
    conn.textContent = 'connection problem: ' + e.message;
    conn.classList.add('down');
  }

  // A poller that never overlaps itself and stops cleanly.
  function poller(fn, intervalFn) {
    let timer = null, stopped = false;
    async function tick() {
      if (stopped) return;
      try { await fn(); } catch (e) { connError(e); }
      if (!stopped) timer = setTimeout(tick, intervalFn());
    }
    tick();
    return () => { stopped = true; clearTimeout(timer); };
  }

  function clear() { app.textContent = ''; }

  // A run's state: "live", "ended", or "crashed" (a writer died without closing its stream).
  function runState(r) { return r.status === 'crashed' ? 'crashed' : r.live ? 'live' : 'ended'; }
  function deadText(r) {
    return (r.dead_streams || []).map((d) => d.stream + ' died' + (d.last_step >= 0 ? ' at step ' + d.last_step : '') +
      (d.last_record_us ? ' (last record ' + new Date(d.last_record_us / 1000).toLocaleString() + ')' : '')).join('; ');
  }

  // ---- run list -------------------------------------------------------------------------------
  function listView() {
    clear();
    crumb.textContent = 'runs';
    app.append(el('h1', { text: 'Runs' }));
    const holder = el('div', { id: 'runs' }, el('p', { class: 'empty', text: 'Loading…' }));
    app.append(holder);
    const stop = poller(async () => {
      const data = await api('/api/runs');
      holder.textContent = '';
      if (!data.runs.length) {
        holder.append(el('p', { class: 'empty', text: 'No runs here yet: a run is a directory with run.json.' }));
        return;
      }
      C.table(holder, [
        { key: 'name', label: 'run', align: 'left', format: (v) => el('a', { href: '#/run/' + encodeURIComponent(v), text: v, 'data-run': v }) },
        { key: 'live', label: 'state', align: 'left', format: (v, r) => r.error ? el('span', { class: 'error', text: r.error }) : el('span', { class: 'chip ' + runState(r), text: runState(r), title: deadText(r) }) },
        { key: 'last_step', label: 'last step', format: (v) => (v >= 0 ? f.num(v) : '–') },
        { key: 'rules_with_issues', label: 'rules with issues', format: (v, r) => (r.rules ? v + ' / ' + r.rules : '–') },
        { key: 'host', label: 'host', align: 'left' },
        { key: 'start_us', label: 'started', align: 'left', format: (v) => (v ? new Date(v / 1000).toLocaleString() : '–') },
      ], data.runs, { className: 'runs' });
    }, () => POLL_LIST_MS);
    return { stop };
  }

  // ---- live charts ----------------------------------------------------------------------------
  // Keeps one chart per id; recreates it when its series change, else gives it the new data
  // (TSCharts.update: dygraphs' updateOptions({file}), keeping the reader's zoom).
  class LiveChart {
    constructor(container, spec) {
      this.container = container;
      this.spec = spec;  // {id, title, unit, xLabel}
      this.plot = null;
      this.labels = '';
    }
    update(x, series) {
      const labels = series.map((s) => s.label).join('\u0000');
      if (!this.plot || labels !== this.labels) {
        if (this.plot) { C.destroy(this.plot); this.container.textContent = ''; }
        this.plot = C.line(this.container, Object.assign({}, this.spec, { x, series, spanGaps: true }), { height: 220 });
        this.labels = labels;
      } else {
        C.update(this.plot, { x, series });
      }
      const fig = this.container.querySelector('figure');
      if (fig) fig.dataset.points = String(x.length);
    }
  }

  // Aligns several (x -> y) maps on their sorted union of x.
  function align(maps) {
    const xs = new Set();
    for (const m of maps) for (const k of m.map.keys()) xs.add(k);
    const x = Array.from(xs).sort((a, b) => a - b);
    return { x, series: maps.map((m) => ({ label: m.label, values: x.map((k) => (m.map.has(k) ? m.map.get(k) : null)) })) };
  }

  function runView(name) {
    clear();
    crumb.textContent = '/ ' + name;
    const state = {
      cursor: 0, run: null, rules: {},
      scalars: new Map(),   // name -> Map(label -> Map(step -> value))
      steps: new Map(),     // worker -> Map(step -> {ms, dw})
      system: [],           // {w, t, m}
      events: [],           // newest last
      writer: {},
    };
    const header = el('div');
    const kpis = el('div', { class: 'kpis', id: 'kpis' });
    const rulesBox = el('div', { class: 'rules', id: 'rules' }, el('span', { class: 'empty', text: 'No rule has reported yet.' }));
    const lossGrid = el('div', { class: 'grid', id: 'scalar-charts' });
    const perfGrid = el('div', { class: 'grid', id: 'perf-charts' });
    const eventsBox = el('div', { class: 'events card', id: 'events' }, el('span', { class: 'empty', text: 'No events yet.' }));
    app.append(header, kpis,
      el('h2', { text: 'Rules' }), rulesBox,
      el('h2', { text: 'Losses and scalars' }), lossGrid,
      el('h2', { text: 'Step time and system' }), perfGrid,
      el('h2', { text: 'Events' }), eventsBox);

    const charts = new Map();
    function chart(grid, id, title, unit, xLabel) {
      if (!charts.has(id)) {
        const card = el('div', { class: 'card', 'data-card': id });
        grid.append(card);
        charts.set(id, new LiveChart(card, { id, title, unit, xLabel }));
      }
      return charts.get(id);
    }

    function ingest(d) {
      state.run = d.run;
      state.cursor = d.cursor;
      state.rules = d.rules || {};
      state.writer = d.writer || {};
      const multiWorker = new Set(d.scalars.map((s) => s.w)).size > 1 || state.multiWorker;
      if (multiWorker) state.multiWorker = true;
      for (const s of d.scalars) {
        if (!state.scalars.has(s.n)) state.scalars.set(s.n, new Map());
        const label = (s.m === 'TRAIN' ? 'train' : s.m.toLowerCase()) + (state.multiWorker ? ' · ' + s.w : '');
        const byLabel = state.scalars.get(s.n);
        if (!byLabel.has(label)) byLabel.set(label, new Map());
        byLabel.get(label).set(s.s, s.v);
      }
      for (const s of d.steps) {
        if (s.m !== 'TRAIN') continue;
        if (!state.steps.has(s.w)) state.steps.set(s.w, new Map());
        state.steps.get(s.w).set(s.s, { ms: (s.end - s.start) / 1000, dw: s.dw >= 0 ? s.dw / 1000 : null });
      }
      for (const s of d.system) state.system.push(s);
      for (const e of d.rule_events) state.events.push({ t: e.t, kind: 'rule', text: e.rule + ': ' + e.status + (e.message ? ' — ' + e.message : ''), step: e.step, status: e.status });
      // an event that says itself in words (nonfinite_origin's summary) shows those
      for (const e of d.events) state.events.push({ t: e.t, kind: e.kind, text: typeof (e.fields || {}).summary === 'string' ? e.fields.summary : Object.keys(e.fields || {}).length ? JSON.stringify(e.fields) : '', step: (e.fields || {}).step });
    }

    function renderHeader() {
      const r = state.run;
      header.textContent = '';
      const chips = [];
      chips.push(el('span', { class: 'chip ' + runState(r), id: 'run-state', text: runState(r), title: deadText(r) }));
      for (const d of r.dead_streams || []) chips.push(el('span', { class: 'chip crashed', text: deadText({ dead_streams: [d] }) }));
      if (r.stop_requested) chips.push(el('span', { class: 'chip stopping', id: 'stop-state', text: 'stop requested' + (r.stop_reason ? ': ' + r.stop_reason : '') }));
      const stopBtn = el('button', { class: 'danger', id: 'stop', type: 'button', text: 'Stop training', onclick: () => confirmStop(name) });
      if (!r.live || r.stop_requested) stopBtn.disabled = true;
      header.append(el('h1', {}, r.display_name || r.name, ...chips, el('span', { class: 'toolbar' }, stopBtn)));
      const sub = [];
      if (r.id) sub.push('run ' + r.id);
      if (r.host) sub.push('on ' + r.host);
      if (r.framework) sub.push(r.framework);
      if (r.start_us) sub.push('started ' + new Date(r.start_us / 1000).toLocaleString());
      header.append(el('p', { class: 'sub', text: sub.join(' · ') }));
    }

    function kpi(label, value, cls, id) {
      return el('div', { class: 'kpi' + (cls ? ' ' + cls : ''), 'data-kpi': id || label }, el('div', { class: 'v', text: value }), el('div', { class: 'k', text: label }));
    }

    function renderKpis() {
      kpis.textContent = '';
      let lastStep = -1, recent = [];
      for (const m of state.steps.values()) {
        const ks = Array.from(m.keys());
        if (!ks.length) continue;
        lastStep = Math.max(lastStep, ks[ks.length - 1]);
        recent = recent.concat(Array.from(m.values()).slice(-50).map((v) => v.ms));
      }
      recent.sort((a, b) => a - b);
      const median = recent.length ? recent[Math.floor(recent.length / 2)] : null;
      kpis.append(kpi('last step', lastStep >= 0 ? f.num(lastStep) : '–', '', 'last_step'));
      kpis.append(kpi('step time (median of last 50)', median === null ? '–' : f.num(median) + ' ms', '', 'step_time'));
      const loss = state.scalars.get('losses/loss');
      if (loss && loss.has('train')) {
        const vals = Array.from(loss.get('train').values());
        kpis.append(kpi('loss', f.num(vals[vals.length - 1]), '', 'loss'));
      }
      const last = state.system.length ? state.system[state.system.length - 1].m : null;
      if (last && last[GPU0_UTIL] !== undefined) kpis.append(kpi('GPU 0 utilisation', f.num(last[GPU0_UTIL]) + '%', '', 'gpu_util'));
      if (last && last[M.cpu_util] !== undefined) kpis.append(kpi('CPU utilisation', f.num(last[M.cpu_util]) + '%', '', 'cpu_util'));
      let dropped = 0;
      for (const w of Object.values(state.writer)) dropped += w.records_dropped || 0;
      kpis.append(kpi('records dropped', f.num(dropped), dropped > 0 ? 'bad' : '', 'dropped'));
    }

    function renderRules() {
      const names = Object.keys(state.rules).sort();
      if (!names.length) return;
      rulesBox.textContent = '';
      for (const n of names) {
        const r = state.rules[n];
        const when = r.step >= 0 ? 'step ' + r.step : '';
        rulesBox.append(el('div', { class: 'rule', 'data-rule': n, 'data-status': r.status, title: r.message || '' },
          el('span', { class: 'name', text: n }),
          el('span', { class: 'badge', text: r.status }),
          when ? el('span', { class: 'msg', text: when }) : null,
          (r.status === 'IssuesFound' || r.status === 'NoData') && r.message ? el('span', { class: 'msg', text: r.message }) : null));
      }
    }

    function renderEvents() {
      if (!state.events.length) return;
      eventsBox.textContent = '';
      const sorted = state.events.slice().sort((a, b) => a.t - b.t);
      const rows = sorted.slice(-200).reverse().map((e) => ({
        time: new Date(e.t / 1000).toLocaleTimeString(), kind: e.kind, step: e.step, text: e.text, status: e.status,
      }));
      C.table(eventsBox, [
        { key: 'time', label: 'time', align: 'left' },
        { key: 'kind', label: 'event', align: 'left' },
        { key: 'step', label: 'step', format: (v) => (v === undefined || v === null || v < 0 ? '–' : v) },
        { key: 'text', label: 'details', align: 'left' },
      ], rows, { className: 'event-table' });
    }

    function renderCharts() {
      const names = Array.from(state.scalars.keys()).sort();
      if (!names.length && !lossGrid.children.length) lossGrid.append(el('p', { class: 'empty', id: 'no-scalars', text: 'No scalars recorded yet.' }));
      if (names.length) { const n = document.getElementById('no-scalars'); if (n) n.remove(); }
      for (const n of names) {
        const byLabel = state.scalars.get(n);
        const { x, series } = align(Array.from(byLabel.entries()).sort().map(([label, map]) => ({ label, map })));
        chart(lossGrid, 'scalar:' + n, n, '', 'step').update(x, series);
      }
      if (state.steps.size) {
        const maps = [];
        for (const [w, m] of state.steps) {
          const ms = new Map(), dw = new Map();
          for (const [s, v] of m) { ms.set(s, v.ms); if (v.dw !== null) dw.set(s, v.dw); }
          const suffix = state.steps.size > 1 ? ' · ' + w : '';
          maps.push({ label: 'step' + suffix, map: ms });
          if (dw.size) maps.push({ label: 'data wait' + suffix, map: dw });
        }
        const { x, series } = align(maps);
        chart(perfGrid, 'step_time', 'Step time', 'ms', 'step').update(x, series);
      }
      if (state.system.length) {
        const t0 = state.run.start_us || state.system[0].t;
        const groups = { cpu: new Map(), mem: new Map(), gpu: new Map(), gpumem: new Map() };
        const streams = new Set(state.system.map((s) => s.w));
        for (const s of state.system) {
          const x = (s.t - t0) / 1e6;
          const sfx = streams.size > 1 ? ' · ' + s.w : '';
          for (const [k, v] of Object.entries(s.m)) {
            let g = null, label = null;
            if (k === M.cpu_util) { g = 'cpu'; label = 'cpu' + sfx; }
            else if (k === M.mem_used_bytes) { g = 'mem'; label = 'used' + sfx; }
            else {
              const m = S.parseGpuMetric(k);
              if (m && (m.field === GPU.util || m.field === GPU.mem_used_bytes)) {
                g = m.field === GPU.util ? 'gpu' : 'gpumem'; label = 'gpu' + m.index + sfx;
              }
            }
            if (!g) continue;
            if (!groups[g].has(label)) groups[g].set(label, new Map());
            groups[g].get(label).set(x, v);
          }
        }
        const defs = [['cpu', 'CPU utilisation', '%'], ['mem', 'Memory used', 'bytes'], ['gpu', 'GPU utilisation', '%'], ['gpumem', 'GPU memory used', 'bytes']];
        for (const [g, title, unit] of defs) {
          if (!groups[g].size) continue;
          const { x, series } = align(Array.from(groups[g].entries()).map(([label, map]) => ({ label, map })));
          chart(perfGrid, 'system:' + g, title, unit, 'time').update(x, series);
        }
      }
    }

    let idle = false;
    const stop = poller(async () => {
      const d = await api('/api/runs/' + encodeURIComponent(name) + '?since=' + state.cursor);
      if (d.error) { app.textContent = ''; app.append(el('p', { class: 'error', text: d.error })); return; }
      ingest(d);
      renderHeader();
      renderKpis();
      renderRules();
      renderCharts();
      if (d.rule_events.length || d.events.length || !eventsBox.querySelector('table')) renderEvents();
      idle = !d.run.live;
    }, () => (idle ? POLL_IDLE_MS : POLL_LIVE_MS));
    return { stop: () => { stop(); for (const c of charts.values()) if (c.plot) C.destroy(c.plot); } };
  }

  // ---- stop button with confirmation ---------------------------------------------------------
  function confirmStop(name) {
    const modal = document.getElementById('confirm');
    const ok = document.getElementById('confirm-ok');
    const cancel = document.getElementById('confirm-cancel');
    const reason = document.getElementById('confirm-reason');
    modal.hidden = false;
    ok.focus();
    const close = () => { modal.hidden = true; ok.onclick = null; cancel.onclick = null; };
    cancel.onclick = close;
    ok.onclick = async () => {
      ok.disabled = true;
      try {
        await api('/api/runs/' + encodeURIComponent(name) + '/stop', {
          method: 'POST', headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ reason: reason.value || 'stopped from the dashboard' }),
        });
        const b = document.getElementById('stop');
        if (b) { b.disabled = true; b.textContent = 'Stop requested'; }
      } catch (e) {
        connError(e);
      } finally {
        ok.disabled = false;
        close();
      }
    };
  }
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') document.getElementById('confirm').hidden = true;
  });

  // ---- routing -------------------------------------------------------------------------------
  function route() {
    if (view) view.stop();
    const m = /^#\/run\/(.+)$/.exec(location.hash);
    view = m ? runView(decodeURIComponent(m[1])) : listView();
  }
  window.addEventListener('hashchange', route);
  route();
})();
