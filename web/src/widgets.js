// trainscope UI widgets: number formatting, element creation, tables and share bars — the parts
// of the report and dashboard UI that draw no chart. Plain browser JS: defines the global
// `TSWidgets` (and module.exports under CommonJS); web/src/charts.js builds on it and passes
// these on as part of `TSCharts`.
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

  const api = { palette, severityColor, el, table, shareBar,
    fmt: { num, pct, bytes, money, duration, withUnit } };
  root.TSWidgets = api;
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
})(typeof window !== 'undefined' ? window : globalThis);
