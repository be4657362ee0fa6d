// Phalanx's HTML report: reads the data block (HTMLData, see README.md
// beside this file) and draws its tables and uPlot charts. Views (VIEWS):
// "run" (one run), "search" (a capacity search) and "compare" (an A/B
// comparison); they share the formatting, histogram and chart blocks.
(function () {
  'use strict';
  const T0 = performance.now();
  const D = JSON.parse(document.getElementById('phalanx-data').textContent);
  // window.phalanx is the page's state for tests and for a reader's console.
  const P = (window.phalanx = { data: D, ready: false, charts: {}, timing: {}, errors: [] });
  const app = document.getElementById('app');
  const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
  // DISPLAY_POINTS is how many points a timeline series keeps for display
  // (LTTB); every figure is computed from all intervals.
  const DISPLAY_POINTS = 1500;

  // ---- formatting ----
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children.flat()) if (c != null) e.append(c instanceof Node ? c : String(c));
    return e;
  }
  function fmtUs(us) {
    if (us == null || !isFinite(us)) return '-';
    const a = Math.abs(us);
    if (a >= 60e6) return (us / 60e6).toFixed(2) + 'm';
    if (a >= 1e6) return (us / 1e6).toFixed(2) + 's';
    if (a >= 1e3) return (us / 1e3).toFixed(2) + 'ms';
    return (Math.round(us * 100) / 100) + 'us';
  }
  function fmtNum(n, digits) {
    if (n == null || !isFinite(n)) return '-';
    return n.toLocaleString('en-US', { maximumFractionDigits: digits == null ? 2 : digits });
  }
  function fmtBytes(b) {
    if (b == null) return '-';
    const u = ['B', 'KB', 'MB', 'GB', 'TB'];
    let i = 0;
    while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i ? b.toFixed(2) : b) + u[i];
  }
  function fmtSecs(s) {
    if (s == null) return '-';
    if (s >= 3600) return Math.floor(s / 3600) + 'h' + (Math.floor(s / 60) % 60 ? (Math.floor(s / 60) % 60) + 'm' : '');
    if (s >= 60) return Math.floor(s / 60) + 'm' + (s % 60 ? Math.round(s % 60) + 's' : '');
    return (Math.round(s * 100) / 100) + 's';
  }
  function utc(epochS) { return new Date(epochS * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z'); }
  function table(head, rows) {
    return el('table', {}, el('tr', {}, head.map((h) => el('th', {}, h))),
      rows.map((r) => el('tr', {}, r.map((c) => (c instanceof Node && c.tagName === 'TD' ? c : el('td', {}, c))))));
  }
  function mapRows(m) { return Object.entries(m || {}).sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, fmtNum(v, 0)]); }
  function section(id, title, ...children) { return el('section', { id }, el('h2', {}, title), ...children); }

  // ---- histograms ----
  // A histogram here is {values, counts, total, mag}: the lowest value of
  // each non-empty bucket in increasing order and its count; mag is the
  // geometry's sub-bucket half-count magnitude (10: 3 significant digits,
  // the run's; 7: 2 digits, the page's interval histograms).
  function fromPairs(pairs, mag) {
    if (!pairs) return null;
    const n = pairs.length / 2, values = new Float64Array(n), counts = new Float64Array(n);
    let total = 0;
    for (let i = 0; i < n; i++) { values[i] = pairs[2 * i]; counts[i] = pairs[2 * i + 1]; total += counts[i]; }
    return { values, counts, total, mag };
  }
  // highest equivalent value of the bucket whose lowest value is v.
  function highest(v, mag) {
    if (v < 2 ** (mag + 1)) return v;
    return v + 2 ** (Math.floor(Math.log2(v)) - mag) - 1;
  }
  // value at quantile q (0-1], hdrhistogram-go's rule.
  function quantile(h, q) {
    let rank = q * h.total + 0.5;
    rank = rank >= h.total ? h.total : rank >= 1 ? Math.floor(rank) : 1;
    let cum = 0;
    for (let i = 0; i < h.counts.length; i++) {
      cum += h.counts[i];
      if (cum >= rank) return highest(h.values[i], h.mag);
    }
    return NaN;
  }
  // value of the page geometry's bucket index i (lowest of the bucket).
  function pageValue(i) {
    let b = (i >> 7) - 1, sub = (i & 127) + 128;
    if (b < 0) { sub -= 128; b = 0; }
    return sub * 2 ** b;
  }
  async function inflate(b64) {
    let u8;
    if (Uint8Array.fromBase64) u8 = Uint8Array.fromBase64(b64); // native where the browser has it
    else {
      const bin = atob(b64);
      u8 = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) u8[i] = bin.charCodeAt(i);
    }
    const s = new Blob([u8]).stream().pipeThrough(new DecompressionStream('deflate'));
    return new Uint8Array(await new Response(s).arrayBuffer());
  }
  // IntervalColumn indexes one HTMLIntervals column: offsets[i] is where
  // interval i starts in the inflated bytes.
  async function intervalColumn(b64, count) {
    const b = await inflate(b64), offsets = new Uint32Array(count + 1);
    let p = 0;
    const uv = () => { let x = 0, m = 1, c; do { c = b[p++]; x += (c & 127) * m; m *= 128; } while (c & 128); return x; };
    for (let i = 0; i < count; i++) {
      offsets[i] = p;
      const n = uv();
      for (let j = 0; j < n; j++) { uv(); uv(); }
    }
    offsets[count] = p;
    if (p !== b.length) throw new Error('interval histograms: ' + (b.length - p) + ' bytes after interval ' + count);
    return {
      // merge returns the histogram of intervals [from, to] (inclusive).
      merge(from, to) {
        const acc = new Float64Array(4096);
        let top = 0;
        for (let i = from; i <= to; i++) {
          p = offsets[i];
          const n = uv();
          let idx = 0;
          for (let j = 0; j < n; j++) { idx += uv(); acc[idx] += uv(); if (idx > top) top = idx; }
        }
        const values = [], counts = [];
        let total = 0;
        for (let i = 0; i <= top; i++) if (acc[i]) { values.push(pageValue(i)); counts.push(acc[i]); total += acc[i]; }
        return { values, counts, total, mag: 7 };
      },
    };
  }

  // ---- LTTB (Steinarsson's Largest-Triangle-Three-Buckets) ----
  // Returns the indices of xs kept for ys at about n points.
  function lttb(xs, ys, n) {
    const len = xs.length;
    if (n >= len || n < 3) return Array.from({ length: len }, (_, i) => i);
    const out = [0], every = (len - 2) / (n - 2);
    let a = 0;
    for (let i = 0; i < n - 2; i++) {
      const s0 = Math.floor((i + 1) * every) + 1, s1 = Math.min(Math.floor((i + 2) * every) + 1, len);
      let ax = 0, ay = 0;
      for (let j = s0; j < s1; j++) { ax += xs[j]; ay += ys[j] || 0; }
      ax /= s1 - s0; ay /= s1 - s0;
      const r0 = Math.floor(i * every) + 1, r1 = Math.floor((i + 1) * every) + 1;
      let best = -1, pick = r0;
      const px = xs[a], py = ys[a] || 0;
      for (let j = r0; j < r1; j++) {
        const area = Math.abs((px - ax) * ((ys[j] || 0) - py) - (px - xs[j]) * (ay - py));
        if (area > best) { best = area; pick = j; }
      }
      out.push(pick);
      a = pick;
    }
    out.push(len - 1);
    return out;
  }
  // downsample keeps, for each series, its LTTB points: the union of the
  // indices, so that every series' peaks stay drawn.
  function downsample(xs, series) {
    if (xs.length <= DISPLAY_POINTS) return [xs, ...series];
    const keep = new Uint8Array(xs.length);
    for (const ys of series) for (const i of lttb(xs, ys, DISPLAY_POINTS)) keep[i] = 1;
    const idx = [];
    for (let i = 0; i < keep.length; i++) if (keep[i]) idx.push(i);
    return [idx.map((i) => xs[i]), ...series.map((ys) => idx.map((i) => ys[i]))];
  }

  // ---- charts ----
  const tzDate = (ts) => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC');
  function chartWidth(host) { return Math.max(480, (host.clientWidth || app.clientWidth || 1000) - 8); }
  function chart(name, host, opts, data) {
    const u = new uPlot(Object.assign({ width: chartWidth(host), height: 300 }, opts), data, host);
    P.charts[name] = u;
    return u;
  }
  function posOrNull(v) { return v > 0 ? v : null; }
  const usAxis = (label) => ({ scale: 'us', label, size: 70, values: (u, vals) => vals.map(fmtUs) });
  const usSeries = (label, color, extra) => Object.assign({ label, scale: 'us', stroke: color, width: 1.5, value: (u, v) => fmtUs(v) }, extra);

  function pctLabel(x) {
    if (x <= 0) return '0%';
    const p = 100 * (1 - 10 ** -x);
    return (Math.round(p * 1e6) / 1e6) + '%';
  }
  // spectrumGrid returns x values (log10(1/(1-p))) for the histograms:
  // steps of 1/100 decade, each histogram's end (its max, at log10(total)).
  function spectrumGrid(hs) {
    const top = Math.max(1, ...hs.map((h) => (h && h.total ? Math.log10(h.total) : 0)));
    const xs = [];
    for (let x = 0; x < top; x += 0.01) xs.push(Math.round(x * 100) / 100);
    for (const h of hs) if (h && h.total) xs.push(Math.log10(h.total));
    xs.push(top);
    return [...new Set(xs)].sort((a, b) => a - b);
  }
  function spectrumSeries(h, xs) {
    if (!h || !h.total) return xs.map(() => null);
    const end = Math.log10(h.total), cum = [];
    let c = 0;
    for (let i = 0; i < h.counts.length; i++) { c += h.counts[i]; cum.push(c); }
    let i = 0;
    return xs.map((x) => {
      if (x > end + 1e-12) return null;
      const q = x >= end ? 1 : 1 - 10 ** -x;
      let rank = q * h.total + 0.5;
      rank = rank >= h.total ? h.total : rank >= 1 ? Math.floor(rank) : 1;
      while (i < cum.length - 1 && cum[i] < rank) i++;
      return highest(h.values[i], h.mag);
    });
  }
  const spectrumAxisX = {
    label: 'percentile (log scale of 1/(1-p))',
    splits: (u, ai, min, max) => { const s = []; for (let x = Math.ceil(min); x <= max; x++) s.push(x); return s; },
    values: (u, vals) => vals.map(pctLabel),
  };
  function spectrumChart(name, host, series, hs, lines) {
    const xs = spectrumGrid(hs);
    return chart(name, host, {
      scales: { x: { time: false, range: (u, min, max) => [0, Math.max(1, Math.ceil(max * 2) / 2)] }, us: { distr: 3 } },
      axes: [spectrumAxisX, usAxis('latency')],
      series: [{ label: 'percentile', value: (u, v) => (v == null ? '-' : pctLabel(v)) }, ...series],
      hooks: { draw: [(u) => drawLines(u, lines || [])] },
    }, [xs, ...hs.map((h) => spectrumSeries(h, xs))]);
  }
  // drawLines draws horizontal (y) and vertical (x) reference lines.
  function drawLines(u, lines) {
    const ctx = u.ctx;
    ctx.save();
    ctx.lineWidth = 1.5 * devicePixelRatio;
    ctx.font = (11 * devicePixelRatio) + 'px sans-serif';
    ctx.textAlign = 'left';
    ctx.textBaseline = 'alphabetic';
    for (const l of lines) {
      ctx.strokeStyle = ctx.fillStyle = l.color || '#b3261e';
      ctx.setLineDash(l.dash || [6 * devicePixelRatio, 4 * devicePixelRatio]);
      ctx.beginPath();
      if (l.x != null) {
        const x = u.valToPos(l.x, 'x', true);
        if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
        ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height);
        ctx.stroke();
        if (l.label) ctx.fillText(l.label, x + 3 * devicePixelRatio, u.bbox.top + 12 * devicePixelRatio);
      } else {
        const y = u.valToPos(l.y, l.scale || 'us', true);
        if (y < u.bbox.top || y > u.bbox.top + u.bbox.height) continue;
        ctx.moveTo(u.bbox.left, y); ctx.lineTo(u.bbox.left + u.bbox.width, y);
        ctx.stroke();
        if (l.label) ctx.fillText(l.label, u.bbox.left + 4 * devicePixelRatio, y - 4 * devicePixelRatio);
      }
    }
    ctx.restore();
  }

  // ---- thresholds ----
  // fmtThreshold formats a threshold's value in its unit.
  function fmtThreshold(v, unit) {
    if (v == null) return 'no data';
    switch (unit) {
      case 'us': return fmtUs(v);
      case 'ratio': return fmtNum(100 * v, 3) + ' %';
      case 'rps': return fmtNum(v, 1) + '/s';
      default: return fmtNum(v, 0);
    }
  }
  // sloLines returns the reference lines of the SLOs on the histograms of kinds.
  function sloLines(kinds) {
    return (D.slos || []).filter((s) => kinds.includes(s.kind)).flatMap((s) => [
      { y: s.limit_us, label: s.threshold + (s.pass ? ' (pass)' : ' (fail)') },
      { x: Math.log10(1 / (1 - s.percentile / 100)) }]);
  }

  // provenance renders what produced the run: the plan hash and the
  // coordinator's build, and each agent's host and build.
  function provenance(p) {
    if (!p) return null;
    const build = (v, c) => (v || '?') + (c ? ' (' + c.slice(0, 12) + ')' : '');
    return el('div', { id: 'provenance' }, el('h3', {}, 'Provenance'),
      el('p', {}, 'Plan ' + (p.plan_hash || '?') + ', coordinator ' + build(p.coordinator_version, p.coordinator_commit) + '.'),
      table(['agent', 'host', 'kernel', 'CPU', 'CPUs used', 'Go', 'TLS library', 'agent build'],
        (p.agents || []).map((a) => [a.name, a.hostname || '?', a.kernel || '?', (a.cpu_count ? a.cpu_count + ' × ' : '') + (a.cpu_model || '?'),
          a.cpus + (a.cpu_list ? ' (' + a.cpu_list + ')' : ''), (a.go_version || '?') + (a.os_arch ? ' ' + a.os_arch : ''),
          a.tls_library ? a.tls_library + ' ' + (a.tls_library_version || '') : '?', build(a.agent_version, a.agent_commit)])));
  }

  // ---- the run view ----
  function renderRun() {
    const r = D.run, tl = D.timeline, n = tl.start_s.length, open = r.mode === 'open';
    const start = Date.parse(r.started_at) / 1000;
    document.getElementById('subtitle').textContent =
      r.target + ' · started ' + utc(start) + ' · ' + fmtSecs(r.duration_s) + ' · ' + r.agent_count + ' agent' + (r.agent_count === 1 ? '' : 's');

    // Notices: what the report does not cover, and client-bound runs.
    const notices = (D.warnings || []).map((w) => el('div', { class: 'notice bad' }, 'Warning: ' + w + '.'));
    if (r.partial) notices.push(el('div', { class: 'notice bad' }, 'Partial run: ', r.coordinator_lost ? 'coordctl lost the coordinator (' + r.coordinator_lost + '); ' : '',
      (r.lost_agents || []).map((l) => 'lost agent ' + l.name + ' after ' + fmtSecs(l.lost_at_s) + ': ' + l.error + '. '),
      'Every figure covers the ' + fmtSecs(r.duration_s) + ' that ran.'));
    if (r.aborted) notices.push(el('div', { class: 'notice bad' }, 'Aborted at the agent loss (on_agent_loss abort).'));
    if (r.aborted_by_threshold) notices.push(el('div', { class: 'notice bad' }, 'Aborted by threshold ' + r.aborted_by_threshold + ' (--abort-on-fail) at ' + fmtSecs(r.aborted_at_s) + ': the report covers the ' + fmtSecs(r.duration_s) + ' that ran.'));
    if (r.stopped_early) notices.push(el('div', { class: 'notice' }, 'Stopped early: the report covers the first ' + fmtSecs(r.duration_s) + '.'));
    if (r.client_bound) notices.push(el('div', { class: 'notice' }, 'Client-bound: the numbers may measure the client, not the server: ', (r.client_bound_reasons || []).join('; ') + '.'));
    if (r.server_bound) notices.push(el('div', { class: 'notice' }, 'Server-bound: the server is the limit, not the load generators: ', (r.server_bound_reasons || []).join('; ') + '.'));
    if (r.stall) notices.push(el('div', { class: 'notice' }, 'Stall: ' + r.stall + '.'));
    if (r.coordinator_stall_s) notices.push(el('div', { class: 'notice' }, 'The coordinator stalled for ' + fmtSecs(r.coordinator_stall_s) + '.'));

    // Summary, as wrk prints it.
    const lat = r.latency_us;
    const kpi = (v, label) => el('div', { class: 'kpi' }, el('b', {}, v), el('span', {}, label));
    const phases = [['latency' + (open ? ' (from intended send)' : ''), r.latency_us], ['service time', r.service_time_us], ['send lateness', r.send_lateness_us],
      ['connect', r.connect_us], ['TLS handshake', r.tls_handshake_us], ['TLS full', r.tls_handshake_full_us], ['TLS resumed', r.tls_handshake_resumed_us], ['TTFB', r.ttfb_us]]
      .filter(([, s]) => s);
    const summary = section('summary', 'Summary',
      el('p', {}, fmtNum(r.requests, 0) + ' requests in ' + fmtSecs(r.duration_s) + ', ' + fmtBytes(r.bytes_read) + ' read' +
        (r.in_flight ? ', ' + fmtNum(r.in_flight, 0) + ' in flight at the end' : '') + ' (' + fmtNum(r.issued, 0) + ' issued)'),
      el('div', { class: 'kpis' }, kpi(fmtNum(r.rps), 'requests/s'), kpi(fmtBytes(r.transfer_bps) + '/s', 'transfer'),
        kpi(lat ? fmtUs(lat.mean) : '-', 'latency avg'), kpi(lat ? fmtUs(lat.stdev) : '-', 'latency stdev'), kpi(lat ? fmtUs(lat.max) : '-', 'latency max'),
        kpi(lat ? fmtUs(lat.p99) : '-', 'latency p99'), kpi(fmtNum(Object.values(r.errors || {}).reduce((a, b) => a + b, 0), 0), 'errors'),
        kpi(fmtNum(r.non_2xx_3xx, 0), 'non-2xx/3xx')),
      el('h3', {}, 'Latency and phases'),
      table(['', 'count', 'avg', 'stdev', 'min', 'p50', 'p75', 'p90', 'p99', 'p99.9', 'p99.99', 'max'],
        phases.map(([name, s]) => [name, fmtNum(s.count, 0), fmtUs(s.mean), fmtUs(s.stdev), fmtUs(s.min), fmtUs(s.p50), fmtUs(s.p75), fmtUs(s.p90), fmtUs(s.p99), fmtUs(s.p999), fmtUs(s.p9999), fmtUs(s.max)])),
      (r.mix || []).length ? el('div', { id: 'mix' }, el('h3', {}, 'Requests of the mix' + (r.mix_agents && r.mix_agents < r.agent_count ? ' (over ' + r.mix_agents + ' of ' + r.agent_count + ' agents)' : '')),
        table(['', 'method', 'URL', 'responses', 'errors', 'status', 'avg', 'p50', 'p99', 'max'],
          r.mix.map((m) => [m.index, m.method, el('td', { class: 'text' }, m.url), fmtNum(m.requests, 0), fmtNum(Object.values(m.errors || {}).reduce((a, b) => a + b, 0), 0),
            el('td', { class: 'text' }, Object.entries(m.status || {}).map(([c, n]) => c + ' ×' + fmtNum(n, 0)).join(', ')),
            ...(m.latency_us ? [fmtUs(m.latency_us.mean), fmtUs(m.latency_us.p50), fmtUs(m.latency_us.p99), fmtUs(m.latency_us.max)] : ['-', '-', '-', '-'])]))) : null,
      el('div', { class: 'grid' },
        el('div', {}, el('h3', {}, 'Errors by kind'), Object.keys(r.errors || {}).length ? table(['kind', 'requests'], mapRows(r.errors)) : el('p', { class: 'muted' }, 'none')),
        el('div', {}, el('h3', {}, 'Status codes'), table(['status', 'responses'], mapRows(r.status))),
        el('div', {}, el('h3', {}, 'Connections and handshakes'), table(['', ''], [
          ['connections (plan)', fmtNum(r.connections, 0)], ['opened in the window', fmtNum(r.connections_opened, 0)], ['reconnects', fmtNum(r.reconnects, 0)],
          ['retries (GOAWAY)', fmtNum(r.retries, 0)], ['TLS handshakes full', fmtNum(r.handshakes.full, 0)], ['TLS handshakes resumed', fmtNum(r.handshakes.resumed, 0)],
          ...(r.h2_max_streams ? [['HTTP/2 max streams', r.h2_max_streams]] : [])])),
        el('div', {}, el('h3', {}, 'TLS parameters (connections)'), table(['', 'value', 'connections'],
          ['version', 'cipher', 'group', 'alpn'].flatMap((k) => Object.entries((r.tls || {})[k] || {}).map(([v, c]) => [k, v, fmtNum(c, 0)]))))));

    // The plan.
    const planRows = [['target', r.target], ['load', open ? 'open loop (target rate; latency from the intended send)' : 'closed loop (fixed connections; latency from the actual send)'],
      ['connections', fmtNum(r.connections, 0)], ['agents', r.agent_count]];
    if (r.plan_duration_s) planRows.push(['duration', fmtSecs(r.plan_duration_s)]);
    if (r.plan_requests) planRows.push(['requests', fmtNum(r.plan_requests, 0)]);
    if (open) planRows.push(['target RPS (window mean)', fmtNum(r.target_rps)], ['missed sends', fmtNum(r.missed, 0) + (r.unsent ? ' (' + fmtNum(r.unsent, 0) + ' never sent)' : '')]);
    if (r.pacing_spin) planRows.push(['pacing spin', 'each send\'s timer wait ended up to 100 µs early, then spun to its intended time (--pacing-spin)']);
    if (r.pacing_window_us) planRows.push(['pacing window', fmtNum(r.pacing_window_us / 1000) + ' ms (intended send times rounded down to its multiples, --pacing-window)']);
    if (r.on_agent_loss) planRows.push(['on agent loss', r.on_agent_loss]);
    if ((r.tags || []).length) planRows.push(['tags', r.tags.join(', ')]);
    if (r.note) planRows.push(['note', r.note]);
    if (r.warmup) planRows.push(['warm-up', fmtSecs(r.warmup.duration_s) + ', ' + fmtNum(r.warmup.requests, 0) + ' requests (excluded)']);
    const plan = section('plan', 'Plan', table(['', ''], planRows.map(([k, v]) => [k, el('td', { class: 'text' }, String(v))])),
      (r.stages || []).length ? table(['stage', 'start', 'duration', 'target', 'requests', 'RPS', 'errors', 'p99', 'change skew'],
        r.stages.map((s) => [s.index, fmtSecs(s.start_s), fmtSecs(s.duration_s), s.target_from + ' → ' + s.target_to, fmtNum(s.requests, 0), fmtNum(s.rps),
          fmtNum(Object.values(s.errors || {}).reduce((a, b) => a + b, 0), 0), s.latency_us ? fmtUs(s.latency_us.p99) : '-', fmtUs(s.change_skew_us)])) : null);

    const th = r.thresholds || [];
    const thSection = th.length ? section('thresholds', 'Thresholds', table(['threshold', 'value', 'limit', 'result'],
      th.map((t) => [t.threshold, fmtThreshold(t.value, t.unit), fmtThreshold(t.limit, t.unit), el('td', { class: t.pass ? 'pass' : 'fail' }, t.pass ? 'pass' : t.no_data ? 'fail (no data)' : 'fail')]))) : null;

    // Timeline.
    const xs = tl.start_s.map((s) => start + s);
    const tlHost = el('div', { class: 'chart', id: 'timeline-chart' });
    const timeline = section('timeline', 'Latency over time', tlHost,
      el('p', { class: 'chart-note' }, n + ' intervals' + (n > DISPLAY_POINTS ? ', drawn at about ' + DISPLAY_POINTS + ' points each (LTTB); every figure is from all intervals' : '') +
        '. Drag across the chart to recompute the spectra below from that range’s interval histograms.'));
    const spHost = el('div', { class: 'chart', id: 'spectrum-chart' }), phHost = el('div', { class: 'chart', id: 'phases-chart' });
    const source = el('span', { id: 'spectrum-source' }), reset = el('button', { id: 'spectrum-reset', onclick: () => showWhole() }, 'whole window');
    const iv = D.intervals, phaseCols = ['connect', 'tls_full', 'tls_resumed', 'ttfb'].filter((k) => iv[k]);
    const phaseSource = el('span', { id: 'phases-source' });
    const spectra = section('spectra', 'Percentile spectrum', el('p', {}, source, ' ', reset), spHost,
      el('p', { class: 'chart-note', id: 'spectrum-note' }), el('h3', {}, 'Phases'), el('p', {}, phaseSource), phHost,
      el('p', { class: 'chart-note', id: 'phases-note' }, phaseCols.length ? 'A range selected in the timeline recomputes the phases too, from its intervals’ ' + phaseCols.join(', ') + ' histograms.'
        : 'Phases are of the whole window (this result keeps no per-interval phase histograms).'));

    // Agents.
    const cpuHost = el('div', { class: 'chart', id: 'cpu-chart' }), rpsHost = el('div', { class: 'chart', id: 'agent-rps-chart' });
    const agents = section('agents', 'Agents', el('p', {}, 'Start skew (spread of the agents’ first sends): ' + fmtUs(r.start_skew_us) +
      (r.start_skew_bound_us ? ' (± ' + fmtUs(r.start_skew_bound_us) + ': the agents’ clock samples)' : '')),
      table(['agent', 'connections', 'requests', 'RPS', 'errors', 'missed', 'in flight', 'CPU busy', 'CPUs', 'pin map', 'clock offset', 'RTT', 'start offset', ''],
        (r.agents || []).map((a) => [a.name, fmtNum(a.connections, 0), fmtNum(a.requests, 0), fmtNum(a.rps), fmtNum(a.errors, 0), fmtNum(a.missed, 0),
          fmtNum(a.in_flight, 0), fmtNum(100 * a.cpu_util, 1) + ' %', a.cpus, a.cpu_list || 'not pinned', fmtUs(a.clock_offset_us), fmtUs(a.rtt_us),
          fmtUs(a.start_offset_us), el('td', { class: 'text' }, a.lost ? 'lost at ' + fmtSecs(a.lost_at_s) + ': ' + a.error : a.error || '')])),
      provenance(r.provenance),
      el('h3', {}, 'CPU busy over time'), cpuHost,
      el('p', { class: 'chart-note' }, 'Each agent’s busy fraction of its usable CPUs per interval.'),
      el('h3', {}, 'Responses per second by agent'), tl.agent_requests ? rpsHost :
        el('p', { class: 'muted', id: 'agent-rps-absent' }, 'Not in this result: the coordinator keeps each agent’s intervals only when asked (coordctl run --hlog FILE or --csv-per-agent).'));

    app.append(...notices, summary, plan, ...(thSection ? [thSection] : []), timeline, spectra, agents);

    // Draw the charts.
    const nz = (col) => col.map(posOrNull);
    const perS = (col) => col.map((v, i) => (tl.duration_s[i] > 0 ? v / tl.duration_s[i] : null));
    const cols = [nz(tl.p50_us), nz(tl.p90_us), nz(tl.p99_us), nz(tl.p999_us), nz(tl.max_us), tl.rps, perS(tl.errors)];
    const tlSeries = [usSeries('p50', COLORS[0]), usSeries('p90', COLORS[2]), usSeries('p99', COLORS[1]), usSeries('p99.9', COLORS[3]), usSeries('max', COLORS[4]),
      { label: 'RPS', scale: 'rps', stroke: '#222', width: 1, value: (u, v) => fmtNum(v, 1) },
      { label: 'errors/s', scale: 'rps', stroke: '#b3261e', width: 1, fill: 'rgba(179,38,30,0.12)', value: (u, v) => fmtNum(v, 1) }];
    if (open) {
      cols.push(tl.target_rps);
      tlSeries.push({ label: 'target RPS', scale: 'rps', stroke: '#555', width: 1, dash: [6, 4], value: (u, v) => fmtNum(v, 1) });
    }
    const stageLines = (r.stages || []).slice(1).map((s) => ({ x: start + s.start_s, label: 'stage ' + s.index, color: '#5b6577' }));
    const tu = chart('timeline', tlHost, {
      tzDate,
      scales: { x: { time: true }, us: { distr: 3 }, rps: { range: (u, min, max) => [0, max > 0 ? max * 1.05 : 1] } },
      axes: [{}, usAxis('latency'), { scale: 'rps', side: 1, label: 'per second', size: 70, grid: { show: false }, values: (u, vals) => vals.map((v) => fmtNum(v, 0)) }],
      series: [{ label: 'time (UTC)' }, ...tlSeries],
      cursor: { drag: { x: true, y: false, setScale: false } },
      hooks: { draw: [(u) => drawLines(u, stageLines)], setSelect: [(u) => onSelect(u)] },
    }, downsample(xs, cols));

    // Spectra of the whole window (run geometry) or of a range (page geometry).
    const whole = {
      latency: fromPairs(D.spectra.latency, 10), service: fromPairs(D.spectra.service_time, 10), lateness: fromPairs(D.spectra.lateness, 10),
      connect: fromPairs(D.spectra.connect, 10), tlsFull: fromPairs(D.spectra.tls_full, 10), tlsResumed: fromPairs(D.spectra.tls_resumed, 10), ttfb: fromPairs(D.spectra.ttfb, 10),
    };
    const latSLO = sloLines(['latency', 'service', 'lateness']);
    const latSeries = [usSeries(open ? 'latency (from intended send)' : 'latency', COLORS[0])];
    if (open) latSeries.push(usSeries('service time (from actual send)', COLORS[1]), usSeries('send lateness', COLORS[7]));
    const latHists = (h) => (open ? [h.latency, h.service, h.lateness] : [h.latency]);
    let su = spectrumChart('spectrum', spHost, latSeries, latHists(whole), latSLO);
    const phaseSeries = [usSeries('connect', COLORS[2]), usSeries('TLS full', COLORS[3]), usSeries('TLS resumed', COLORS[4]), usSeries('TTFB', COLORS[5])];
    const phaseSLO = sloLines(['connect', 'tls_full', 'tls_resumed', 'ttfb']);
    const phaseHists = (h) => [h.connect, h.tlsFull, h.tlsResumed, h.ttfb];
    let pu = spectrumChart('phases', phHost, phaseSeries, phaseHists(whole), phaseSLO);
    const cpuCols = (tl.cpu_busy || []).map((c) => c.map((v) => 100 * v));
    chart('cpu', cpuHost, {
      height: 220, tzDate, scales: { x: { time: true }, pct: { range: [0, 100] } },
      axes: [{}, { scale: 'pct', label: 'CPU busy %', values: (u, vals) => vals.map((v) => v + '%') }],
      series: [{ label: 'time (UTC)' }, ...(r.agents || []).map((a, i) => ({ label: a.name, scale: 'pct', stroke: COLORS[i % COLORS.length], width: 1, value: (u, v) => fmtNum(v, 1) + ' %' }))],
    }, downsample(xs, cpuCols));
    if (tl.agent_requests) {
      chart('agentRPS', rpsHost, {
        height: 220, tzDate, scales: { x: { time: true }, rps: { range: (u, min, max) => [0, max > 0 ? max * 1.05 : 1] } },
        axes: [{}, { scale: 'rps', label: 'responses/s', size: 70, values: (u, vals) => vals.map((v) => fmtNum(v, 0)) }],
        series: [{ label: 'time (UTC)' }, ...(r.agents || []).map((a, i) => ({ label: a.name, scale: 'rps', stroke: COLORS[i % COLORS.length], width: 1, value: (u, v) => fmtNum(v, 1) }))],
      }, downsample(xs, tl.agent_requests.map(perS)));
    }

    const sum = (h) => (h && h.total ? { count: h.total, p50: quantile(h, 0.5), p99: quantile(h, 0.99), max: quantile(h, 1) } : null);
    // setSpectrum redraws the spectra of h (the latency kinds, and the
    // phases when ph is set: else they stay the whole window's).
    function setSpectrum(h, text, note, ph, phText) {
      const hs = latHists(h);
      su.destroy();
      su = spectrumChart('spectrum', spHost, latSeries, hs, latSLO);
      source.textContent = text;
      document.getElementById('spectrum-note').textContent = note;
      P.spectrum = { source: text, latency: sum(hs[0]), service: sum(hs[1]), lateness: sum(hs[2]) };
      if (ph) {
        pu.destroy();
        pu = spectrumChart('phases', phHost, phaseSeries, phaseHists(ph), phaseSLO);
        phaseSource.textContent = phText;
        P.phases = { source: phText, connect: sum(ph.connect), tlsFull: sum(ph.tlsFull), tlsResumed: sum(ph.tlsResumed), ttfb: sum(ph.ttfb) };
      }
    }
    function showWhole() {
      tu.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
      setSpectrum(whole, 'Whole window: ' + fmtNum(whole.latency ? whole.latency.total : 0, 0) + ' responses.',
        'Full precision (3 significant digits, 0.1 %).', whole, 'Whole window.');
    }
    P.showWhole = showWhole;
    // Interval histograms are inflated after the first paint; a selection waits for them.
    const cols2 = (async () => {
      const t = performance.now();
      const c = { latency: await intervalColumn(D.intervals.latency, D.intervals.count) };
      if (D.intervals.lateness) c.lateness = await intervalColumn(D.intervals.lateness, D.intervals.count);
      if (D.intervals.service_time) c.service = await intervalColumn(D.intervals.service_time, D.intervals.count);
      for (const [k, name] of [['connect', 'connect'], ['tls_full', 'tlsFull'], ['tls_resumed', 'tlsResumed'], ['ttfb', 'ttfb']]) {
        if (D.intervals[k]) c[name] = await intervalColumn(D.intervals[k], D.intervals.count);
      }
      P.timing.intervalsMs = performance.now() - t;
      return c;
    })();
    cols2.catch((e) => { P.errors.push(String(e)); console.error(e); });
    let selSeq = 0;
    // selectRange recomputes the spectra from the intervals whose start lies in [fromS, toS] (epoch seconds).
    async function selectRange(fromS, toS) {
      let i0 = 0;
      while (i0 < n && xs[i0] < fromS) i0++;
      let i1 = i0 - 1;
      while (i1 + 1 < n && xs[i1 + 1] <= toS) i1++;
      if (i1 < i0) return null;
      const seq = ++selSeq, c = await cols2;
      if (seq !== selSeq) return null;
      const t = performance.now();
      const m = (k) => (c[k] ? c[k].merge(i0, i1) : null);
      const h = { latency: m('latency'), lateness: m('lateness'), service: m('service') };
      const reqs = tl.requests.slice(i0, i1 + 1).reduce((a, b) => a + b, 0);
      const range = utc(xs[i0]) + ' to ' + utc(xs[i1] + tl.duration_s[i1]) + ': ' + (i1 - i0 + 1) + ' intervals';
      const ph = phaseCols.length ? { connect: m('connect'), tlsFull: m('tlsFull'), tlsResumed: m('tlsResumed'), ttfb: m('ttfb') } : null;
      const conns = (tl.connections || []).slice(i0, i1 + 1).reduce((a, b) => a + b, 0);
      setSpectrum(h, 'Selected ' + range + ', ' + fmtNum(h.latency.total, 0) + ' responses (' + fmtNum(reqs, 0) + ' requests counted).',
        'Merged from the range’s interval histograms at 2 significant digits (values within 0.78 %, exact below 256us)' +
          (open && !c.service ? '; this result keeps no per-interval service time, so it is not drawn for a range.' : '.'),
        ph, ph ? 'Selected ' + range + ', ' + fmtNum(ph.ttfb ? ph.ttfb.total : 0, 0) + ' TTFB samples, ' + fmtNum(ph.connect ? ph.connect.total : 0, 0) + ' connects' +
          (tl.connections ? ' (' + fmtNum(conns, 0) + ' connections opened)' : '') + ', at 2 significant digits.' : null);
      P.timing.selectMs = performance.now() - t;
      P.spectrum.range = [i0, i1];
      if (ph) P.phases.range = [i0, i1];
      return P.spectrum;
    }
    P.selectRange = selectRange;
    function onSelect(u) {
      if (u.select.width < 2) return;
      const from = u.posToVal(u.select.left, 'x'), to = u.posToVal(u.select.left + u.select.width, 'x');
      selectRange(from, to).catch((e) => { P.errors.push(String(e)); console.error(e); });
    }
    showWhole();
    cols2.then(() => { P.intervalsReady = true; });
  }

  // ---- the search view ----
  function renderSearch() {
    const S = D.search, open = S.mode === 'open';
    document.getElementById('subtitle').textContent = S.url + ' · ' + (open ? 'open loop, rate' : 'closed loop, connections') +
      (S.pacing_window_us ? ', paced in ' + fmtNum(S.pacing_window_us / 1000) + ' ms windows' : '') + (S.pacing_spin ? ', paced with a spin' : '') +
      ' ' + fmtNum(S.range_from, 0) + '..' + fmtNum(S.range_to, 0) + ' · SLO ' + (S.slos || []).join(' and ') + ' · ' + fmtSecs(S.elapsed_s);
    const answer = S.outcome === 'found'
      ? el('div', { class: 'kpis' }, ...[[fmtNum(S.knee, 1) + ' ' + S.unit, 'knee'], [fmtNum(S.knee_lo, 1) + ' .. ' + fmtNum(S.knee_hi, 1), fmtNum(100 * S.knee_confidence, 0) + ' % CI'],
        [fmtNum(S.passing, 1) + ' / ' + fmtNum(S.failing, 1), 'held in ' + (S.passing_held || 0) + ' of ' + S.repeats + ' runs / broke in ' + (S.failing_broke || 0) + ' of ' + S.repeats],
        [fmtNum(S.knee_rps, 1), 'requests/s at ' + fmtNum(S.passing, 1) + ' (the passing step)'], [fmtUs(S.knee_p99_us), 'p99 at ' + fmtNum(S.passing, 1)]]
        .map(([v, l]) => el('div', { class: 'kpi' }, el('b', {}, v), el('span', {}, l))))
      : el('div', { class: 'notice' + (S.outcome === 'inconclusive' ? ' bad' : '') }, S.outcome.replace('_', ' ') + ': ' + S.message +
        ((S.saturated_agents || []).length ? ' (saturated: ' + S.saturated_agents.join(', ') + (S.more_agents ? '; about ' + S.more_agents + ' more agents needed' : '') + ')' : ''));
    const curveHost = el('div', { class: 'chart', id: 'curve-chart' });
    app.append(section('answer', 'Capacity search', answer),
      section('curve', 'Throughput-latency curve', curveHost,
        el('p', { class: 'chart-note' }, 'Each step’s p99 (left, log) and achieved requests/s (right) at its target; the knee and its confidence interval are shaded.')),
      section('steps', 'Steps', table(['step', 'target', 'repeat', 'achieved RPS', 'p50', 'p99', 'p99.9', 'errors', 'verdict', 'run', ''],
        (S.steps || []).map((st) => [st.index, fmtNum(st.target, 1), st.repeat || '', fmtNum(st.achieved_rps, 1), fmtUs(st.p50_us), fmtUs(st.p99_us), fmtUs(st.p999_us),
          fmtNum(st.errors, 0), el('td', { class: st.verdict === 'pass' ? 'pass' : 'fail' }, st.verdict), st.run_id, el('td', { class: 'text' }, st.verdict === 'pass' ? '' : st.why || '')]))));
    const c = (S.curve || []).slice().sort((a, b) => a.target - b.target);
    const xs = c.map((p) => p.target);
    const by = (v) => c.map((p) => (p.verdict === v && p.p99_us > 0 ? p.p99_us : null));
    const pts = (label, color) => usSeries(label, color, { paths: () => null, points: { show: true, size: 9, fill: color } });
    const band = S.outcome === 'found' ? [S.knee_lo, S.knee_hi] : null;
    chart('curve', curveHost, {
      scales: { x: { time: false }, us: { distr: 3 }, rps: { range: (u, min, max) => [0, max > 0 ? max * 1.05 : 1] } },
      axes: [{ label: 'target (' + S.unit + ')', values: (u, v) => v.map((x) => fmtNum(x, 0)) }, usAxis('p99'),
        { scale: 'rps', side: 1, label: 'achieved requests/s', size: 70, grid: { show: false }, values: (u, v) => v.map((x) => fmtNum(x, 0)) }],
      series: [{ label: 'target', value: (u, v) => fmtNum(v, 1) }, usSeries('p99', '#999'), pts('pass', '#1e7a34'), pts('fail', '#b3261e'), pts('inconclusive', '#8a5a00'),
        { label: 'achieved RPS', scale: 'rps', stroke: '#1f77b4', width: 1.5, value: (u, v) => fmtNum(v, 1) }],
      hooks: { draw: [(u) => {
        if (!band) return;
        const x0 = u.valToPos(band[0], 'x', true), x1 = u.valToPos(band[1], 'x', true);
        u.ctx.save();
        u.ctx.fillStyle = 'rgba(31,119,180,0.12)';
        u.ctx.fillRect(Math.min(x0, x1), u.bbox.top, Math.max(2, Math.abs(x1 - x0)), u.bbox.height);
        u.ctx.restore();
        drawLines(u, [{ x: S.knee, label: 'knee ' + fmtNum(S.knee, 1), color: '#1f77b4' }]);
      }] },
    }, [xs, c.map((p) => p.p99_us || null), by('pass'), by('fail'), by('inconclusive'), c.map((p) => p.achieved_rps)]);
  }

  // ---- the comparison view ----
  // Baseline and candidate overlaid: the statistics table exactly as
  // coordctl compare prints it, each side's runs, the latency timelines
  // (each side's runs merged interval by interval) and the spectra (each
  // side's runs' histograms merged).
  function renderCompare() {
    const C = D.compare, A = C.baseline, B = C.candidate;
    const open = [...A.runs, ...B.runs].some((r) => r.mode === 'open');
    document.getElementById('subtitle').textContent = A.label + ' (' + A.runs.length + ' run' + (A.runs.length === 1 ? '' : 's') + ') vs ' +
      B.label + ' (' + B.runs.length + ' run' + (B.runs.length === 1 ? '' : 's') + ') · ' + C.method + ', α = ' + C.alpha.toFixed(2) + ', ' + fmtNum(100 * C.confidence, 0) + ' % CI';
    const notes = (C.notes || []).map((n) => el('div', { class: 'notice' }, n));
    const stats = section('stats', 'Statistics', table(C.header, C.rows.map((r) => r.cells.map((c, i) => el('td', { class: r.significant && i === 3 ? 'delta-sig' : '' }, c)))),
      el('p', { class: 'chart-note' }, 'As coordctl compare prints it: the delta is ~ when not significant (p ≥ ' + C.alpha + '), ? when it has no meaning (a zero baseline).'));
    const runRows = (side) => side.runs.map((r) => [side.label, r.run_id, el('td', { class: 'text' }, r.target), utc(Date.parse(r.started_at) / 1000), fmtSecs(r.duration_s), r.mode, fmtNum(r.rps), fmtUs(r.p99_us), fmtNum(r.errors, 0)]);
    const runs = section('runs', 'Runs', table(['side', 'run', 'target', 'started', 'window', 'load', 'RPS', 'p99', 'errors'], [...runRows(A), ...runRows(B)]));
    const tlHost = el('div', { class: 'chart', id: 'compare-timeline-chart' }), spHost = el('div', { class: 'chart', id: 'compare-spectrum-chart' }), phHost = el('div', { class: 'chart', id: 'compare-phases-chart' });
    const n = Math.max(A.timeline.start_s.length, B.timeline.start_s.length);
    const timeline = section('timeline', 'Latency over time', tlHost, el('p', { class: 'chart-note' }, 'Each side’s p50 and p99 per interval (its runs’ interval histograms merged by interval index; x: seconds from the window’s start) and its mean RPS' +
      (n > DISPLAY_POINTS ? '; drawn at about ' + DISPLAY_POINTS + ' points each (LTTB)' : '') + '.'));
    const spectra = section('spectra', 'Percentile spectra', spHost, el('p', { class: 'chart-note' }, 'Each side’s runs’ latency histograms merged (3 significant digits)' + (open ? '; service time from the actual send, dashed' : '') + '.'),
      el('h3', {}, 'Phases'), phHost, el('p', { class: 'chart-note' }, 'Baseline solid, candidate dashed.'));
    app.append(...notes, stats, runs, timeline, spectra);

    const CA = COLORS[0], CB = COLORS[1];
    // The x axis: interval offsets, the longer side's.
    const xs = (A.timeline.start_s.length >= B.timeline.start_s.length ? A : B).timeline.start_s.slice();
    const col = (side, k) => xs.map((_, i) => (i < side.timeline[k].length ? side.timeline[k][i] : null));
    const nz = (c) => c.map(posOrNull);
    const cols = [nz(col(A, 'p50_us')), nz(col(A, 'p99_us')), nz(col(B, 'p50_us')), nz(col(B, 'p99_us')), col(A, 'rps'), col(B, 'rps')];
    chart('compareTimeline', tlHost, {
      scales: { x: { time: false }, us: { distr: 3 }, rps: { range: (u, min, max) => [0, max > 0 ? max * 1.05 : 1] } },
      axes: [{ label: 'seconds from the window’s start', values: (u, v) => v.map(fmtSecs) }, usAxis('latency'),
        { scale: 'rps', side: 1, label: 'RPS', size: 70, grid: { show: false }, values: (u, vals) => vals.map((v) => fmtNum(v, 0)) }],
      series: [{ label: 'offset', value: (u, v) => (v == null ? '-' : fmtSecs(v)) }, usSeries(A.label + ' p50', CA, { dash: [4, 3] }), usSeries(A.label + ' p99', CA),
        usSeries(B.label + ' p50', CB, { dash: [4, 3] }), usSeries(B.label + ' p99', CB),
        { label: A.label + ' RPS', scale: 'rps', stroke: CA, width: 1, dash: [1, 3], value: (u, v) => fmtNum(v, 1) },
        { label: B.label + ' RPS', scale: 'rps', stroke: CB, width: 1, dash: [1, 3], value: (u, v) => fmtNum(v, 1) }],
    }, downsample(xs, cols));
    const sp = (side) => ({ latency: fromPairs(side.spectra.latency, 10), service: fromPairs(side.spectra.service_time, 10), connect: fromPairs(side.spectra.connect, 10),
      tlsFull: fromPairs(side.spectra.tls_full, 10), tlsResumed: fromPairs(side.spectra.tls_resumed, 10), ttfb: fromPairs(side.spectra.ttfb, 10) });
    const sa = sp(A), sb = sp(B);
    const latSeries = [usSeries(A.label + ' latency', CA), usSeries(B.label + ' latency', CB)], latHs = [sa.latency, sb.latency];
    if (open) {
      latSeries.push(usSeries(A.label + ' service time', CA, { dash: [6, 4] }), usSeries(B.label + ' service time', CB, { dash: [6, 4] }));
      latHs.push(sa.service, sb.service);
    }
    spectrumChart('compareSpectrum', spHost, latSeries, latHs, []);
    const phases = [['connect', 'connect', COLORS[2]], ['tlsFull', 'TLS full', COLORS[3]], ['tlsResumed', 'TLS resumed', COLORS[4]], ['ttfb', 'TTFB', COLORS[5]]]
      .filter(([k]) => sa[k] || sb[k]);
    spectrumChart('comparePhases', phHost, phases.flatMap(([, label, c]) => [usSeries(A.label + ' ' + label, c), usSeries(B.label + ' ' + label, c, { dash: [6, 4] })]),
      phases.flatMap(([k]) => [sa[k], sb[k]]), []);
  }

  const VIEWS = { run: renderRun, search: renderSearch, compare: renderCompare };
  try {
    const view = VIEWS[D.view];
    if (!view) throw new Error('this page cannot show a "' + D.view + '" view (data format ' + D.format + ')');
    view();
    P.timing.readyMs = performance.now() - T0;
    P.timing.sinceNavigationMs = performance.now(); // from the navigation's start: the file's load and parse included
    P.ready = true;
  } catch (e) {
    P.errors.push(String(e));
    app.prepend(el('div', { class: 'notice bad' }, 'The report could not be drawn: ' + e.message));
    throw e;
  }
})();
