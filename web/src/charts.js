// trainscope shared chart module: line charts, histograms (uPlot), heat maps (canvas) and small
// tables. Used by the HTML report and the live dashboard. Plain browser JS: defines the global
// `TSCharts` (and module.exports under CommonJS). Needs the global `uPlot` for line/histogram.
//
// Chart specs (what the C++ side emits, see docs/report.md):
//   line:      {id, kind:"line", title, xLabel, unit, x:[...], series:[{label, values:[...]}],
//               spanGaps?}
//   histogram: {id, kind:"histogram", title, unit, edges:[n+1], counts:[n], overflow?}
//   heatmap:   {id, kind:"heatmap", title, rows:[names], cols:[x labels], values:[[...]]
//               (row-major; null = no data, "nan" = non-finite), xLabel, colorLabel}
(function (root) {
  'use strict';

  const palette = ['#2563eb', '#e11d48', '#059669', '#d97706', '#7c3aed', '#0891b2', '#db2777',
    '#65a30d', '#ea580c', '#4f46e5', '#0d9488', '#9333ea'];
  const severityColor = { critical: '#dc2626', warning: '#d97706', info: '#2563eb' };

  // ---- number formatting --------------------------------------------------------------------
  function num(v, digits = 3) {
    if (v === null || v === undefined || Number.isNaN(v)) return '–';
    if (typeof v !== 'number') return String(v);
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
    if (a >= 100) return Math.round(v).toLocaleString('en-US');
    return Number(v.toPrecision(digits)).toString();
  }
  function pct(share) { return share === null || share === undefined ? '–' : Math.round(share * 100) + '%'; }
  function bytes(v) {
    if (v === null || v === undefined) return '–';
    const u = ['B', 'KB', 'MB', 'GB', 'TB'];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return num(v) + ' ' + u[i];
  }
  function money(v) {
    if (v === null || v === undefined) return '–';
    return '$' + (Math.abs(v) >= 100 ? Math.round(v).toLocaleString('en-US') : v.toFixed(2));
  }
  function duration(s) {
    if (s === null || s === undefined) return '–';
    if (s < 60) return s.toFixed(1) + ' s';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + String(Math.round(s % 60)).padStart(2, '0') + 's';
    const m = Math.round(s / 60);
    return Math.floor(m / 60) + 'h ' + String(m % 60).padStart(2, '0') + 'm';
  }
  function withUnit(v, unit) {
    if (unit === '%') return num(v) + '%';
    if (unit === 'bytes') return bytes(v);
    if (unit === 'bytes/s') return bytes(v) + '/s';
    return num(v) + (unit ? ' ' + unit : '');
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k === 'html') e.innerHTML = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  // ---- frame: title + chart body -------------------------------------------------------------
  function frame(container, spec) {
    const fig = el('figure', { class: 'ts-chart', 'data-chart': spec.id || '' });
    if (spec.title) fig.append(el('figcaption', { text: spec.title + (spec.unit ? ' (' + spec.unit + ')' : '') }));
    const body = el('div', { class: 'ts-chart-body' });
    fig.append(body);
    container.append(fig);
    return body;
  }

  function widthOf(node) { return Math.max(280, Math.floor(node.clientWidth || node.parentNode.clientWidth || 600)); }

  const live = [];
  let resizeObserver = null;
  function track(plot, body) {
    live.push({ plot, body });
    if (!resizeObserver && typeof ResizeObserver !== 'undefined') {
      resizeObserver = new ResizeObserver(() => {
        for (const { plot: p, body: b } of live) {
          const w = widthOf(b);
          if (Math.abs(w - p.width) > 4) p.setSize({ width: w, height: p.height });
        }
      });
    }
    if (resizeObserver) resizeObserver.observe(body);
  }

  // Vertical markers (e.g. when a rule fired) drawn over the plot area.
  function markerPlugin(markers, key) {
    return {
      hooks: {
        draw: [(u) => {
          const ctx = u.ctx;
          ctx.save();
          const rowsRight = [-1e9, -1e9, -1e9];  // right edge of the last label on each row
          for (const m of markers) {
            const v = m[key];
            if (v === null || v === undefined || v < u.scales.x.min || v > u.scales.x.max) continue;
            const x = Math.round(u.valToPos(v, 'x', true));
            ctx.strokeStyle = severityColor[m.severity] || '#dc2626';
            ctx.lineWidth = 1.5 * devicePixelRatio;
            ctx.setLineDash([5 * devicePixelRatio, 4 * devicePixelRatio]);
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            ctx.setLineDash([]);
            // Label on the first row where it does not overlap another; none if all are taken.
            ctx.font = `${11 * devicePixelRatio}px system-ui, sans-serif`;
            const w = ctx.measureText(m.label).width;
            const tx = Math.min(x + 4 * devicePixelRatio, u.bbox.left + u.bbox.width - w);
            const row = rowsRight.findIndex((r) => tx > r + 6 * devicePixelRatio);
            if (row < 0) continue;
            rowsRight[row] = tx + w;
            const ty = u.bbox.top + (12 + 13 * row) * devicePixelRatio;
            ctx.fillStyle = 'rgba(255,255,255,0.85)';
            ctx.fillRect(tx - 2, ty - 10 * devicePixelRatio, w + 4, 13 * devicePixelRatio);
            ctx.fillStyle = ctx.strokeStyle;
            ctx.fillText(m.label, tx, ty);
          }
          ctx.restore();
        }],
      },
    };
  }

  // opts: {height, markers:[{t|step, label, severity}], markerKey:"t"|"step",
  //        stepClock:[[t, step], ...] (shows the step under the cursor on time axes)}
  function line(container, spec, opts = {}) {
    const body = frame(container, spec);
    const stepAt = (t) => {
      const c = opts.stepClock;
      if (!c || !c.length) return null;
      let lo = 0, hi = c.length - 1;
      if (t < c[0][0]) return null;
      while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (c[mid][0] <= t) lo = mid; else hi = mid - 1; }
      return c[lo][1];
    };
    const xValue = (u, v) => {
      if (v === null || v === undefined) return '–';
      if (spec.xLabel === 'step') return 'step ' + Math.round(v);
      const s = stepAt(v);
      return duration(v) + (s !== null ? ' · step ' + s : '');
    };
    const series = [{ label: spec.xLabel || 'x', value: xValue }];
    spec.series.forEach((s, i) => series.push({
      label: s.label,
      stroke: palette[i % palette.length],
      width: 1.5,
      spanGaps: !!spec.spanGaps,
      value: (u, v) => withUnit(v, spec.unit),
      points: { show: spec.x.length < 60 },
    }));
    const plugins = [];
    if (opts.markers && opts.markers.length) plugins.push(markerPlugin(opts.markers, opts.markerKey || 't'));
    const uopts = {
      width: widthOf(body),
      height: opts.height || 220,
      series,
      plugins,
      scales: { x: { time: false } },
      axes: [
        { label: spec.xLabel || '', values: (u, vals) => vals.map((v) => (spec.xLabel === 'step' ? num(v) : duration(v))) },
        { values: (u, vals) => vals.map((v) => withUnit(v, spec.unit)), size: 70 },
      ],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
    };
    const data = [spec.x, ...spec.series.map((s) => s.values)];
    const plot = new root.uPlot(uopts, data, body);
    track(plot, body);
    return plot;
  }

  function histogram(container, spec, opts = {}) {
    const body = frame(container, spec);
    const edges = spec.edges, counts = spec.counts;
    const x = counts.map((_, i) => (edges[i] + edges[i + 1]) / 2);
    const bars = root.uPlot.paths && root.uPlot.paths.bars ? root.uPlot.paths.bars({ size: [0.92, 80] }) : undefined;
    const uopts = {
      width: widthOf(body),
      height: opts.height || 200,
      scales: { x: { time: false, range: [edges[0], edges[edges.length - 1]] } },
      series: [
        { label: spec.unit || 'x', value: (u, v) => (v === null || v === undefined ? '–' : withUnit(v, spec.unit)) },
        { label: 'steps', stroke: palette[0], fill: 'rgba(37,99,235,0.35)', paths: bars, points: { show: false } },
      ],
      axes: [{ values: (u, vals) => vals.map((v) => withUnit(v, spec.unit)) }, { size: 60 }],
      legend: { live: true },
    };
    const plot = new root.uPlot(uopts, [x, counts], body);
    if (spec.overflow) body.parentNode.append(el('p', { class: 'ts-note', text: spec.overflow + ' longer steps not shown (beyond ' + withUnit(edges[edges.length - 1], spec.unit) + ')' }));
    track(plot, body);
    return plot;
  }

  // Viridis-like colour scale, t in [0, 1].
  const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function colour(t) {
    t = Math.min(1, Math.max(0, t)) * (stops.length - 1);
    const i = Math.min(stops.length - 2, Math.floor(t)), f = t - i;
    const a = stops[i], b = stops[i + 1];
    return `rgb(${Math.round(a[0] + (b[0] - a[0]) * f)},${Math.round(a[1] + (b[1] - a[1]) * f)},${Math.round(a[2] + (b[2] - a[2]) * f)})`;
  }

  function heatmap(container, spec, opts = {}) {
    const body = frame(container, spec);
    const rows = spec.rows, cols = spec.cols, values = spec.values;
    let lo = Infinity, hi = -Infinity;
    for (const r of values) for (const v of r) if (typeof v === 'number') { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    if (!(hi > lo)) { hi = lo + 1; }
    const labelW = Math.min(220, 12 + 7 * Math.max(...rows.map((r) => r.length), 4));
    const rowH = Math.max(8, Math.min(22, Math.floor(360 / Math.max(1, rows.length))));
    const cssW = widthOf(body), cssH = rows.length * rowH + 44;
    const canvas = el('canvas', { class: 'ts-heatmap' });
    const dpr = root.devicePixelRatio || 1;
    canvas.width = Math.round(cssW * dpr);
    canvas.height = Math.round(cssH * dpr);
    canvas.style.width = cssW + 'px';
    canvas.style.height = cssH + 'px';
    body.append(canvas);
    const tip = el('div', { class: 'ts-tip' });
    body.append(tip);
    const plotW = cssW - labelW - 8, cellW = plotW / Math.max(1, cols.length);
    const ctx = canvas.getContext('2d');
    ctx.scale(dpr, dpr);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    rows.forEach((name, r) => {
      ctx.fillStyle = '#334155';
      ctx.textAlign = 'right';
      ctx.fillText(name.length > 30 ? '…' + name.slice(-29) : name, labelW - 6, r * rowH + rowH / 2);
      values[r].forEach((v, c) => {
        if (v === null) return;
        ctx.fillStyle = v === 'nan' ? '#dc2626' : colour((v - lo) / (hi - lo));
        ctx.fillRect(labelW + c * cellW, r * rowH, Math.ceil(cellW), rowH - 1);
      });
    });
    // x axis: a few step labels; colour legend
    ctx.fillStyle = '#475569';
    ctx.textAlign = 'center';
    const ticks = Math.min(6, cols.length);
    for (let i = 0; i < ticks; i++) {
      const c = Math.round(i * (cols.length - 1) / Math.max(1, ticks - 1));
      ctx.fillText(num(cols[c]), labelW + (c + 0.5) * cellW, rows.length * rowH + 10);
    }
    ctx.textAlign = 'left';
    ctx.fillText(spec.xLabel || '', labelW, rows.length * rowH + 28);
    const legendX = cssW - 260;
    for (let i = 0; i < 100; i++) { ctx.fillStyle = colour(i / 99); ctx.fillRect(legendX + i, rows.length * rowH + 22, 1, 10); }
    ctx.fillStyle = '#475569';
    ctx.textAlign = 'right';
    ctx.fillText(num(lo), legendX - 4, rows.length * rowH + 27);
    ctx.textAlign = 'left';
    ctx.fillText(num(hi) + '  ' + (spec.colorLabel || ''), legendX + 104, rows.length * rowH + 27);
    canvas.addEventListener('mousemove', (ev) => {
      const rect = canvas.getBoundingClientRect();
      const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
      const r = Math.floor(y / rowH), c = Math.floor((x - labelW) / cellW);
      if (r < 0 || r >= rows.length || c < 0 || c >= cols.length) { tip.style.display = 'none'; return; }
      const v = values[r][c];
      tip.textContent = `${rows[r]} · step ${cols[c]} · ${v === null ? 'no data' : v === 'nan' ? 'NaN/Inf' : num(v)}`;
      tip.style.display = 'block';
      tip.style.left = Math.min(x + 12, cssW - 260) + 'px';
      tip.style.top = (y + 12) + 'px';
    });
    canvas.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
    return canvas;
  }

  // columns: [{key, label, format?(v,row), align?}], rows: array of objects
  function table(container, columns, rows, opts = {}) {
    const t = el('table', { class: 'ts-table' + (opts.className ? ' ' + opts.className : '') });
    t.append(el('thead', {}, el('tr', {}, columns.map((c) => el('th', { class: c.align === 'left' ? 'l' : '' , text: c.label })))));
    const tb = el('tbody');
    for (const r of rows) {
      tb.append(el('tr', {}, columns.map((c) => {
        const v = c.format ? c.format(r[c.key], r) : r[c.key];
        const td = el('td', { class: c.align === 'left' ? 'l' : '' });
        if (v instanceof Node) td.append(v); else td.textContent = v === null || v === undefined ? '–' : String(v);
        return td;
      })));
    }
    t.append(tb);
    container.append(t);
    return t;
  }

  // Horizontal stacked bar of shares: parts [{label, value}] (values are summed for the total).
  function shareBar(container, parts) {
    const total = parts.reduce((a, p) => a + (p.value || 0), 0) || 1;
    const bar = el('div', { class: 'ts-sharebar' });
    const legend = el('div', { class: 'ts-sharelegend' });
    parts.forEach((p, i) => {
      if (!p.value) return;
      const w = (100 * p.value) / total;
      const color = p.color || palette[i % palette.length];
      bar.append(el('span', { style: `width:${w}%;background:${color}`, title: `${p.label}: ${pct(p.value / total)}` }));
      legend.append(el('span', {}, el('i', { style: `background:${color}` }), `${p.label} ${p.text || pct(p.value / total)}`));
    });
    container.append(bar, legend);
    return bar;
  }

  function render(container, spec, opts) {
    if (spec.kind === 'histogram') return histogram(container, spec, opts);
    if (spec.kind === 'heatmap') return heatmap(container, spec, opts);
    return line(container, spec, opts);
  }

  const api = { line, histogram, heatmap, table, shareBar, render, el, palette, severityColor,
    fmt: { num, pct, bytes, money, duration, withUnit } };
  root.TSCharts = api;
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
})(typeof window !== 'undefined' ? window : globalThis);
