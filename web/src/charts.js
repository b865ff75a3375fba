// trainscope shared chart module: line charts, histograms (dygraphs), heat maps (canvas) and small
// tables. Used by the HTML report and the live dashboard. Plain browser JS: defines the global
// `TSCharts` (and module.exports under CommonJS). Needs the global `Dygraph` (dygraphs 2.x, Debian's
// libjs-dygraphs) for line/histogram, and `TSWidgets` (web/src/widgets.js: formatting, el, tables),
// whose table, shareBar, el and fmt it passes on.
//
// Chart specs (what the C++ side emits, see docs/report.md):
//   line:      {id, kind:"line", title, xLabel, unit, x:[...], series:[{label, values:[...],
//               band?: "low"|"high"}], spanGaps?}   (band: an edge of a min-max band over
//               ranks, drawn thin and dashed in the colour of the line before it)
//   histogram: {id, kind:"histogram", title, unit, edges:[n+1], counts:[n], overflow?}
//   heatmap:   {id, kind:"heatmap", title, rows:[names], cols:[x labels], values:[[...]]
//               (row-major; null = no data, "nan" = non-finite), xLabel, colorLabel}
(function (root) {
  'use strict';

  // Formatting, DOM and small non-chart widgets: web/src/widgets.js (loaded first).
  const W = root.TSWidgets;
  const { palette, severityColor, el, table, shareBar } = W;
  const { num, pct, bytes, duration, withUnit } = W.fmt;

  // ---- frame: title + chart body -------------------------------------------------------------
  function frame(container, spec) {
    const fig = el('figure', { class: 'ts-chart', 'data-chart': spec.id || '' });
    if (spec.title) {
      fig.append(el('figcaption', {}, spec.title + (spec.unit ? ' (' + spec.unit + ')' : ''),
        el('span', { class: 'ts-scale' })));
    }
    const body = el('div', { class: 'ts-chart-body' });
    fig.append(body);
    container.append(fig);
    return body;
  }

  function widthOf(node) { return Math.max(280, Math.floor(node.clientWidth || node.parentNode.clientWidth || 600)); }

  // ---- values and scales ---------------------------------------------------------------------
  // A plotted value is a finite number or null (a gap). NaN, ±Infinity, "nan"/"inf" strings and
  // anything else that is not a finite number become null; non-finite ones are counted.
  const finite = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
  const nonFinite = (v) => v !== null && v !== undefined && finite(v) === null;

  // spec {x, series[{values}]} → dygraphs rows [[x, y1, y2, ...]] sorted by x (rows with a
  // non-finite x are dropped), and how many values were non-finite.
  function rowsOf(spec) {
    const rows = [];
    let bad = 0;
    const x = spec.x || [];
    for (let i = 0; i < x.length; i++) {
      const xv = finite(x[i]);
      if (xv === null) continue;
      const r = [xv];
      for (const s of spec.series) {
        const v = s.values[i];
        if (nonFinite(v)) bad++;
        r.push(finite(v));
      }
      rows.push(r);
    }
    for (let i = 1; i < rows.length; i++) {
      if (rows[i][0] < rows[i - 1][0]) { rows.sort((a, b) => a[0] - b[0]); break; }
    }
    return { rows, bad };
  }

  // How the y axis shows the values:
  //   log:    every value positive, max/min > RATIO, and some series squashed by its own
  //           extremes (its median below its max / RATIO: a diverging loss, 1 → 1e30). A series
  //           that is merely small next to another (data wait beside step time) does not count;
  //   clip:   otherwise, when the extremes lie more than RATIO bulk-sizes beyond the 2nd–98th
  //           percentile range (a spike of 1e30 among losses near 1, with zeros or negatives
  //           that rule out a log axis): the axis shows the bulk and the points beyond it are
  //           marked at the edge;
  //   linear: everything else (a 0.9 s hiccup among 0.1 s steps stays a visible spike).
  const RATIO = 1e3;
  function scalePlan(rows) {
    const v = [];
    let squashed = false;
    for (let i = 1; rows.length && i < rows[0].length; i++) {
      const s = [];
      for (const r of rows) if (r[i] !== null) s.push(r[i]);
      s.sort((a, b) => a - b);
      if (s.length && s[s.length - 1] > RATIO * s[s.length >> 1]) squashed = true;
      for (const y of s) v.push(y);
    }
    if (!v.length) return { kind: 'linear' };
    v.sort((a, b) => a - b);
    const min = v[0], max = v[v.length - 1];
    if (min > 0 && max / min > RATIO && squashed) {
      return { kind: 'log', min, max, range: [10 ** Math.floor(Math.log10(min)), 10 ** Math.ceil(Math.log10(max))] };
    }
    if (v.length >= 20) {
      const q = (p) => v[Math.round(p * (v.length - 1))];
      const lo = q(0.02), hi = q(0.98);
      const size = Math.max(Math.abs(lo), Math.abs(hi), hi - lo);
      if (size > 0 && (max - hi > RATIO * size || lo - min > RATIO * size)) {
        const pad = 0.1 * (hi - lo || size);
        const range = [lo >= 0 && lo - pad < 0 ? 0 : lo - pad, hi + pad];
        return { kind: 'clip', min, max, range, beyond: v.filter((y) => y < range[0] || y > range[1]).length };
      }
    }
    return { kind: 'linear', min, max };
  }

  // Axis numbers: short enough for the label column (8e29, 1.5e-5, 12,345, 0.25).
  function axisNum(v) {
    if (v === 0) return '0';
    const a = Math.abs(v);
    if (a >= 1e5 || a < 1e-3) {
      const [m, e] = v.toExponential(2).split('e');
      return String(Number(m)) + 'e' + Number(e);
    }
    return Number(v.toPrecision(4)).toLocaleString('en-US', { maximumFractionDigits: 4 });
  }
  function axisValue(v, unit) {
    if (unit === 'bytes' || unit === 'bytes/s') return bytes(v);
    return axisNum(v) + (unit === '%' ? '%' : '');
  }

  // Log axis ticks: whole decades (every step-th, step chosen so labels do not collide).
  function logTicks(a, b, pixels, opts, g, vals) {
    const k0 = Math.ceil(Math.log10(a) - 1e-9), k1 = Math.floor(Math.log10(b) + 1e-9);
    if (!(k1 > k0)) return root.Dygraph.numericTicks(a, b, pixels, opts, g, vals);
    const step = Math.ceil((k1 - k0 + 1) / Math.max(2, Math.floor(pixels / 24)));
    const ticks = [];
    for (let k = Math.ceil(k0 / step) * step; k <= k1; k += step) {
      ticks.push({ v: 10 ** k, label: Math.abs(k) <= 3 ? axisNum(10 ** k) : '1e' + k });
    }
    return ticks;
  }

  // Legend under the chart: the series (colour, name) and, under the cursor, x and the values.
  function legendHtml(data) {
    const hover = data.x !== undefined;
    const parts = hover ? [`<span class="ts-legend-x">${data.xHTML}</span>`] : [];
    for (const s of data.series) {
      const value = hover ? ': ' + (s.yHTML === undefined ? '–' : s.yHTML) : '';
      parts.push(`<span class="ts-legend-item"><i style="background:${s.color}"></i>${s.labelHTML}${value}</span>`);
    }
    return parts.join(' ');
  }

  const AXIS_FONT = 11;
  let measureCtx = null;
  function textWidth(s, node) {
    if (!measureCtx) measureCtx = document.createElement('canvas').getContext('2d');
    const family = (node && getComputedStyle(node).fontFamily) || 'sans-serif';
    measureCtx.font = AXIS_FONT + 'px ' + family;
    return measureCtx.measureText(s).width;
  }

  // dygraphs options for a scale plan (they replace each other's on updates).
  function scaleOptions(plan, unit, labelNode) {
    const y = { logscale: plan.kind === 'log', valueRange: plan.range || [null, null],
      ticker: plan.kind === 'log' ? logTicks : root.Dygraph.numericTicks };
    // A label column wide enough for the longest label we expect; drawn labels are measured
    // again after each draw (fitLabels) in case a tick came out longer.
    let w = 0;
    const lo = plan.range ? plan.range[0] : plan.min, hi = plan.range ? plan.range[1] : plan.max;
    for (const v of [lo, hi, (lo + hi) / 2, -Math.abs(hi - lo) / 7]) {
      if (Number.isFinite(v)) w = Math.max(w, textWidth(axisValue(v, unit), labelNode));
    }
    y.axisLabelWidth = Math.ceil(Math.max(36, w + 10));
    return y;
  }

  function scaleNote(plan, bad, unit) {
    const parts = [];
    const span = `${withUnit(plan.min, unit)} to ${withUnit(plan.max, unit)}`;
    if (plan.kind === 'log') {
      const decades = Math.round(Math.log10(plan.max / plan.min));
      parts.push(`Log scale: the values span ${decades} orders of magnitude (${span}).`);
    } else if (plan.kind === 'clip') {
      const [lo, hi] = plan.range;
      const marks = [plan.max > hi ? '▲' : '', plan.min < lo ? '▼' : ''].filter(Boolean).join('/');
      const n = plan.beyond === 1 ? '1 point beyond it is' : plan.beyond + ' points beyond it are';
      parts.push(`Axis clipped to the bulk of the values (${axisValue(lo, unit)} to ${axisValue(hi, unit)}); ` +
        `${n} marked ${marks} at the edge (the values run from ${span}).`);
    }
    if (bad) parts.push(`${bad} NaN/Inf ${bad === 1 ? 'value is' : 'values are'} not drawn.`);
    return parts.join(' ');
  }

  // ---- live charts: one state per plot, resizing with its container ---------------------------
  const states = new WeakMap();  // Dygraph → {spec, body, plotDiv, note, rows, plan, markers, ...}
  let resizeObserver = null;
  function track(plot, st) {
    states.set(plot, st);
    if (typeof ResizeObserver === 'undefined') return;
    if (!resizeObserver) {
      resizeObserver = new ResizeObserver((entries) => {
        for (const e of entries) {
          const p = e.target.tsPlot;
          if (p && p.maindiv_ && e.target.isConnected) p.resize();
        }
      });
    }
    st.body.tsPlot = plot;
    resizeObserver.observe(st.body);
  }
  function destroy(plot) {
    const st = states.get(plot);
    if (st) {
      if (resizeObserver) resizeObserver.unobserve(st.body);
      st.body.tsPlot = null;
      states.delete(plot);
    }
    if (plot.maindiv_) plot.destroy();
  }

  // Widens the y label column when a drawn label does not fit in it (dygraphs cuts it off).
  function fitLabels(g, st) {
    if (st.fitting) return;
    let need = 0;
    for (const d of st.plotDiv.querySelectorAll('.dygraph-axis-label-y')) {
      if (d.scrollWidth > d.clientWidth) need = Math.max(need, d.scrollWidth + 6);
    }
    if (!need || st.labelWidth >= 160) return;
    st.fitting = true;
    queueMicrotask(() => {
      if (g.maindiv_) {
        st.labelWidth = Math.min(160, Math.max(need, st.labelWidth + 4));
        g.updateOptions({ axes: { y: { axisLabelWidth: st.labelWidth } } });
      }
      st.fitting = false;
    });
  }

  // Vertical markers (e.g. when a rule fired), and in clipped mode the points beyond the axis,
  // drawn over the plot area after each draw.
  function overlayPlugin(st) {
    return {
      toString: () => 'trainscope overlay',
      activate: () => ({ didDrawChart: (e) => drawOverlay(e.dygraph, e.drawingContext, st) }),
    };
  }
  // Clipped axis: a triangle at the top (bottom) edge for each x with a value above (below) the
  // axis, and the most extreme value written beside its triangle. Drawn last, over everything.
  function drawBeyond(g, ctx, st, area, x0, x1) {
    const [lo, hi] = st.plan.range;
    const colors = g.getColors();
    const extreme = { up: null, down: null };
    const lastX = { up: -1e9, down: -1e9 };
    ctx.lineWidth = 1;
    ctx.strokeStyle = '#fff';
    for (const r of st.rows) {
      if (r[0] < x0 || r[0] > x1) continue;
      for (let i = 1; i < r.length; i++) {
        const v = r[i];
        if (v === null || (v >= lo && v <= hi)) continue;
        const side = v > hi ? 'up' : 'down';
        const x = g.toDomXCoord(r[0]);
        const e = extreme[side];
        if (!e || Math.abs(v) > Math.abs(e.v)) extreme[side] = { v, x };
        if (Math.abs(x - lastX[side]) < 3) continue;
        lastX[side] = x;
        const y = side === 'up' ? area.y + 1 : area.y + area.h - 1, s = side === 'up' ? 1 : -1;
        ctx.fillStyle = colors[(i - 1) % colors.length];
        ctx.beginPath();
        ctx.moveTo(x, y);
        ctx.lineTo(x - 5, y + 8 * s);
        ctx.lineTo(x + 5, y + 8 * s);
        ctx.closePath();
        ctx.fill();
        ctx.stroke();
      }
    }
    ctx.font = '11px system-ui, sans-serif';
    for (const side of ['up', 'down']) {
      const e = extreme[side];
      if (!e) continue;
      const text = (side === 'up' ? '▲ ' : '▼ ') + axisValue(e.v, st.spec.unit);
      const w = ctx.measureText(text).width;
      const tx = e.x + 8 + w > area.x + area.w ? e.x - 8 - w : e.x + 8;
      const ty = side === 'up' ? area.y + 20 : area.y + area.h - 12;
      ctx.fillStyle = 'rgba(255,255,255,0.85)';
      ctx.fillRect(tx - 2, ty - 10, w + 4, 13);
      ctx.fillStyle = '#334155';
      ctx.fillText(text, tx, ty);
    }
  }

  function drawOverlay(g, ctx, st) {
    const area = g.getArea();
    const [x0, x1] = g.xAxisRange();
    ctx.save();
    const rowsRight = [-1e9, -1e9, -1e9];  // right edge of the last label on each row
    for (const m of st.markers) {
      const v = m[st.markerKey];
      if (typeof v !== 'number' || v < x0 || v > x1) continue;
      const x = Math.round(g.toDomXCoord(v)) + 0.5;
      ctx.strokeStyle = severityColor[m.severity] || '#dc2626';
      ctx.lineWidth = 1.5;
      ctx.setLineDash([5, 4]);
      ctx.beginPath();
      ctx.moveTo(x, area.y);
      ctx.lineTo(x, area.y + area.h);
      ctx.stroke();
      ctx.setLineDash([]);
      // Label on the first row where it does not overlap another; none if all are taken.
      ctx.font = '11px system-ui, sans-serif';
      const w = ctx.measureText(m.label).width;
      const tx = Math.max(area.x + 2, Math.min(x + 4, area.x + area.w - w - 2));
      const row = rowsRight.findIndex((r) => tx > r + 6);
      if (row < 0) continue;
      rowsRight[row] = tx + w;
      const ty = area.y + 12 + 13 * row;
      ctx.fillStyle = 'rgba(255,255,255,0.85)';
      ctx.fillRect(tx - 2, ty - 10, w + 4, 13);
      ctx.fillStyle = ctx.strokeStyle;
      ctx.fillText(m.label, tx, ty);
    }
    if (st.plan.kind === 'clip') drawBeyond(g, ctx, st, area, x0, x1);  // over the marker labels
    ctx.restore();
  }

  // Options that follow the data: the scale plan, points on short series, a fixed x window
  // when all points share one x (dygraphs needs a non-empty range).
  function dataOptions(st) {
    const { rows } = st;
    const o = { axes: { y: scaleOptions(st.plan, st.spec.unit, st.plotDiv) }, drawPoints: rows.length < 60 };
    st.labelWidth = o.axes.y.axisLabelWidth;
    const single = rows.length > 0 && rows[0][0] === rows[rows.length - 1][0];
    if (single) { o.dateWindow = [rows[0][0] - 1, rows[0][0] + 1]; st.ownWindow = true; }
    else if (st.ownWindow) { o.dateWindow = null; st.ownWindow = false; }
    return o;
  }

  function showPlan(st, bad) {
    const fig = st.body.parentNode;
    fig.dataset.scale = st.plan.kind;
    const tag = fig.querySelector('figcaption .ts-scale');
    if (tag) tag.textContent = st.plan.kind === 'log' ? ' · log scale' : st.plan.kind === 'clip' ? ' · clipped' : '';
    st.note.textContent = scaleNote(st.plan, bad, st.spec.unit);
    st.note.hidden = !st.note.textContent;
  }

  // dygraphs clears its canvas only inside the plot area (its clip rectangle): when the area
  // moves right because the y label column grew, the old axis line would stay. As the underlay
  // callback (after dygraphs' clear, before anything is drawn) this clears the whole canvas and
  // sets the same clip again.
  function clearAll(ctx, area) {
    ctx.restore();  // to the state dygraphs saved before clipping (scaled for the pixel ratio)
    ctx.save();
    ctx.clearRect(0, 0, ctx.canvas.width, ctx.canvas.height);
    ctx.beginPath();
    ctx.rect(area.x, area.y, area.w, area.h);
    ctx.clip();
  }

  // Colours: a band edge takes the colour of the line it belongs to (the last one before it).
  function seriesColors(series) {
    const out = [];
    let c = 0, last = palette[0];
    for (const s of series) {
      if (!s.band) last = palette[c++ % palette.length];
      out.push(last);
    }
    return out;
  }
  function bandOptions(series) {
    const o = {};
    for (const s of series) {
      if (s.band) o[s.label] = { strokeWidth: 0.8, strokePattern: [4, 3], drawPoints: false };
    }
    return o;
  }

  // A dygraphs file that is never empty (an empty one logs an error): one row of gaps.
  const fileOf = (rows, nseries) => (rows.length ? rows : [[0, ...new Array(nseries).fill(null)]]);

  // opts: {height, markers:[{t|step, label, severity}], markerKey:"t"|"step",
  //        stepClock:[[t, step], ...] (shows the step under the cursor on time axes)}
  // Returns the Dygraph; TSCharts.update(plot, {x, series}) redraws it with new data.
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
    const isStep = spec.xLabel === 'step';
    const xValue = (v) => {
      if (v === null || v === undefined) return '–';
      if (isStep) return 'step ' + Math.round(v);
      const s = stepAt(v);
      return duration(v) + (s !== null ? ' · step ' + s : '');
    };
    const plotDiv = el('div', { class: 'ts-plot' });
    plotDiv.style.height = (opts.height || 220) + 'px';
    const legend = el('div', { class: 'ts-legend' });
    const note = el('p', { class: 'ts-note ts-scale-note' });
    body.append(plotDiv, legend, note);
    const { rows, bad } = rowsOf(spec);
    const st = { spec, body, plotDiv, note, rows, plan: scalePlan(rows),
      markers: opts.markers || [], markerKey: opts.markerKey || 't' };
    const o = dataOptions(st);
    const plot = new root.Dygraph(plotDiv, fileOf(rows, spec.series.length), {
      labels: [spec.xLabel || 'x', ...spec.series.map((s) => s.label)],
      colors: seriesColors(spec.series),
      series: bandOptions(spec.series),
      strokeWidth: 1.5,
      pointSize: 2,
      drawPoints: o.drawPoints,
      connectSeparatedPoints: !!spec.spanGaps,
      legend: 'always',
      labelsDiv: legend,
      legendFormatter: legendHtml,
      axisLabelFontSize: AXIS_FONT,
      gridLineColor: '#e2e8f0',
      axisLineColor: '#94a3b8',
      xlabel: spec.xLabel || undefined,
      xLabelHeight: 16,
      dateWindow: o.dateWindow || null,
      axes: {
        x: { axisLabelFormatter: (v) => (isStep ? num(v) : duration(v)), valueFormatter: xValue,
          pixelsPerLabel: 80, axisLabelWidth: 64 },
        y: Object.assign({ axisLabelFormatter: (v) => axisValue(v, spec.unit),
          valueFormatter: (v) => withUnit(v, spec.unit), pixelsPerLabel: 28 }, o.axes.y),
      },
      plugins: [overlayPlugin(st)],
      underlayCallback: clearAll,
      drawCallback: (g) => fitLabels(g, st),
    });
    track(plot, st);
    showPlan(st, bad);
    return plot;
  }

  // New data for a line chart made by line(): data {x, series[{values}]} with the same series.
  function update(plot, data) {
    const st = states.get(plot);
    if (!st) return;
    st.spec = Object.assign({}, st.spec, data);
    const { rows, bad } = rowsOf(st.spec);
    st.rows = rows;
    st.plan = scalePlan(rows);
    const o = dataOptions(st);
    o.file = fileOf(rows, st.spec.series.length);
    plot.updateOptions(o);
    showPlan(st, bad);
  }

  // Bars from bin edges: dygraphs draws the bin centres, this plotter the bars around them.
  function barPlotter(edges, counts) {
    const bin = new Map(counts.map((_, i) => [(edges[i] + edges[i + 1]) / 2, i]));
    return (e) => {
      const ctx = e.drawingContext, g = e.dygraph;
      const base = g.toDomYCoord(0);
      ctx.fillStyle = 'rgba(37,99,235,0.35)';
      ctx.strokeStyle = e.color;
      ctx.lineWidth = 1;
      for (const p of e.points) {
        const i = bin.get(p.xval);
        if (i === undefined || !(p.yval > 0)) continue;
        const l = g.toDomXCoord(edges[i]), r = g.toDomXCoord(edges[i + 1]);
        const w = Math.max(1, (r - l) * 0.92), x = l + (r - l - w) / 2;
        ctx.fillRect(x, p.canvasy, w, base - p.canvasy);
        ctx.strokeRect(x + 0.5, p.canvasy + 0.5, Math.max(0, w - 1), Math.max(0, base - p.canvasy - 1));
      }
    };
  }

  function histogram(container, spec, opts = {}) {
    const body = frame(container, spec);
    const edges = (spec.edges || []).map(finite), counts = (spec.counts || []).map((c) => finite(c) || 0);
    const n = Math.min(counts.length, edges.length - 1);
    const rows = [];
    for (let i = 0; i < n; i++) {
      if (edges[i] !== null && edges[i + 1] !== null) rows.push([(edges[i] + edges[i + 1]) / 2, counts[i]]);
    }
    const plotDiv = el('div', { class: 'ts-plot' });
    plotDiv.style.height = (opts.height || 200) + 'px';
    const legend = el('div', { class: 'ts-legend' });
    body.append(plotDiv, legend);
    const half = rows.length ? (edges[1] - edges[0]) / 2 : 0.5;
    const top = Math.max(1, ...rows.map((r) => r[1]));
    const xWin = rows.length ? [edges[0], edges[n]] : [0, 1];
    const plot = new root.Dygraph(plotDiv, fileOf(rows, 1), {
      labels: [spec.unit || 'x', 'steps'],
      colors: [palette[0]],
      plotter: barPlotter(edges, counts),
      legend: 'always',
      labelsDiv: legend,
      legendFormatter: legendHtml,
      axisLabelFontSize: AXIS_FONT,
      gridLineColor: '#e2e8f0',
      axisLineColor: '#94a3b8',
      dateWindow: xWin[1] > xWin[0] ? xWin : [xWin[0] - 1, xWin[0] + 1],
      valueRange: [0, top * 1.08],
      axes: {
        x: { axisLabelFormatter: (v) => axisValue(v, spec.unit), pixelsPerLabel: 70,
          valueFormatter: (v) => withUnit(v - half, spec.unit) + ' – ' + withUnit(v + half, spec.unit) },
        y: { axisLabelFormatter: (v) => axisNum(v), valueFormatter: (v) => num(v),
          axisLabelWidth: Math.ceil(Math.max(36, textWidth(axisNum(top), plotDiv) + 10)) },
      },
    });
    if (spec.overflow) body.parentNode.append(el('p', { class: 'ts-note', text: spec.overflow + ' longer steps not shown (beyond ' + withUnit(edges[edges.length - 1], spec.unit) + ')' }));
    track(plot, { spec, body, plotDiv, rows, plan: { kind: 'linear' }, markers: [], markerKey: 't' });
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

  function render(container, spec, opts) {
    if (spec.kind === 'histogram') return histogram(container, spec, opts);
    if (spec.kind === 'heatmap') return heatmap(container, spec, opts);
    return line(container, spec, opts);
  }

  const api = { line, histogram, heatmap, table, shareBar, render, update, destroy, el, palette,
    severityColor, fmt: W.fmt };
  root.TSCharts = api;
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
})(typeof window !== 'undefined' ? window : globalThis);
