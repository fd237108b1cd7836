/* trainshim report page (tools/html/page.js): draws the data embedded in
 * the page (the trainshim-data element, written by tools/html/html_data.c)
 * as tables and hand-made SVG charts.  No network, no library.
 *
 * Every figure the page shows as a number carries its exact value in a
 * data-v attribute and its name in data-k, so tests read the DOM, not the
 * formatted text. */
'use strict';
(function () {
  const data = JSON.parse(document.getElementById('trainshim-data').textContent);
  const app = document.getElementById('app');
  const SVGNS = 'http://www.w3.org/2000/svg';
  const logs = data.logs || [];
  const multi = logs.length > 1;
  const RANK_COLORS = ['#3465a4', '#cc0000', '#4e9a06', '#75507b', '#c17d11', '#06989a', '#5c3566', '#8f5902'];

  /* ---- DOM helpers ---- */
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      if (attrs[k] !== null && attrs[k] !== undefined) e.setAttribute(k, attrs[k]);
    }
    for (const c of kids.flat(Infinity)) {
      if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }
  function sv(tag, attrs, ...kids) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs || {}) {
      if (attrs[k] !== null && attrs[k] !== undefined) e.setAttribute(k, attrs[k]);
    }
    for (const c of kids.flat(Infinity)) {
      if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }
  function fmtBytes(b) {
    if (b === null || b === undefined) return 'n/a';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
    let i = 0, v = b;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return i ? v.toFixed(2) + ' ' + u[i] : b + ' B';
  }
  function fmtNs(ns) {
    if (ns === null || ns === undefined) return 'n/a';
    if (ns >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
    if (ns >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';
    if (ns >= 1e3) return (ns / 1e3).toFixed(1) + ' us';
    return ns + ' ns';
  }
  function fmtPct(x) {
    if (x === null || x === undefined) return 'n/a';
    return (x > 0 && x < 0.001 ? (100 * x).toPrecision(2) : (100 * x).toFixed(1)) + '%';
  }
  function fmtNum(x) { return x === null || x === undefined ? 'n/a' : Number(x).toLocaleString('en-US'); }
  /* A figure: exact value in data-v, name in data-k. */
  function fig(key, value, text) {
    return el('b', { 'data-k': key, 'data-v': value === null || value === undefined ? 'null' : String(value) }, text);
  }
  function figs(list) {
    return el('div', { class: 'figs' }, list.map(([label, key, v, text]) =>
      el('span', { class: 'fig' }, el('span', { class: 'k' }, label), fig(key, v, text))));
  }
  function td(key, v, text, cls) {
    return el('td', { class: cls || 'n', 'data-k': key, 'data-v': v === null || v === undefined ? 'null' : String(v) }, text);
  }
  function absent(text) { return el('p', { class: 'absent' }, text); }
  function rankOf(L, i) { return L.run.rank !== null && L.run.rank !== undefined ? L.run.rank : i; }
  function logTitle(L, i) { return multi ? 'rank ' + rankOf(L, i) + ' (pid ' + L.run.pid + ')' : null; }
  function logBlock(L, i, kids) {
    const t = logTitle(L, i);
    return el('div', { class: 'log', 'data-rank': rankOf(L, i) }, t ? el('h3', null, t) : null, kids);
  }
  const tip = el('div', { id: 'tip' });
  function showTip(ev, text) {
    tip.textContent = text;
    tip.style.display = 'block';
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 260) + 'px';
    tip.style.top = (ev.clientY + 14) + 'px';
  }
  function hideTip() { tip.style.display = 'none'; }

  /* ---- chart frame: x over [0, xmax], y over [0, ymax] ---- */
  const W = 960, H = 230, ML = 70, MR = 16, MT = 14, MB = 28;
  function frame(xmax, ymax, xfmt, yfmt, label) {
    const g = sv('svg', { class: 'chart', viewBox: '0 0 ' + W + ' ' + H, width: W, height: H, role: 'img', 'aria-label': label });
    const x = (v) => ML + (W - ML - MR) * (xmax > 0 ? v / xmax : 0);
    const y = (v) => H - MB - (H - MT - MB) * (ymax > 0 ? Math.min(v / ymax, 1) : 0);
    for (let k = 0; k <= 4; k++) {
      const v = ymax * k / 4;
      g.append(sv('line', { class: 'grid', x1: ML, x2: W - MR, y1: y(v), y2: y(v) }));
      g.append(sv('text', { x: ML - 6, y: y(v) + 4, 'text-anchor': 'end' }, yfmt(v)));
    }
    for (let k = 0; k <= 6; k++) {
      const v = xmax * k / 6;
      g.append(sv('text', { x: x(v), y: H - 8, 'text-anchor': k === 0 ? 'start' : k === 6 ? 'end' : 'middle' }, xfmt(v)));
    }
    g.append(sv('line', { class: 'axis', x1: ML, x2: W - MR, y1: H - MB, y2: H - MB }));
    g.append(sv('line', { class: 'axis', x1: ML, x2: ML, y1: MT, y2: H - MB }));
    return { g, x, y };
  }
  function legend(items) {
    return el('div', { class: 'legend' }, items.map(([color, text]) => [el('i', { style: 'background:' + color }), text]));
  }
  function secs(ns) { return (ns / 1e9).toFixed(ns >= 1e10 ? 1 : 3) + ' s'; }
  /* Transparent hit areas, one per bucket, calling fn(bucket, event). */
  function hits(c, n, span, onHover, onClick) {
    const w = (W - ML - MR) / n;
    const rects = [];
    for (let b = 0; b < n; b++) {
      const r = sv('rect', { class: 'hit', x: ML + b * w, y: MT, width: Math.max(w, 1), height: H - MT - MB, 'data-bucket': b });
      r.addEventListener('mousemove', (ev) => onHover(b, ev));
      r.addEventListener('mouseleave', hideTip);
      if (onClick) r.addEventListener('click', () => { rects.forEach((q) => q.setAttribute('class', 'hit')); r.setAttribute('class', 'hit sel'); onClick(b); });
      rects.push(r);
      c.g.append(r);
    }
    return rects;
  }

  /* ---- sections ---- */
  function section(id, title, body) {
    const s = el('section', { id: id }, el('h2', null, title));
    s.append(...[].concat(body));
    for (const b of s.querySelectorAll('div.log')) b.id = id + '-rank' + b.getAttribute('data-rank'); /* ADVICE links here */
    return s;
  }

  function runSection() {
    const rows = [
      ['log', (L) => L.run.log, null], ['pid', (L) => L.run.pid, 'pid'], ['command', (L) => L.run.command, null],
      ['host', (L) => L.run.host, null],
      ['rank', (L) => L.run.rank === null ? '-' : L.run.rank + (L.run.world_size !== null ? ' of ' + L.run.world_size : ''), null],
      ['duration', (L) => secs(L.run.duration_ns), 'duration_ns'], ['status', (L) => L.run.status + (L.run.note ? ' (' + L.run.note + ')' : ''), null],
      ['records', (L) => fmtNum(L.run.records), 'records'],
      ['devices', (L) => L.devices.map((d) => d.ordinal + ': ' + d.name + ', ' + fmtBytes(d.total_memory_bytes) + ', cc ' + d.cc_major + '.' + d.cc_minor + ', ' + d.sm_count + ' SMs').join('; ') || '-', null],
    ];
    const raw = { pid: (L) => L.run.pid, duration_ns: (L) => L.run.duration_ns, records: (L) => L.run.records };
    const t = el('table', { 'data-table': 'run' },
      el('tr', null, el('th', null, ''), logs.map((L, i) => el('th', null, multi ? 'rank ' + rankOf(L, i) : 'value'))),
      rows.map(([name, f, key]) => el('tr', null, el('th', null, name),
        logs.map((L) => key ? td(key, raw[key](L), f(L), 'mono') : el('td', { class: 'mono' }, f(L))))));
    return section('run', 'RUN', t);
  }

  function ranksSection() {
    const head = ['rank', 'pid', 'host', 'status', 'duration', 'peak allocated', 'peak reserved', 'allocs', 'frees', 'H2D', 'D2H', 'errors', 'GEMM FLOPs', 'steps', 'MFU'];
    const t = el('table', { 'data-table': 'ranks' }, el('tr', null, head.map((h) => el('th', { class: 'n' }, h))),
      logs.map((L, i) => {
        const c = L.compute;
        return el('tr', { 'data-rank': rankOf(L, i) },
          td('rank', rankOf(L, i), rankOf(L, i)), td('pid', L.run.pid, L.run.pid), el('td', null, L.run.host), el('td', null, L.run.status),
          td('duration_ns', L.run.duration_ns, secs(L.run.duration_ns)),
          td('peak_allocated_bytes', L.memory.peak_allocated_bytes, fmtBytes(L.memory.peak_allocated_bytes)),
          td('peak_reserved_bytes', L.memory.peak_reserved_bytes, fmtBytes(L.memory.peak_reserved_bytes)),
          td('alloc_calls', L.memory.alloc_calls, fmtNum(L.memory.alloc_calls)), td('free_calls', L.memory.free_calls, fmtNum(L.memory.free_calls)),
          td('h2d_bytes', L.copies.h2d_bytes, fmtBytes(L.copies.h2d_bytes)), td('d2h_bytes', L.copies.d2h_bytes, fmtBytes(L.copies.d2h_bytes)),
          td('error_records', L.error_records, fmtNum(L.error_records)),
          td('gemm_flops', c ? c.gemm_flops : null, c ? fmtNum(c.gemm_flops) : '-'), td('steps', c ? c.steps : null, c ? c.steps : '-'),
          td('mfu', c ? c.mfu : null, c ? fmtPct(c.mfu) : '-'));
      }));
    return section('ranks', 'RANKS', t);
  }

  /* memory: one chart per device; the detail panel lists the largest live
   * blocks at the clicked bucket's highest point (the peak's at first) */
  function siteText(ms, id) {
    if (!id) return '(no call stack: run with TRAINSHIM_STACKS=16)';
    const s = (ms.sites || []).find((x) => x.id === id);
    return s ? s.frames.join('\n') : 'stack #' + id;
  }
  function memDetail(panel, L, ms, dv, b) {
    const snap = dv.snapshots[dv.snapshot_of_bucket[b]];
    const t0 = ms.span_ns * b / data.buckets, t1 = ms.span_ns * (b + 1) / data.buckets;
    panel.replaceChildren(
      el('div', null, 'Interval ' + secs(t0) + ' to ' + secs(t1) + ': highest allocated ', fig('bucket_allocated_bytes', dv.allocated_max[b], fmtBytes(dv.allocated_max[b])),
        snap ? [' at ' + secs(snap.at_ns) + ', ', fig('live_blocks', snap.live_blocks, fmtNum(snap.live_blocks)), ' live blocks; the largest:'] : ''),
      snap && snap.blocks.length ? el('table', { 'data-table': 'blocks' }, el('tr', null, el('th', { class: 'n' }, 'bytes'), el('th', { class: 'n' }, 'allocated at'), el('th', null, 'site')),
        snap.blocks.map((k) => el('tr', null, td('block_bytes', k.bytes, fmtBytes(k.bytes)), td('allocated_at_ns', k.allocated_at_ns, secs(k.allocated_at_ns)),
          el('td', { class: 'frames', 'data-k': 'site', 'data-v': k.site, title: siteText(ms, k.site) }, siteText(ms, k.site).split('\n').slice(0, 3).join('\n'))))) : absent('No live blocks at this moment.'));
  }
  function memChart(L, ms, dv) {
    const n = dv.allocated_max.length;
    const top = Math.max(dv.peak_allocated_bytes, dv.peak_reserved_bytes || 0, 1) * 1.08;
    const c = frame(ms.span_ns, top, secs, fmtBytes, 'allocated bytes of device ' + dv.device + ' over time');
    const w = (W - ML - MR) / n;
    let d = 'M' + ML + ' ' + c.y(0);
    dv.allocated_max.forEach((v, b) => { d += ' L' + (ML + b * w) + ' ' + c.y(v) + ' L' + (ML + (b + 1) * w) + ' ' + c.y(v); });
    d += ' L' + (W - MR) + ' ' + c.y(0) + ' Z';
    c.g.append(sv('path', { d: d, fill: 'rgba(52,101,164,.25)', stroke: 'var(--alloc)', 'stroke-width': 1.5, 'data-series': 'allocated' }));
    if (dv.peak_reserved_bytes !== null) {
      c.g.append(sv('line', { x1: ML, x2: W - MR, y1: c.y(dv.peak_reserved_bytes), y2: c.y(dv.peak_reserved_bytes), stroke: 'var(--reserved)', 'stroke-dasharray': '6 4', 'stroke-width': 1.5, 'data-series': 'reserved' }));
    }
    const px = c.x(dv.peak_at_ns), py = c.y(dv.peak_allocated_bytes);
    c.g.append(sv('circle', { cx: px, cy: py, r: 5, fill: 'var(--peak)', 'data-mark': 'peak' }));
    c.g.append(sv('text', { x: Math.min(px + 8, W - 150), y: Math.max(py - 6, MT + 10), style: 'fill:var(--peak);font-weight:600' }, 'peak ' + fmtBytes(dv.peak_allocated_bytes)));
    for (const o of ms.ooms.filter((o) => o.device === dv.device)) {
      const ox = c.x(o.at_ns);
      c.g.append(sv('path', { d: 'M' + (ox - 6) + ' ' + MT + ' L' + (ox + 6) + ' ' + MT + ' L' + ox + ' ' + (MT + 10) + ' Z', fill: 'var(--peak)', 'data-mark': 'oom' }));
      c.g.append(sv('line', { x1: ox, x2: ox, y1: MT, y2: H - MB, stroke: 'var(--peak)', 'stroke-dasharray': '2 3' }));
      if (o.kind === 'pool') { /* the pool's reserved bytes when it refused */
        c.g.append(sv('circle', { cx: ox, cy: c.y(o.reserved_bytes), r: 4, fill: 'var(--reserved)', 'data-mark': 'oom-reserved' }));
      }
    }
    const panel = el('div', { class: 'detail', 'data-panel': 'blocks' });
    const peakBucket = Math.min(n - 1, Math.floor(dv.peak_at_ns * n / ms.span_ns));
    hits(c, n, ms.span_ns, (b, ev) => {
      const s = dv.snapshots[dv.snapshot_of_bucket[b]];
      const big = s && s.blocks.length ? '\nlargest: ' + fmtBytes(s.blocks[0].bytes) + '  ' + siteText(ms, s.blocks[0].site).split('\n')[0] : '';
      showTip(ev, secs(ms.span_ns * b / n) + ': ' + fmtBytes(dv.allocated_max[b]) + ' allocated' + (s ? ', ' + s.live_blocks + ' blocks' : '') + big + '\nclick: list the largest live blocks');
    }, (b) => memDetail(panel, L, ms, dv, b))[peakBucket].setAttribute('class', 'hit sel');
    memDetail(panel, L, ms, dv, peakBucket);
    const ooms = ms.ooms.filter((o) => o.device === dv.device);
    return el('div', { class: 'device', 'data-device': dv.device },
      figs([['device', 'device', dv.device, String(dv.device)], ['peak allocated', 'peak_allocated_bytes', dv.peak_allocated_bytes, fmtBytes(dv.peak_allocated_bytes)],
        ['at', 'peak_at_ns', dv.peak_at_ns, secs(dv.peak_at_ns)],
        ['peak reserved (pool)', 'peak_reserved_bytes', dv.peak_reserved_bytes, dv.peak_reserved_bytes === null ? 'no pool' : fmtBytes(dv.peak_reserved_bytes)]]),
      c.g, legend([['var(--alloc)', 'allocated (highest in each interval)'], ['var(--reserved)', 'reserved by the pool: its peak (dashed), at an OOM (dot)'], ['var(--peak)', 'peak, OOM']]),
      ooms.length ? el('p', { class: 'flag', 'data-k': 'oom_count', 'data-v': ooms.length }, ooms.map((o) => 'OOM at ' + secs(o.at_ns) + ': ' + fmtBytes(o.requested_bytes) + ' requested (' + o.kind +
        (o.kind === 'pool' ? ', reserved ' + fmtBytes(o.reserved_bytes) + ', allocated ' + fmtBytes(o.allocated_bytes) : '') + ')').join('; ')) : null,
      panel);
  }
  function memorySection() {
    return section('memory', 'MEMORY OVER TIME', logs.map((L, i) => {
      const ms = L.memory_series;
      if (!ms || !ms.devices.length) return logBlock(L, i, absent('No device allocations in this log.'));
      return logBlock(L, i, [figs([['peak allocated (all devices)', 'peak_allocated_bytes', L.memory.peak_allocated_bytes, fmtBytes(L.memory.peak_allocated_bytes)],
        ['peak reserved', 'peak_reserved_bytes', L.memory.peak_reserved_bytes, fmtBytes(L.memory.peak_reserved_bytes)],
        ['allocator', 'allocator_mode', L.memory.allocator_mode, L.memory.allocator_mode || 'no pool'], ['OOMs', 'ooms', ms.oom_count, fmtNum(ms.oom_count)]]),
        ms.devices.map((dv) => memChart(L, ms, dv))]);
    }));
  }

  /* steps: time per step (bars) with MFU (line), and FLOPs per step */
  function stepsChart(list, key, fmt, color, label, mfu) {
    const n = list.length, vals = list.map((s) => s[key] || 0);
    const c = frame(n, Math.max(...vals, 1) * 1.1, (v) => Math.round(v) + '', fmt, label);
    const w = (W - ML - MR) / n;
    let d = '';
    vals.forEach((v, k) => { d += 'M' + (ML + k * w + w * 0.1) + ' ' + c.y(0) + ' V' + c.y(v) + ' h' + (w * 0.8) + ' V' + c.y(0) + ' Z'; });
    c.g.append(sv('path', { d: d, fill: color, 'data-series': key }));
    if (mfu) { /* MFU on its own scale: 0 to its highest value */
      const top = Math.max(...list.map((s) => s.mfu || 0)) * 1.15 || 1;
      let p = '';
      list.forEach((s, k) => { if (s.mfu !== null) p += (p ? ' L' : 'M') + (ML + (k + 0.5) * w) + ' ' + (H - MB - (H - MT - MB) * s.mfu / top); });
      c.g.append(sv('path', { d: p, fill: 'none', stroke: 'var(--peak)', 'stroke-width': 2, 'data-series': 'mfu' }));
      c.g.append(sv('text', { x: W - MR - 4, y: MT + 10, 'text-anchor': 'end', style: 'fill:var(--peak)' }, 'MFU (red line): top of the chart = ' + fmtPct(top)));
    }
    hits(c, n, n, (k, ev) => {
      const s = list[k];
      showTip(ev, 'step ' + s.index + ' (' + s.phase + '): ' + fmtNs(s.time_ns) + ', ' + fmtNum(s.flops) + ' FLOPs, MFU ' + fmtPct(s.mfu) + ', ' + s.gemms + ' GEMMs');
    });
    return c.g;
  }
  function stepsSection() {
    return section('steps', 'STEPS', logs.map((L, i) => {
      const c = L.compute;
      if (!c) return logBlock(L, i, absent('No GEMM records in this log: steps are found from the cuBLAS GEMM sequence.'));
      const sd = c.step_detail || {};
      const list = sd.list || [];
      const f = figs([['steps', 'steps', c.steps, fmtNum(c.steps)], ['GEMMs per step', 'period_gemms', sd.period_gemms, fmtNum(sd.period_gemms)],
        ['steady MFU', 'steady_mfu', sd.steady_mfu, fmtPct(sd.steady_mfu)], ['MFU', 'mfu', c.mfu, fmtPct(c.mfu)],
        ['peak', 'peak_source', c.peak_source, c.peak_source || 'unknown']]);
      if (!list.length) return logBlock(L, i, [f, absent('No repeating step found in the GEMM sequence.')]);
      const more = c.steps > list.length ? el('p', { class: 'note' }, 'The first ' + list.length + ' of ' + c.steps + ' steps (as the JSON report lists them).') : null;
      return logBlock(L, i, [f, more, el('h3', null, 'time per step, MFU'), stepsChart(list, 'time_ns', fmtNs, 'var(--alloc)', 'time per step', true),
        el('h3', null, 'GEMM FLOPs per step'), stepsChart(list, 'flops', (v) => (v / 1e9).toFixed(2) + ' GF', 'var(--busy)', 'FLOPs per step', false)]);
    }));
  }

  function gemmSection() {
    return section('gemm', 'GEMM SHAPES', logs.map((L, i) => {
      const c = L.compute;
      if (!c || !c.shapes || !c.shapes.length) return logBlock(L, i, absent('No GEMM records in this log.'));
      const total = c.gemm_flops || 1, timed = c.timed_gpu_ns || 0;
      const rows = c.shapes.slice(0, 20);
      const t = el('table', { 'data-table': 'shapes' }, el('tr', null, ['m x n x k', 'batch', 'precision', 'calls', 'share of FLOPs', 'share of GPU time', ''].map((h) => el('th', null, h))),
        rows.map((s) => {
          const fs = s.flops / total, ts = timed ? s.timed_gpu_ns / timed : null;
          return el('tr', { class: s.pad ? 'bad' : null, 'data-shape': s.m + 'x' + s.n + 'x' + s.k },
            el('td', { class: 'mono' }, s.m + ' x ' + s.n + ' x ' + s.k), td('batch', s.batch, s.batch), el('td', null, s.precision), td('calls', s.calls, fmtNum(s.calls)),
            el('td', { 'data-k': 'flops', 'data-v': s.flops }, el('span', { class: 'bar', style: 'width:' + (120 * fs).toFixed(1) + 'px' }), fmtPct(fs)),
            el('td', { 'data-k': 'timed_gpu_ns', 'data-v': s.timed_gpu_ns }, ts === null ? 'not timed' : [el('span', { class: 'bar t', style: 'width:' + (120 * ts).toFixed(1) + 'px' }), fmtPct(ts)]),
            el('td', { class: 'flag', 'data-k': 'misaligned', 'data-v': s.pad ? 1 : 0 }, s.pad ? 'misaligned: ' + s.pad : ''));
        }));
      const mis = c.misaligned || {};
      return logBlock(L, i, [figs([['GEMM calls', 'gemm_calls', c.gemm_calls, fmtNum(c.gemm_calls)], ['FLOPs', 'gemm_flops', c.gemm_flops, fmtNum(c.gemm_flops)],
        ['shapes', 'shape_count', c.shapes.length, fmtNum(c.shapes.length)], ['misaligned FLOP share', 'misaligned_flop_share', mis.flop_share, fmtPct(mis.flop_share)],
        ['misaligned GPU time share', 'misaligned_gpu_time_share', mis.gpu_time_share, fmtPct(mis.gpu_time_share)]]), t,
        c.shapes.length > rows.length ? el('p', { class: 'note' }, (c.shapes.length - rows.length) + ' smaller shapes not listed.') : null]);
    }));
  }

  function copiesSection() {
    const dirs = [['h2d', 'var(--h2d)', 'H2D'], ['d2h', 'var(--d2h)', 'D2H'], ['d2d', 'var(--d2d)', 'D2D'], ['other', 'var(--other)', 'other']];
    return section('copies', 'COPIES', logs.map((L, i) => {
      const cs = L.copy_series, cp = L.copies;
      if (!cs || !cs.calls) return logBlock(L, i, absent('No memory copies in this log.'));
      const n = cs.h2d.length, sum = (b) => dirs.reduce((a, [k]) => a + cs[k][b], 0);
      let ymax = 1;
      for (let b = 0; b < n; b++) ymax = Math.max(ymax, sum(b));
      const c = frame(cs.span_ns, ymax * 1.1, secs, fmtBytes, 'copied bytes over time by direction');
      const w = (W - ML - MR) / n;
      const acc = new Array(n).fill(0);
      for (const [k, color] of dirs) {
        let d = '';
        for (let b = 0; b < n; b++) {
          if (!cs[k][b]) continue;
          d += 'M' + (ML + b * w) + ' ' + c.y(acc[b]) + ' V' + c.y(acc[b] + cs[k][b]) + ' h' + w + ' V' + c.y(acc[b]) + ' Z';
          acc[b] += cs[k][b];
        }
        c.g.append(sv('path', { d: d, fill: color, 'data-series': k }));
      }
      for (const [k, color] of [['pageable', 'var(--pageable)'], ['converted', 'var(--conv)']]) {
        let p = '';
        for (let b = 0; b < n; b++) p += (b ? ' L' : 'M') + (ML + (b + 0.5) * w) + ' ' + c.y(cs[k][b]);
        c.g.append(sv('path', { d: p, fill: 'none', stroke: color, 'stroke-width': 1.5, 'data-series': k }));
      }
      hits(c, n, cs.span_ns, (b, ev) => showTip(ev, secs(cs.span_ns * b / n) + ': ' + dirs.map(([k, , t]) => t + ' ' + fmtBytes(cs[k][b])).join(', ') +
        '\npageable ' + fmtBytes(cs.pageable[b]) + ', converted to pinned ' + fmtBytes(cs.converted[b])));
      const hd = cp.h2d_bytes + cp.d2h_bytes, pg = cp.h2d_pageable_bytes + cp.d2h_pageable_bytes;
      return logBlock(L, i, [figs([['H2D', 'h2d_bytes', cp.h2d_bytes, fmtBytes(cp.h2d_bytes)], ['D2H', 'd2h_bytes', cp.d2h_bytes, fmtBytes(cp.d2h_bytes)],
        ['D2D', 'd2d_bytes', cp.d2d_bytes, fmtBytes(cp.d2d_bytes)], ['pageable share of H2D+D2H', 'pageable_share', hd ? pg / hd : 0, fmtPct(hd ? pg / hd : 0)],
        ['converted to pinned', 'converted_bytes', cp.converted_bytes, fmtBytes(cp.converted_bytes) + ' in ' + fmtNum(cp.converted_calls) + ' calls'],
        ['converted share of pageable', 'converted_share', pg ? Math.min(cp.converted_bytes / pg, 1) : 0, fmtPct(pg ? Math.min(cp.converted_bytes / pg, 1) : 0)]]),
        c.g, legend(dirs.map(([, color, t]) => [color, t]).concat([['var(--pageable)', 'pageable (line)'], ['var(--conv)', 'converted to pinned (line)']]))]);
    }));
  }

  function ncclSection() {
    const withN = logs.filter((L) => L.nccl && L.nccl.ops && L.nccl.ops.length);
    const body = [];
    if (!withN.length) {
      body.push(absent('No NCCL collectives in ' + (multi ? 'these logs.' : 'this log.')));
    } else {
      const ops = [...new Set(withN.flatMap((L) => L.nccl.ops.map((o) => o.op)))];
      let best = 0;
      logs.forEach((L) => (L.nccl ? L.nccl.ops : []).forEach((o) => { if (o.busbw_gbps) best = Math.max(best, o.busbw_gbps); }));
      body.push(el('h3', null, 'bus bandwidth per collective and rank (GB/s, timed calls)'),
        el('table', { 'data-table': 'busbw' }, el('tr', null, el('th', null, 'collective'), logs.map((L, i) => el('th', null, 'rank ' + rankOf(L, i)))),
          ops.map((op) => el('tr', { 'data-op': op }, el('td', null, op), logs.map((L, i) => {
            const o = L.nccl ? L.nccl.ops.find((x) => x.op === op) : null;
            if (!o) return el('td', null, '-');
            return el('td', { 'data-k': 'busbw_gbps', 'data-rank': rankOf(L, i), 'data-v': o.busbw_gbps === null ? 'null' : o.busbw_gbps },
              o.busbw_gbps === null ? 'not timed (' + o.calls + ' calls)' :
                [el('span', { class: 'bar', style: 'width:' + (100 * o.busbw_gbps / (best || 1)).toFixed(1) + 'px;background:' + RANK_COLORS[i % 8] }), o.busbw_gbps.toFixed(2) + ' (' + o.calls + ' calls)']);
          })))));
    }
    const ra = data.rank_accounting;
    if (!multi) {
      body.push(absent('Stragglers need one log per rank: report several rank logs together.'));
    } else if (!ra || !ra.steps || !ra.steps.length) {
      body.push(absent('No steps common to the ranks: no straggler per step.'));
    } else {
      const st = ra.steps, n = st.length;
      const c = frame(n, Math.max(...st.map((s) => s.slowest_ns)) * 1.1, (v) => Math.round(v) + '', fmtNs, 'slowest and fastest rank per step');
      const w = (W - ML - MR) / n, ranks = logs.map((L, i) => rankOf(L, i));
      st.forEach((s, k) => {
        c.g.append(sv('rect', { x: ML + k * w + w * 0.15, y: c.y(s.slowest_ns), width: w * 0.7, height: c.y(0) - c.y(s.slowest_ns), fill: RANK_COLORS[Math.max(0, ranks.indexOf(s.slowest_rank)) % 8], 'data-k': 'slowest_rank', 'data-v': s.slowest_rank, 'data-step': s.index }));
        c.g.append(sv('line', { x1: ML + k * w + w * 0.1, x2: ML + k * w + w * 0.9, y1: c.y(s.fastest_ns), y2: c.y(s.fastest_ns), stroke: '#2e3436', 'stroke-width': 2 }));
      });
      hits(c, n, n, (k, ev) => {
        const s = st[k];
        showTip(ev, 'step ' + s.index + ': slowest rank ' + s.slowest_rank + ' ' + fmtNs(s.slowest_ns) + ', fastest rank ' + s.fastest_rank + ' ' + fmtNs(s.fastest_ns) +
          ' (spread ' + fmtPct(s.fastest_ns ? (s.slowest_ns - s.fastest_ns) / s.fastest_ns : 0) + ')');
      });
      const count = {};
      st.forEach((s) => { count[s.slowest_rank] = (count[s.slowest_rank] || 0) + 1; });
      body.push(el('h3', null, 'straggler per step: bar = slowest rank\'s step time (colour = rank), tick = fastest'), c.g,
        legend(ranks.map((r, i) => [RANK_COLORS[i % 8], 'rank ' + r + ': slowest in ' + (count[r] || 0) + ' of ' + n + ' steps'])));
    }
    return section('nccl', 'NCCL', body);
  }

  function timelineSection() {
    return section('timeline', 'GPU TIMELINE', logs.map((L, i) => {
      const gs = L.gpu_series, g = L.gpu || {};
      if (!gs) return logBlock(L, i, absent('No CUPTI activity in this log' + (g.hint ? ': ' + g.hint : g.detail ? ': ' + g.detail : '.')));
      const n = gs.busy_ns.length, bw = gs.span_ns / n;
      const c = frame(gs.span_ns, 1, secs, (v) => Math.round(100 * v) + '%', 'GPU busy share over time');
      const w = (W - ML - MR) / n;
      let d = '', e = '';
      gs.busy_ns.forEach((v, b) => {
        const f = Math.min(v / bw, 1);
        d += 'M' + (ML + b * w) + ' ' + c.y(0) + ' V' + c.y(f) + ' h' + w + ' V' + c.y(0) + ' Z';
        e += 'M' + (ML + b * w) + ' ' + c.y(f) + ' V' + c.y(1) + ' h' + w + ' V' + c.y(f) + ' Z';
      });
      c.g.append(sv('path', { d: e, fill: 'var(--idle)', 'data-series': 'idle' }), sv('path', { d: d, fill: 'var(--busy)', 'data-series': 'busy' }));
      for (const gap of g.idle_gaps || []) {
        c.g.append(sv('rect', { x: c.x(gap.start_ns), y: H - MB + 2, width: Math.max(2, c.x(gap.start_ns + gap.duration_ns) - c.x(gap.start_ns)), height: 5, fill: 'var(--peak)', 'data-mark': 'gap' }));
      }
      hits(c, n, gs.span_ns, (b, ev) => showTip(ev, secs(b * bw) + ': GPU busy ' + fmtPct(Math.min(gs.busy_ns[b] / bw, 1)) + ' (' + fmtNs(gs.busy_ns[b]) + ')'));
      return logBlock(L, i, [figs([['busy share', 'busy_share', g.busy_share, fmtPct(g.busy_share)], ['kernels', 'kernel_count', g.kernel_count, fmtNum(g.kernel_count)],
        ['idle gaps', 'idle_gap_count', g.idle_gap_count, fmtNum(g.idle_gap_count) + ' (' + fmtPct(g.idle_gap_share) + ' of the run)'],
        ['longest idle gap', 'longest_idle_gap_ns', g.longest_idle_gap_ns, fmtNs(g.longest_idle_gap_ns) + ' at ' + secs(g.longest_idle_gap_at_ns || 0)]]),
        c.g, legend([['var(--busy)', 'busy'], ['var(--idle)', 'idle'], ['var(--peak)', 'longest idle gaps (under the axis)']])]);
    }));
  }

  function offloadSection() {
    return section('offload', 'OFFLOAD', logs.map((L, i) => {
      const o = L.offload;
      if (!o) return logBlock(L, i, absent('No offload records in this log: memory offload (TRAINSHIM_OFFLOAD=on or managed) was off.'));
      const ev = o.events || [];
      const t = ev.length ? el('table', { 'data-table': 'offload_events' }, el('tr', null, ['event', 'tag', 'bytes', 'duration'].map((h) => el('th', null, h))),
        ev.map((e) => el('tr', { 'data-kind': e.kind }, el('td', null, e.kind), td('tag', e.tag, String(e.tag)), td('bytes', e.bytes, fmtBytes(e.bytes)),
          td('duration_ns', e.duration_ns, fmtNs(e.duration_ns))))) : absent('No pauses or resumes.');
      return logBlock(L, i, [figs([['peak host-backed', 'peak_host_bytes', o.peak_host_bytes, fmtBytes(o.peak_host_bytes)],
        ['host-backed at end', 'host_bytes', o.host_bytes, fmtBytes(o.host_bytes)], ['pages backed at OOM', 'oom_host_pages', o.oom_host_pages, fmtNum(o.oom_host_pages)],
        ['pages to host', 'demoted_pages', o.demoted_pages, fmtNum(o.demoted_pages)], ['pages to device', 'promoted_pages', o.promoted_pages, fmtNum(o.promoted_pages)],
        ['failed moves', 'failed_moves', o.failed_moves, fmtNum(o.failed_moves)], ['managed allocations', 'managed_allocs', o.managed_allocs, fmtNum(o.managed_allocs)]]),
        t, o.more_events ? el('p', { class: 'note' }, '... and ' + o.more_events + ' more pauses and resumes') : null,
        o.advice ? el('p', { class: 'advice', 'data-k': 'offload_advice' }, 'advice: ' + o.advice) : null]);
    }));
  }

  function advice() {
    const items = [];
    logs.forEach((L, i) => (L.advice || []).forEach((a) => items.push([L, i, a])));
    if (!items.length) return section('advice', 'ADVICE', absent('Nothing to advise: no measured figure crossed an advice threshold.'));
    return section('advice', 'ADVICE', el('ol', { class: 'advice' }, items.map(([L, i, a]) =>
      el('li', { 'data-section': a.section }, multi ? '[rank ' + rankOf(L, i) + '] ' : '', a.text, el('a', { href: '#' + a.section + (a.section === 'nccl' ? '' : '-rank' + rankOf(L, i)) }, 'see the chart')))));
  }

  function header() {
    const first = logs[0] ? logs[0].run : { command: '' };
    const links = [['run', 'RUN'], ['ranks', 'RANKS'], ['memory', 'MEMORY'], ['steps', 'STEPS'], ['gemm', 'GEMM'], ['copies', 'COPIES'], ['nccl', 'NCCL'], ['timeline', 'GPU TIMELINE'], ['offload', 'OFFLOAD'], ['advice', 'ADVICE']];
    return el('header', null, el('h1', null, 'trainshim report' + (multi ? ' (' + logs.length + ' ranks)' : '')), el('div', { class: 'cmd' }, first.command),
      el('nav', null, links.map(([id, t]) => el('a', { href: '#' + id }, t))));
  }

  document.body.prepend(header());
  document.body.append(tip);
  app.replaceChildren(runSection(), ranksSection(), memorySection(), stepsSection(), gemmSection(), copiesSection(), ncclSection(), timelineSection(), offloadSection(), advice());
  document.body.setAttribute('data-rendered', '1');
})();
