// trainscope report page: reads the JSON blob (#ts-data) that the C++ side injected and renders
// the sections that have data, findings first. Charts come from the shared TSCharts module.
(function () {
  'use strict';
  const C = window.TSCharts;
  const { el } = C;
  const f = C.fmt;
  const data = JSON.parse(document.getElementById('ts-data').textContent);
  const app = document.getElementById('app');
  const nav = document.getElementById('nav');

  function section(id, title, ...children) {
    const s = el('section', { id }, el('h2', { text: title }), ...children);
    app.append(s);
    nav.append(el('a', { href: '#' + id, text: title }));
    return s;
  }
  function kpi(label, value, cls) {
    return el('div', { class: 'kpi' + (cls ? ' ' + cls : '') }, el('div', { class: 'v', text: value }), el('div', { class: 'k', text: label }));
  }

  if (data.page === 'compare') { renderCompare(data); return; }

  const s = data.summary;
  const series = data.series || {};
  const markers = series.markers || [];
  const m = s.measurements || {};

  // ---- header, verdict, key numbers --------------------------------------------------------
  const worst = s.findings.length ? s.findings[0].severity : null;
  const verdict = worst ? s.findings.length + (s.findings.length === 1 ? ' finding' : ' findings') : 'healthy';
  app.append(el('h1', {}, s.run.name || s.run.dir, el('span', { class: 'verdict ' + (worst || ''), text: verdict })));
  const subParts = [];
  if (s.run.id) subParts.push('run ' + s.run.id);
  if (s.run.host) subParts.push('on ' + s.run.host);
  if (s.run.framework) subParts.push(s.run.framework);
  const sub = el('p', { class: 'sub' }, subParts.join(' · '));
  if (s.run.command) sub.append(' · ', el('code', { text: s.run.command }));
  app.append(sub);

  const kpis = el('div', { class: 'kpis' });
  kpis.append(kpi('duration', f.duration(s.job.duration_s)));
  if (s.job.steps) kpis.append(kpi('steps', f.num(s.job.steps)));
  if (s.step_time.n) kpis.append(kpi('step time p50', f.num(s.step_time.p50) + ' ms'));
  if (m.gpu_count) kpis.append(kpi('GPU utilisation', f.num(m.gpu_util_mean) + '%', m.gpu_util_mean < 30 ? 'bad' : m.gpu_util_mean < 60 ? 'warn' : ''));
  if (m.gpu_idle_share !== null && m.gpu_idle_share !== undefined) kpis.append(kpi('GPU idle', f.pct(m.gpu_idle_share), m.gpu_idle_share > 0.3 ? 'bad' : ''));
  if (m.data_wait_share !== null && m.data_wait_share !== undefined) kpis.append(kpi('data wait', f.pct(m.data_wait_share), m.data_wait_share > 0.3 ? 'bad' : m.data_wait_share > 0.1 ? 'warn' : ''));
  if (s.cost.available) kpis.append(kpi('cost', f.money(s.cost.total_usd)));
  app.append(kpis);

  // ---- findings ----------------------------------------------------------------------------
  {
    const sec = section('findings', 'Findings');
    if (!s.findings.length) {
      const clean = s.rules.clean.length ? ` ${s.rules.clean.length} rules checked the run and found no issues (${s.rules.clean.join(', ')}).` : '';
      sec.append(el('div', { class: 'ok', text: 'No rule fired.' + clean }));
    }
    for (const x of (s.rules.no_data || [])) {
      sec.append(el('div', { class: 'nodata', 'data-rule': x.rule, text: 'no data: ' + x.rule + ' (' + x.reason + ')' }));
    }
    for (const x of s.findings) {
      const when = [];
      if (x.step >= 0) when.push('step ' + x.step);
      if (x.wall_us && s.job.start_us) when.push(f.duration((x.wall_us - s.job.start_us) / 1e6) + ' into the run');
      if (x.firings > 1) when.push('fired ' + x.firings + ' times');
      sec.append(el('div', { class: 'finding ' + x.severity, 'data-rule': x.rule },
        el('div', { class: 'head' }, el('span', { class: 'sev ' + x.severity, text: x.severity }),
          el('span', { class: 'title', text: x.title }), el('span', { class: 'meta', text: x.rule + (when.length ? ' · ' + when.join(' · ') : '') })),
        x.message ? el('div', { class: 'meta', text: x.message }) : null,
        x.evidence ? el('div', { class: 'evidence', text: x.evidence }) : null,
        el('p', { class: 'rec', text: x.recommendation })));
    }
  }

  // ---- cost & advice -------------------------------------------------------------------------
  if (s.cost.available || (s.advice && s.advice.length)) {
    const sec = section('cost', 'Cost and instance');
    if (s.cost.available) {
      const money = el('div', { class: 'money' });
      money.append(kpi('run cost at ' + f.money(s.cost.price_per_hour) + '/h', f.money(s.cost.total_usd)));
      if (s.cost.gpu_idle_usd !== null) money.append(kpi('spent while the GPU was idle', f.money(s.cost.gpu_idle_usd), s.cost.gpu_idle_usd > 0.2 * s.cost.total_usd ? 'bad' : ''));
      if (s.cost.after_first_finding_usd !== null) money.append(kpi('after the first finding (an automatic stop saves this)', f.money(s.cost.after_first_finding_usd), 'warn'));
      if (s.cost.checkpoint_usd) money.append(kpi('spent checkpointing', f.money(s.cost.checkpoint_usd)));
      sec.append(money, el('p', { class: 'ts-note', text: 'Price: ' + s.cost.price_source + '. List prices are approximate; pass --price-per-hour for exact figures.' }));
    } else {
      sec.append(el('p', { class: 'ts-note', text: 'No price known: run `trainscope report RUN --instance TYPE` or `--price-per-hour USD` to see what the run cost.' }));
    }
    for (const a of s.advice || []) {
      sec.append(el('div', { class: 'advice', 'data-kind': a.kind },
        el('div', {}, a.text, a.saving_usd > 0 ? el('span', { class: 'save', text: ' Saves about ' + f.money(a.saving_usd) + ' per run (' + f.pct(a.saving_share) + ').' }) : null),
        a.evidence ? el('div', { class: 'ev', text: 'Evidence: ' + a.evidence }) : null));
    }
  }

  // ---- job summary ---------------------------------------------------------------------------
  {
    const sec = section('job', 'Job summary');
    C.table(sec, [{ key: 'k', label: '', align: 'left' }, { key: 'v', label: '', align: 'left' }], [
      { k: 'Start', v: s.job.start }, { k: 'End', v: s.job.end },
      { k: 'Duration', v: f.duration(s.job.duration_s) },
      { k: 'Initialisation (start → first step)', v: f.duration(s.job.initialization_s) },
      { k: 'Training loop', v: f.duration(s.job.training_loop_s) },
      { k: 'Finalisation (last step → end)', v: f.duration(s.job.finalization_s) },
      { k: 'Steps', v: f.num(s.job.steps) }, { k: 'Workers', v: s.job.workers },
    ]);
    if (s.job.duration_s > 0 && s.job.steps) {
      C.shareBar(sec, [
        { label: 'initialisation', value: s.job.initialization_s, color: '#94a3b8', text: f.duration(s.job.initialization_s) },
        { label: 'training loop', value: s.job.training_loop_s, color: '#2563eb', text: f.duration(s.job.training_loop_s) },
        { label: 'finalisation', value: s.job.finalization_s, color: '#cbd5e1', text: f.duration(s.job.finalization_s) }]);
    }
  }

  // ---- training curves -----------------------------------------------------------------------
  const curves = series.curves || [];
  const health = Object.entries(s.tensor_health || {});
  if (curves.length || series.gradients || health.length) {
    const sec = section('training', 'Training curves');
    const grid = el('div', { class: 'grid2' });
    sec.append(grid);
    for (const c of curves) C.line(grid, c, { markers, markerKey: 'step' });
    if (series.gradients) C.heatmap(sec, series.gradients);
    if (health.length) {
      sec.append(el('h3', { text: 'Tensor health per collection' }));
      C.table(sec, [{ key: 'c', label: 'collection', align: 'left' }, { key: 'n', label: 'NaN / Inf values', format: (v) => (v ? el('b', { style: 'color:var(--critical)', text: f.num(v) }) : '0') }, { key: 'z', label: 'zero values', format: (v) => f.num(v) }],
        health.map(([c, h]) => ({ c, n: h.nonfinite, z: h.zeros })));
    }
  }

  // ---- step time -----------------------------------------------------------------------------
  if (series.steps && series.steps.curve) {
    const sec = section('steps', 'Step time');
    const st = s.step_time;
    sec.append(el('p', { class: 'ts-note', text: `p50 ${f.num(st.p50)} ms · p95 ${f.num(st.p95)} ms · p99 ${f.num(st.p99)} ms · max ${f.num(st.max)} ms · ${st.outliers} outlier steps` + (st.outlier_steps.length ? ' (' + st.outlier_steps.slice(0, 12).join(', ') + (st.outlier_steps.length > 12 ? ', …' : '') + ')' : '') }));
    const ph = st.phase_share || {};
    if (Object.keys(ph).length) {
      sec.append(el('h3', { text: 'Where a step goes' }));
      const colors = { data_wait: '#dc2626', forward: '#2563eb', backward: '#7c3aed', optimizer: '#059669', other: '#94a3b8' };
      C.shareBar(sec, Object.keys(colors).filter((k) => k in ph).map((k) => ({ label: k.replace('_', ' '), value: ph[k], color: colors[k] })));
    }
    const rk = s.ranks || {};
    if ((rk.per_rank || []).length) {
      sec.append(el('h3', { text: `Ranks (${rk.per_rank.length}): medians per TRAIN step` }));
      sec.append(el('p', { class: 'ts-note', text: rk.why || 'Ranks balanced: busy time (step time minus the wait for the others in the gradient all-reduce) within 10%.' }));
      const ms = (v) => (v === null || v === undefined ? '–' : f.num(v) + ' ms');
      C.table(sec, [{ key: 'worker', label: 'rank', align: 'left', format: (v) => (v === rk.slowest ? el('b', { style: 'color:var(--critical)', text: v + ' (slowest)' }) : v) },
        { key: 'step_ms', label: 'step', format: ms }, { key: 'busy_ms', label: 'busy', format: ms }, { key: 'collective_wait_ms', label: 'waits for others', format: ms },
        { key: 'data_wait_ms', label: 'data wait', format: ms }, { key: 'forward_ms', label: 'forward', format: ms }, { key: 'backward_ms', label: 'backward compute', format: ms },
        { key: 'optimizer_ms', label: 'optimizer', format: ms }, { key: 'other_ms', label: 'other', format: ms }], rk.per_rank);
    }
    if ((s.stacks || []).length) {
      sec.append(el('h3', { text: 'Where each rank was stuck (captured stacks)' }));
      C.table(sec, [{ key: 'worker', label: 'rank', align: 'left' }, { key: 'where', label: 'main thread in', align: 'left' }, { key: 'reason', label: 'captured because', align: 'left' }], s.stacks);
      sec.append(el('p', { class: 'ts-note', text: 'Full stacks of every thread: trainscope stacks RUN (files in RUN/stacks/).' }));
    }
    const grid = el('div', { class: 'grid2' });
    sec.append(grid);
    C.line(grid, series.steps.curve, { markers, markerKey: 'step' });
    if (series.steps.histogram) C.histogram(grid, series.steps.histogram);
    if (series.steps.ranks) C.line(grid, series.steps.ranks, { markers, markerKey: 'step' });
  }

  // ---- system usage --------------------------------------------------------------------------
  const nodes = series.system || [];
  if (nodes.length) {
    const sec = section('system', 'System usage');
    if (m.gpu_count) {
      sec.append(el('p', {}, `GPU idle (below 10% utilisation) ${f.pct(m.gpu_idle_share)} of the time; utilisation p50 ${f.num(m.gpu_util_p50)}%, p95 ${f.num(m.gpu_util_p95)}%.`));
    } else {
      sec.append(el('p', { text: 'No GPU was recorded in this run.' }));
    }
    for (const n of nodes) {
      if (nodes.length > 1) sec.append(el('h3', { text: n.node }));
      const grid = el('div', { class: 'grid2' });
      sec.append(grid);
      for (const c of n.charts) C.line(grid, c, { markers, markerKey: 't', stepClock: series.step_clock });
      const rows = (s.system || []).filter((r) => r.node === n.node);
      if (rows.length) {
        const fmtv = (v, r) => C.fmt.withUnit(v, r.unit);
        C.table(sec, [{ key: 'metric', label: 'metric', align: 'left' }, { key: 'p50', label: 'p50', format: fmtv }, { key: 'p95', label: 'p95', format: fmtv }, { key: 'p99', label: 'p99', format: fmtv }, { key: 'max', label: 'max', format: fmtv }], rows);
      }
    }
  }

  // ---- profiled window -----------------------------------------------------------------------
  if ((s.profile || []).length) {
    const sec = section('profile', 'Profiled window');
    s.profile.forEach((p, i) => {
      sec.append(el('h3', { text: `${p.worker}: steps ${p.start_step}–${p.start_step + p.num_steps - 1}` + (p.step_time_us ? ` (mean step ${f.num(p.step_time_us / 1000)} ms)` : '') }));
      const link = (series.trace_links || [])[i];
      if (link) sec.append(el('p', {}, 'Full timeline: ', el('a', { href: link, text: p.trace_file }), ' (open in Perfetto or chrome://tracing).'));
      const share = (v) => (v === null || v === undefined ? '–' : f.pct(v));
      const us = (v) => f.num(v / 1000) + ' ms';
      if (p.top_operators.length) {
        sec.append(el('h3', { text: 'Top operators' }));
        C.table(sec, [{ key: 'name', label: 'operator', align: 'left' }, { key: 'calls', label: 'calls' }, { key: 'total_us', label: 'total', format: us }, { key: 'self_us', label: 'self', format: us }, { key: 'share', label: 'share of step time', format: share }], p.top_operators);
      }
      if (p.top_functions.length) {
        sec.append(el('h3', { text: 'Top Python functions' }));
        C.table(sec, [{ key: 'name', label: 'function', align: 'left' }, { key: 'file', label: 'where', align: 'left', format: (v, r) => (v ? v + ':' + r.line : '') }, { key: 'calls', label: 'calls' }, { key: 'total_us', label: 'total', format: us }, { key: 'self_us', label: 'self', format: us }, { key: 'share', label: 'share of step time', format: share }], p.top_functions);
      }
    });
  }

  // ---- events --------------------------------------------------------------------------------
  const ev = s.events || {};
  if (ev.checkpoints || ev.preemptions || ev.resumes || ev.rollbacks) {
    const sec = section('events', 'Checkpoints and interruptions');
    const k = el('div', { class: 'kpis' });
    k.append(kpi('checkpoints', String(ev.checkpoints)), kpi('time checkpointing', f.duration(ev.checkpoint_total_s)),
      kpi('preemptions', String(ev.preemptions)), kpi('resumes', String(ev.resumes)), kpi('rollbacks', String(ev.rollbacks)));
    if (ev.lost_s) k.append(kpi('lost to interruptions', f.duration(ev.lost_s), 'warn'));
    sec.append(k);
  }

  const foot = document.getElementById('footer');
  foot.append(`Generated by ${s.generator} at ${data.generated}. Machine-readable: summary.json (schema ${s.schema_version}).`);
  if (s.data_quality && s.data_quality.corrupt_regions) foot.append(` ${s.data_quality.corrupt_regions} corrupt regions were skipped while reading.`);

  // ---- compare page --------------------------------------------------------------------------
  function renderCompare(d) {
    app.append(el('h1', { text: d.title || 'Run comparison' }));
    const sec = section('compare', 'Side by side');
    C.table(sec, [{ key: 'metric', label: 'metric', align: 'left' }, { key: 'a', label: d.a_label || 'A' }, { key: 'b', label: d.b_label || 'B' }, { key: 'change', label: 'change' }], d.rows || []);
    if ((d.changes || []).length) {
      const ch = section('changes', 'What changed');
      for (const c of d.changes) ch.append(el('div', { class: 'advice', text: c }));
    }
    if ((d.recurring || []).length) {
      const r = section('recurring', 'Recurring bottlenecks (all recorded runs)');
      C.table(r, [{ key: 'rule', label: 'rule', align: 'left' }, { key: 'runs', label: 'runs where it fired' }], d.recurring);
    }
    document.getElementById('footer').append('Generated by trainscope compare.');
  }
})();
