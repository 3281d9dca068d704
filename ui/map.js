// The Gapless GPU map (docs/gpu-map.md). Polls map.json (relative: the page may sit under the
// API server's service proxy) and redraws without a reload. Nodes are grouped by GPU model; a
// group larger than a page gets an overview canvas (one pixel block per GPU) above its paged
// node cards, so 5,000 nodes stay one glance and a few hundred DOM elements.
'use strict';
(() => {
  const PAGE_SIZE = 48;
  const params = new URLSearchParams(location.search);
  const interval = Math.max(250, Number(params.get('interval')) || 2000);
  const PALETTE_ISLANDS = ['#38bdf8', '#a3e635', '#f472b6', '#facc15', '#c084fc', '#fb923c'];
  // What the page did, for people and for the browser test (tests/ui/).
  const state = {
    data: null, search: '', pages: {}, renders: 0, lastRenderMs: 0, firstRenderMs: null,
    fetchErrors: 0, focus: null, timings: {}, fetchMs: 0,
  };
  window.gaplessMap = state;

  const $ = (id) => document.getElementById(id);
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // A pod's colour follows its name, so it stays put while the pod table is renumbered.
  const colours = new Map();
  function colour(name) {
    let c = colours.get(name);
    if (c) return c;
    let h = 2166136261;
    for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
    c = `hsl(${(h >>> 0) % 360},62%,${48 + ((h >>> 9) % 14)}%)`;
    colours.set(name, c);
    return c;
  }

  function podName(i) { return state.data.pods[i] ? state.data.pods[i].name : '?'; }

  // Every pod index a GPU holds, whole, as a share or in a MIG slice.
  function holders(g) {
    const out = [];
    if (g.whole !== undefined) out.push(g.whole);
    for (const s of g.shares || []) out.push(s[0]);
    for (const m of g.mig || []) if (m.pod !== null && m.pod !== undefined) out.push(m.pod);
    return out;
  }

  // The first pod holding the GPU, or -1; no array made (called for every GPU of 5,000 nodes).
  function firstHolder(g) {
    if (g.whole !== undefined) return g.whole;
    if (g.shares && g.shares.length) return g.shares[0][0];
    if (g.mig) for (const m of g.mig) if (m.pod !== null && m.pod !== undefined) return m.pod;
    return -1;
  }

  function gpuState(node, g) {
    if (g.unhealthy) return 'unhealthy';
    if (g.whole !== undefined) return 'whole';
    if ((g.shares || []).length) return 'shared';
    if ((g.mig || []).some((m) => m.pod !== null)) return 'mig';
    if (node.fenced) return 'fenced';
    return 'free';
  }

  function ranges(list) {
    const out = [];
    for (let i = 0; i < list.length; i++) {
      let j = i;
      while (j + 1 < list.length && list[j + 1] === list[j] + 1) j++;
      out.push(i === j ? `${list[i]}` : `${list[i]}-${list[j]}`);
      i = j;
    }
    return `[${out.join(',')}]`;
  }

  // --- the cluster strip ----------------------------------------------------------------------
  function renderStrip() {
    const c = state.data.cluster;
    const parts = [['allocated', c.allocated], ['stranded', c.stranded], ['free', c.free],
      ['unhealthy', c.unhealthy], ['fenced', c.fencedIdle]];
    const strip = $('strip');
    strip.replaceChildren();
    for (const [cls, n] of parts) {
      if (!n) continue;
      const s = el('span', cls);
      s.style.width = `${(100 * n) / Math.max(1, c.gpus)}%`;
      s.title = `${n} ${cls}`;
      strip.append(s);
    }
    const legend = $('strip-legend');
    legend.replaceChildren();
    legend.append(`${c.gpus} GPUs on ${c.nodes} nodes: `);
    for (const [cls, n] of parts) {
      const b = el('b', null, String(n));
      b.dataset.count = cls;
      legend.append(b, ` ${cls}  `);
    }
  }

  // --- waiting pods, the drain target, explain -------------------------------------------------
  function renderPending() {
    const d = state.data;
    const list = $('pending');
    list.replaceChildren();
    const shown = d.pending.filter((p) => !state.search || p.pod.toLowerCase().includes(state.search));
    $('pending-count').textContent = `(${d.pending.length}${d.pendingMore ? '+' : ''})`;
    for (const p of shown) {
      const li = el('li', p.drain ? 'drain' : null);
      li.dataset.uid = p.uid;
      li.append(el('span', 'pod', p.pod), el('span', 'ask', `${p.ask} · seen ${p.seenSecondsAgo}s ago`));
      li.addEventListener('click', () => openExplain(p.uid, p.pod));
      list.append(li);
    }
    if (!d.pending.length) list.append(el('li', 'none', 'none'));
    const drain = $('drain');
    if (d.drain) {
      const holder = d.pending.find((p) => p.uid === d.drain.uid);
      drain.textContent = `Drain target: ${d.drain.node} (for ${holder ? holder.pod : d.drain.uid})`;
    } else {
      drain.textContent = d.waiting ? `${d.waiting} large pod(s) waiting, no drain target` : '';
    }
  }

  async function openExplain(uid, pod) {
    const box = $('explain');
    box.hidden = false;
    box.dataset.loaded = '';
    $('explain-title').textContent = `Explain ${pod}`;
    const body = $('explain-body');
    body.replaceChildren(el('p', null, 'asking the extender…'));
    try {
      const res = await fetch(`explain/${encodeURIComponent(uid)}`, { cache: 'no-store' });
      renderExplanation(await res.json());
    } catch (e) {
      body.replaceChildren(el('p', 'error', `cannot explain: ${e}`));
    }
    box.dataset.loaded = uid;
  }

  function renderExplanation(x) {
    const body = $('explain-body');
    body.replaceChildren();
    if (x.Error) {
      body.append(el('p', 'error', x.Error));
      return;
    }
    const nodes = x.Nodes || [];
    const passed = nodes.filter((n) => n.Verdict === 'passed').sort((a, b) => b.RawScore - a.RawScore);
    body.append(el('p', null, `profile ${x.Profile}: ${passed.length} of ${nodes.length} nodes pass`));
    if (passed.length) {
      const t = el('table');
      t.append(row('th', ['node', 'score', 'raw', 'would get']));
      for (const n of passed.slice(0, 25)) {
        const gpus = ((n.Placement || {}).Gpus || []).map((g) => g.Index).join(',');
        const mig = ((n.Placement || {}).Mig || []).map((m) => `${m.Gpu}:${m.Profile}@${m.Start}`);
        t.append(row('td', [n.Node, n.Score, Number(n.RawScore).toFixed(3), gpus || mig.join(' ')]));
      }
      body.append(t);
    }
    const reasons = new Map();
    for (const n of nodes) {
      if (n.Verdict === 'passed') continue;
      const key = `${n.Verdict}: ${n.Reason}`;
      if (!reasons.has(key)) reasons.set(key, []);
      reasons.get(key).push(n.Node);
    }
    if (reasons.size) {
      const t = el('table', 'reasons');
      t.append(row('th', ['nodes', 'why not']));
      const sorted = [...reasons.entries()].sort((a, b) => b[1].length - a[1].length);
      for (const [why, names] of sorted) {
        const some = names.slice(0, 4).join(', ') + (names.length > 4 ? ', …' : '');
        t.append(row('td', [`${names.length}: ${some}`, why]));
      }
      body.append(t);
    }
  }

  function row(cell, values) {
    const tr = el('tr');
    for (const v of values) tr.append(el(cell, null, String(v)));
    return tr;
  }

  // --- nodes ------------------------------------------------------------------------------------
  function matchingPods() {
    if (!state.search) return null;
    const set = new Set();
    state.data.pods.forEach((p, i) => { if (p.name.toLowerCase().includes(state.search)) set.add(i); });
    return set;
  }

  function nodeMatches(node, pods) {
    if (!pods) return true;
    if (node.name.toLowerCase().includes(state.search)) return true;
    return node.gpus.some((g) => holders(g).some((h) => pods.has(h)));
  }

  function gpuCell(node, g, i, island, pods) {
    const st = gpuState(node, g);
    const cell = el('div', `gpu ${st}`);
    const held = holders(g).map(podName);
    cell.dataset.gpu = i;
    cell.dataset.holders = held.join(',');
    let title = `GPU ${i} · ${g.model || node.model} · ${g.mem} MiB`;
    if (g.whole !== undefined) {
      const f = el('div', 'fill');
      f.style.background = colour(podName(g.whole));
      cell.append(f);
      title += `\nwhole: ${podName(g.whole)}`;
    }
    let left = 0;
    let cleft = 0;
    for (const [pod, mem, milli, units] of g.shares || []) {
      const frac = units && g.gpushare ? units / g.gpushare.capacity : mem && g.mem ? mem / g.mem : milli / 1000;
      const seg = el('div', 'seg');
      Object.assign(seg.style, { left: `${left * 100}%`, width: `${frac * 100}%`, background: colour(podName(pod)) });
      left += frac;
      cell.append(seg);
      const bar = el('div', 'cbar');
      Object.assign(bar.style, { left: `${cleft * 100}%`, width: `${(milli / 1000) * 100}%`, background: colour(podName(pod)) });
      cleft += milli / 1000;
      cell.append(bar);
      title += `\nshare: ${podName(pod)} ${units ? `${units} units` : `${mem} MiB, ${milli}m`}`;
    }
    for (const m of g.mig || []) {
      const s = el('div', m.pod === null ? 'slice empty' : 'slice');
      Object.assign(s.style, { left: `${(m.start / 8) * 100}%`, width: `${(m.width / 8) * 100}%` });
      if (m.pod !== null) s.style.background = colour(podName(m.pod));
      cell.append(s);
      title += `\nMIG ${m.profile}@${m.start}: ${m.pod === null ? 'free' : podName(m.pod)}`;
    }
    if (g.unhealthy) title += '\nUNHEALTHY';
    if (g.overuse && g.overuse.length) {
      cell.classList.add('overuse');
      for (const o of g.overuse) title += `\nOVER-USE: ${o.pod} uses ${o.usedMiB} of ${o.limitMiB} MiB`;
    }
    if (island >= 0) {
      cell.style.borderBottomColor = PALETTE_ISLANDS[island % PALETTE_ISLANDS.length];
      title += `\nNVLink island ${island + 1}`;
    }
    if (pods && holders(g).some((h) => pods.has(h))) cell.classList.add('match');
    cell.title = title;
    cell.append(el('span', 'idx', String(i)));
    return cell;
  }

  function nodeCard(node, pods) {
    const d = state.data;
    const card = el('div', 'node');
    card.dataset.node = node.name;
    const head = el('div', 'node-head');
    head.append(el('span', 'node-name', node.name), el('span', 'badge', `${node.gpus.length} GPU`));
    if (node.fenced) {
      card.classList.add('fenced');
      head.append(el('span', 'badge fence', `fenced: ${node.fenced}`));
    }
    if (d.drain && d.drain.node === node.name) {
      card.classList.add('drain-target');
      head.append(el('span', 'badge drain', 'drain target'));
    }
    const islandOf = new Map();
    (node.islands || []).forEach((isl, k) => isl.forEach((g) => islandOf.set(g, k)));
    const gpus = el('div', 'gpus');
    node.gpus.forEach((g, i) => gpus.append(gpuCell(node, g, i, islandOf.has(i) ? islandOf.get(i) : -1, pods)));
    card.append(head, gpus);
    // Who holds what, in words: the pods with their GPUs, a few per node.
    const byPod = new Map();
    node.gpus.forEach((g, i) => holders(g).forEach((h) => {
      if (!byPod.has(h)) byPod.set(h, []);
      if (!byPod.get(h).includes(i)) byPod.get(h).push(i);
    }));
    if (byPod.size) {
      const who = el('div', 'node-pods');
      [...byPod.entries()].slice(0, 4).forEach(([h, gpus]) => {
        const line = el('div', 'node-pod');
        const dot = el('span', 'dot');
        dot.style.background = colour(podName(h));
        line.append(dot, `${podName(h)} ${ranges(gpus)}`);
        who.append(line);
      });
      if (byPod.size > 4) who.append(el('div', 'node-pod', `+${byPod.size - 4} more`));
      card.append(who);
    }
    const foot = [];
    if ((node.islands || []).length) foot.push(`NVLink ${node.islands.map(ranges).join(' ')}`);
    for (const [profile, p] of Object.entries(node.migPool || {})) foot.push(`${profile} ${p.used}/${p.total}`);
    if (foot.length) card.append(el('div', 'node-foot', foot.join(' · ')));
    if (state.focus === node.name) card.scrollIntoView({ block: 'nearest' });
    return card;
  }

  function overviewColour(node, g, pods) {
    const first = firstHolder(g);
    if (pods && !holders(g).some((h) => pods.has(h))) return first < 0 ? '#1c242d' : '#303a46';
    if (g.unhealthy) return '#e5484d';
    if (first >= 0) return colour(podName(first));
    return node.fenced ? '#6b5b2e' : '#2f3b48';
  }

  // One block per node, one 2x6 px cell per GPU; clicking a block opens its page.
  function overview(key, nodes, pods) {
    const cell = 3;
    const maxGpus = nodes.reduce((m, n) => Math.max(m, n.gpus.length), 1);
    const blockW = maxGpus * cell + 2;
    const width = Math.max(300, Math.min(1400, state.width - 20));
    const perRow = Math.max(1, Math.floor(width / blockW));
    const canvas = el('canvas', 'overview');
    canvas.width = perRow * blockW;
    canvas.height = Math.ceil(nodes.length / perRow) * 8;
    const ctx = canvas.getContext('2d');
    nodes.forEach((node, k) => {
      const x = (k % perRow) * blockW;
      const y = Math.floor(k / perRow) * 8;
      if (state.data.drain && state.data.drain.node === node.name) {
        ctx.fillStyle = '#f5a524';
        ctx.fillRect(x, y, blockW - 1, 8);
      }
      node.gpus.forEach((g, i) => {
        ctx.fillStyle = overviewColour(node, g, pods);
        ctx.fillRect(x + i * cell + 1, y + 1, cell - 1, 6);
      });
    });
    const at = (ev) => {
      const r = canvas.getBoundingClientRect();
      const k = Math.floor((ev.clientY - r.top) / 8) * perRow + Math.floor((ev.clientX - r.left) / blockW);
      return k >= 0 && k < nodes.length ? k : -1;
    };
    canvas.addEventListener('mousemove', (ev) => { const k = at(ev); canvas.title = k < 0 ? '' : nodes[k].name; });
    canvas.addEventListener('click', (ev) => {
      const k = at(ev);
      if (k < 0) return;
      state.pages[key] = Math.floor(k / PAGE_SIZE);
      state.focus = nodes[k].name;
      render();
    });
    return canvas;
  }

  function pager(key, total) {
    const pages = Math.ceil(total / PAGE_SIZE);
    const page = Math.min(state.pages[key] || 0, pages - 1);
    state.pages[key] = page;
    const div = el('div', 'pager');
    const go = (p) => { state.pages[key] = Math.max(0, Math.min(pages - 1, p)); state.focus = null; render(); };
    const prev = el('button', null, '‹ prev');
    prev.onclick = () => go(page - 1);
    const next = el('button', null, 'next ›');
    next.onclick = () => go(page + 1);
    div.append(prev, ` page ${page + 1} of ${pages} (nodes ${page * PAGE_SIZE + 1}-${Math.min(total, (page + 1) * PAGE_SIZE)} of ${total}) `, next);
    return div;
  }

  function renderGroups() {
    const pods = matchingPods();
    state.width = $('groups').clientWidth || 1000;  // read once: reading it forces a layout
    const groups = new Map();
    for (const node of state.data.nodes) {
      const key = node.model || '(no GPUs)';
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(node);
    }
    const out = document.createDocumentFragment();
    for (const [key, all] of [...groups.entries()].sort()) {
      const nodes = all.filter((n) => nodeMatches(n, pods));
      if (!nodes.length) continue;
      const section = el('div', 'group');
      section.dataset.group = key;
      const head = el('div', 'group-head');
      let gpus = 0;
      let busy = 0;
      for (const n of all) for (const g of n.gpus) { gpus++; if (firstHolder(g) >= 0) busy++; }
      head.append(el('h3', null, key), el('span', 'counts', `${all.length} node${all.length === 1 ? '' : 's'} · ${busy}/${gpus} GPUs held${pods ? ` · ${nodes.length} match` : ''}`));
      section.append(head);
      const t0 = performance.now();
      if (nodes.length > PAGE_SIZE) section.append(overview(key, nodes, pods), pager(key, nodes.length));
      const t1 = performance.now();
      const page = state.pages[key] || 0;
      const grid = el('div', 'nodes');
      for (const node of nodes.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE)) grid.append(nodeCard(node, pods));
      state.timings.overview += t1 - t0;
      state.timings.cards += performance.now() - t1;
      section.append(grid);
      out.append(section);
    }
    $('groups').replaceChildren(out);
  }

  function render() {
    if (!state.data) return;
    const t0 = performance.now();
    state.timings = { overview: 0, cards: 0, groups: 0 };
    renderStrip();
    renderPending();
    const tg = performance.now();
    renderGroups();
    const t1 = performance.now();
    state.timings.groups = t1 - tg;
    state.lastRenderMs = t1 - t0;
    if (state.firstRenderMs === null) state.firstRenderMs = t1;  // since navigation start
    state.renders++;
    document.body.dataset.renders = state.renders;
  }

  async function poll() {
    const status = $('status');
    try {
      const f0 = performance.now();
      const res = await fetch('map.json', { cache: 'no-store' });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      state.data = await res.json();
      state.fetchMs = performance.now() - f0;
      render();
      status.className = 'status';
      status.textContent = `live · ${new Date().toLocaleTimeString()} · drawn in ${state.lastRenderMs.toFixed(0)} ms`;
    } catch (e) {
      state.fetchErrors++;
      status.className = 'status error';
      status.textContent = `cannot read map.json: ${e.message}; retrying`;
    }
    setTimeout(poll, interval);
  }

  $('search').addEventListener('input', (ev) => {
    state.search = ev.target.value.trim().toLowerCase();
    state.pages = {};
    render();
  });
  $('explain-close').addEventListener('click', () => { $('explain').hidden = true; });
  poll();
})();
