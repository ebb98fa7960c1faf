// flopscope's HTML report (report.html): draws the report JSON embedded in #report-data — the
// very document `flopscope report --format json` writes — and nothing else. Every figure shown
// is a figure of that JSON, formatted; each chart element keeps the raw value in a data-value
// attribute so tests/integration/test_html_report.py can compare it with the JSON.
// Hand-written SVG, no library: docs/architecture.md ("The HTML report") says why.
'use strict';

const SVG_NS = 'http://www.w3.org/2000/svg';
const ICICLE_WIDTH = 1200;
const ICICLE_ROW = 24;
const RANK_COLOURS = ['#2b6cb0', '#c05621', '#2f855a', '#9b2c2c', '#6b46c1', '#b7791f', '#319795',
                      '#d53f8c', '#4a5568', '#744210'];
const renderErrors = [];

window.addEventListener('error', (event) => renderErrors.push(String(event.message)));

// ---- formatting (DeepSpeed's units: 2 decimals, trailing zeros dropped) ----

function trimmed(value) {
  return String(Number(value.toFixed(2)));
}

function si(value, unit) {
  if (value === null || value === undefined) return '-';
  const steps = [[1e15, 'P'], [1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'K']];
  for (const [scale, prefix] of steps) {
    if (Math.abs(value) >= scale) return trimmed(value / scale) + ' ' + prefix + unit;
  }
  return trimmed(value) + (unit ? ' ' + unit : '');
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return '-';
  if (Math.abs(seconds) >= 1) return trimmed(seconds) + ' s';
  if (Math.abs(seconds) >= 1e-3) return trimmed(seconds * 1e3) + ' ms';
  return trimmed(seconds * 1e6) + ' us';
}

function percent(fraction) {
  return fraction === null || fraction === undefined ? '-' : trimmed(fraction * 100) + ' %';
}

// How a summary figure or a module column is shown, by its JSON key.
function formatByKey(key, value) {
  if (value === null || value === undefined) return '-';
  if (key === 'mfu') return percent(value);
  if (key.endsWith('_per_s') && key.includes('flops')) return si(value, 'FLOPS');
  if (key === 'samples_per_s') return trimmed(value);
  if (key.endsWith('_s')) return duration(value);
  if (key.includes('macs')) return si(value, 'MACs');
  if (key.includes('flops')) return si(value, 'FLOPs');
  return si(value, '');
}

// ---- DOM helpers ----

function byId(id) {
  return document.getElementById(id);
}

function svgElement(name, attributes, parent) {
  const element = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  if (parent) parent.appendChild(element);
  return element;
}

function htmlElement(name, text, parent) {
  const element = document.createElement(name);
  if (text !== undefined && text !== null) element.textContent = text;
  if (parent) parent.appendChild(element);
  return element;
}

function rawValue(value) {
  return value === null || value === undefined ? '' : String(value);
}

const tooltip = {
  show(text, event) {
    const box = byId('tooltip');
    box.textContent = text;
    box.hidden = false;
    this.move(event);
  },
  move(event) {
    const box = byId('tooltip');
    const x = Math.min(event.clientX + 14, window.innerWidth - box.offsetWidth - 8);
    box.style.left = Math.max(0, x) + 'px';
    box.style.top = (event.clientY + 14) + 'px';
  },
  hide() {
    byId('tooltip').hidden = true;
  },
};

function withTooltip(element, text) {
  element.addEventListener('mouseenter', (event) => tooltip.show(text(), event));
  element.addEventListener('mousemove', (event) => tooltip.move(event));
  element.addEventListener('mouseleave', () => tooltip.hide());
}

// ---- the report ----

function readReport() {
  return JSON.parse(byId('report-data').textContent);
}

// The modules the icicle and the heatmap draw: the model's tree (profile.model_modules), or
// every module when the report has no model root.
function modelModules(profile) {
  const count = profile.model_modules > 0 ? profile.model_modules : profile.modules.length;
  return profile.modules.slice(0, count);
}

function lastSegment(path) {
  const parts = path.split('/');
  return parts[parts.length - 1];
}

function renderHeader(report) {
  const profile = report.profile;
  byId('job').textContent = report.job;
  const facts = [profile.scope, profile.steps_note, profile.latency_basis,
                 'device: ' + (profile.device || 'none recorded'), 'FLOPs: ' + profile.flops_source];
  byId('facts').textContent = facts.filter((fact) => fact).join(' \u00b7 ');
  const warnings = [profile.partial, profile.merged_sessions, profile.no_gpu_why];
  for (const warning of warnings) {
    if (warning) htmlElement('li', warning, byId('warnings'));
  }
}

// ---- icicle: hand-written partition layout ----

// The model tree from the depth-first module list (each row's depth says its parent).
function buildTree(modules) {
  const root = {index: -1, depth: -1, children: []};
  const stack = [root];
  modules.forEach((module, index) => {
    while (stack.length > module.depth + 1) stack.pop();
    const node = {index, module, depth: stack.length - 1, parent: stack[stack.length - 1],
                  children: []};
    node.parent.children.push(node);
    stack.push(node);
  });
  return root;
}

// A node's width: its own figure, or its children's sum when that is larger (a parent's time
// includes its children's, and what it spends outside them is the gap after them).
function sizeTree(node, own) {
  let children = 0;
  for (const child of node.children) children += sizeTree(child, own);
  const mine = node.index < 0 ? 0 : own(node.module);
  node.value = Math.max(mine > 0 ? mine : 0, children);
  return node.value;
}

function placeTree(node, x0, x1) {
  node.x0 = x0;
  node.x1 = x1;
  let cursor = x0;
  const scale = node.value > 0 ? (x1 - x0) / node.value : 0;
  for (const child of node.children) {
    const width = child.value * scale;
    placeTree(child, cursor, cursor + width);
    cursor += width;
  }
}

function eachNode(node, visit) {
  if (node.index >= 0) visit(node);
  for (const child of node.children) eachNode(child, visit);
}

function isWithin(node, ancestor) {
  for (let at = node; at; at = at.parent) {
    if (at === ancestor) return true;
  }
  return false;
}

// Log-scaled ramp from pale yellow (lowest) to deep red (highest); null: no colour.
function colourScale(values) {
  const present = values.filter((value) => value !== null && value > 0);
  if (present.length === 0) return {colour: () => null, low: null, high: null};
  const low = Math.min(...present);
  const high = Math.max(...present);
  const span = Math.log(high) - Math.log(low);
  const colour = (value) => {
    if (value === null || !(value > 0)) return null;
    const t = span > 0 ? (Math.log(value) - Math.log(low)) / span : 1;
    return 'hsl(' + (52 - 52 * t).toFixed(1) + ', 85%, ' + (82 - 42 * t).toFixed(1) + '%)';
  };
  return {colour, low, high};
}

class Icicle {
  constructor(report) {
    this.report = report;
    this.profile = report.profile;
    this.modules = modelModules(this.profile);
    this.root = buildTree(this.modules);
    this.width = 'latency';
    this.colour = 'flops_per_s';
    this.focus = this.root;
  }

  widthOf(module) {
    return this.width === 'latency' ? module.latency_s : module.flops;
  }

  colourOf(module) {
    if (this.colour === 'flops_per_s') return module.flops_per_s;
    const peak = this.profile.peak_flops_per_s;
    return module.flops_per_s === null || !peak ? null : module.flops_per_s / peak;
  }

  draw() {
    sizeTree(this.root, (module) => this.widthOf(module) || 0);
    placeTree(this.root, 0, 1);
    const scale = colourScale(this.modules.map((module) => this.colourOf(module)));
    const svg = byId('icicle');
    svg.replaceChildren();
    let deepest = 0;
    eachNode(this.root, (node) => { deepest = Math.max(deepest, node.depth); });
    const height = (deepest + 1) * ICICLE_ROW;
    svg.setAttribute('viewBox', '0 0 ' + ICICLE_WIDTH + ' ' + height);
    const span = this.focus === this.root ? 1 : this.focus.x1 - this.focus.x0;
    const origin = this.focus === this.root ? 0 : this.focus.x0;
    eachNode(this.root, (node) => this.drawNode(svg, node, scale, origin, span));
    this.drawLegend(scale);
    this.drawNote();
  }

  drawNode(svg, node, scale, origin, span) {
    const module = node.module;
    let x0 = 0;
    let x1 = 0;
    if (isWithin(this.focus, node) && node !== this.focus) {
      x1 = ICICLE_WIDTH;  // an ancestor of the zoomed module spans the chart
    } else if (isWithin(node, this.focus) && span > 0) {
      x0 = (node.x0 - origin) / span * ICICLE_WIDTH;
      x1 = (node.x1 - origin) / span * ICICLE_WIDTH;
    }
    const colour = scale.colour(this.colourOf(module));
    const group = svgElement('g', {
      'class': 'icicle-box' + (colour ? '' : ' no-value'),
      'data-path': module.path,
      'data-index': node.index,
      'data-value': rawValue(this.widthOf(module)),
      'data-colour-value': rawValue(this.colourOf(module)),
    }, svg);
    const width = Math.max(0, x1 - x0);
    const rect = svgElement('rect', {x: x0, y: node.depth * ICICLE_ROW, width,
                                     height: ICICLE_ROW - 1}, group);
    if (colour) rect.setAttribute('fill', colour);
    const name = node.depth === 0 ? module.class : lastSegment(module.path);
    const fits = Math.floor((width - 6) / 6.4);
    if (fits >= 3) {
      const label = name.length <= fits ? name : name.slice(0, fits - 1) + '\u2026';
      svgElement('text', {x: x0 + 4, y: node.depth * ICICLE_ROW + 16}, group).textContent = label;
    }
    group.addEventListener('click', () => {
      this.focus = this.focus === node ? (node.parent || this.root) : node;
      this.draw();
    });
    withTooltip(group, () => this.hoverText(node));
  }

  hoverText(node) {
    const module = node.module;
    const row = (this.report.text_rows || [])[node.index] || module.path;
    return row + '\n' + module.path +
        '\nbwd latency ' + duration(module.bwd_latency_s) +
        ' \u00b7 FLOPs ' + si(module.flops, 'FLOPs') + ' (' + (module.flops_source || 'none') + ')' +
        ' \u00b7 ' + (module.flops_per_s === null ? 'FLOPS: ' + module.flops_per_s_note
                                                 : si(module.flops_per_s, 'FLOPS'));
  }

  drawLegend(scale) {
    const legend = byId('legend');
    legend.replaceChildren();
    const label = this.colour === 'mfu' ? 'MFU' : 'achieved FLOPS';
    if (scale.low === null) {
      const why = this.colour === 'mfu' && !this.profile.peak_flops_per_s
          ? 'the peak is unknown (pass --peak-tflops)' : 'no module has FLOPs per second';
      htmlElement('span', 'colour: ' + label + ': grey, ' + why, legend);
      return;
    }
    const format = (value) => (this.colour === 'mfu' ? percent(value) : si(value, 'FLOPS'));
    htmlElement('span', label + ' ' + format(scale.low), legend);
    const ramp = htmlElement('span', null, legend);
    ramp.className = 'ramp';
    ramp.style.background = 'linear-gradient(to right, ' + scale.colour(scale.low) + ', ' +
        scale.colour(Math.sqrt(scale.low * scale.high)) + ', ' + scale.colour(scale.high) + ')';
    htmlElement('span', format(scale.high) + ' (log scale; grey: none)', legend);
  }

  drawNote() {
    const what = this.width === 'latency' ? 'forward latency per step'
                                          : 'FLOPs per step (' + this.profile.flops_source + ')';
    let note = 'Width: ' + what + '; a parent is at least as wide as its children, the gap ' +
        'after them is its own time. Click a box to zoom, again to go up; hover for its row of ' +
        'the text report.';
    if (this.width === 'flops' && this.modules.every((module) => module.flops === null)) {
      note = 'No module has FLOPs in this report (' + (this.profile.no_gpu_why ||
          this.profile.flops_source) + '): every box is 0 wide. ' + note;
    }
    byId('tree-note').textContent = note;
  }

  bindControls() {
    for (const button of document.querySelectorAll('button[data-width]')) {
      button.addEventListener('click', () => {
        this.width = button.dataset.width;
        this.markOn('button[data-width]', button);
        this.draw();
      });
    }
    for (const button of document.querySelectorAll('button[data-colour]')) {
      button.addEventListener('click', () => {
        this.colour = button.dataset.colour;
        this.markOn('button[data-colour]', button);
        this.draw();
      });
    }
    byId('zoom-out').addEventListener('click', () => {
      this.focus = this.root;
      this.draw();
    });
  }

  markOn(selector, chosen) {
    for (const button of document.querySelectorAll(selector)) {
      button.classList.toggle('on', button === chosen);
    }
  }
}

// ---- sortable tables ----

// columns: [{label, key, value(row) -> number|string|null, text(row) -> string, cls}]
function fillTable(table, columns, rows, rowClass) {
  table.replaceChildren();
  const head = htmlElement('tr', null, htmlElement('thead', null, table));
  columns.forEach((column, index) => {
    const cell = htmlElement('th', column.label, head);
    cell.dataset.key = column.key;
    cell.addEventListener('click', () => sortTable(table, index, cell));
  });
  const body = htmlElement('tbody', null, table);
  rows.forEach((row, order) => {
    const line = htmlElement('tr', null, body);
    line.dataset.order = order;
    if (rowClass) line.className = rowClass(row);
    for (const column of columns) {
      const cell = htmlElement('td', column.text(row), line);
      cell.title = cell.textContent;
      cell.dataset.key = column.key;
      cell.dataset.value = rawValue(column.value(row));
      if (column.cls) cell.className = column.cls;
    }
  });
}

function sortTable(table, index, header) {
  const ascending = header.getAttribute('aria-sort') !== 'ascending';
  for (const cell of table.querySelectorAll('th')) cell.removeAttribute('aria-sort');
  header.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const key = (row) => {
    const raw = row.cells[index].dataset.value;
    if (index === 0) return Number(row.dataset.order);  // the first column: report order
    if (raw === '') return null;
    const number = Number(raw);
    return Number.isNaN(number) ? raw : number;
  };
  rows.sort((a, b) => {
    const x = key(a);
    const y = key(b);
    if (x === y) return Number(a.dataset.order) - Number(b.dataset.order);
    if (x === null) return 1;  // unknown last either way
    if (y === null) return -1;
    const order = x < y ? -1 : 1;
    return ascending ? order : -order;
  });
  for (const row of rows) body.appendChild(row);
}

function renderSummary(profile) {
  const rows = Object.entries(profile.summary).map(([key, figure]) => ({key, figure}));
  fillTable(byId('summary'), [
    {label: 'figure', key: 'name', value: (row) => row.key, text: (row) => row.key.replace(/_per_s$/, ' per second').replace(/_s$/, '').replace(/_/g, ' ')},
    {label: 'value', key: 'value', value: (row) => row.figure.value,
     text: (row) => formatByKey(row.key, row.figure.value)},
    {label: 'note', key: 'note', value: (row) => row.figure.note, text: (row) => row.figure.note,
     cls: 'text'},
  ], rows);
}

// What a row of the tree is: a module that ran, a container whose figures are its children's
// sum, or one that never ran (documents before these keys: every row ran).
function moduleKind(module) {
  if (module.ran !== false) return 'ran';
  return module.figures_from_children ? 'container' : 'never ran';
}

function renderModules(profile) {
  const model = modelModules(profile).length;
  const rows = profile.modules.map((module, index) => ({module, index}));
  const column = (label, key, format) => ({
    label, key, value: (row) => row.module[key], text: (row) => format(row.module[key]),
  });
  // A module with no latency at all says so, never "0 us" beside "never ran".
  const latency = (label, key) => ({
    label, key, value: (row) => row.module[key],
    text: (row) => (moduleKind(row.module) === 'never ran' ? '-' : duration(row.module[key])),
  });
  fillTable(byId('modules'), [
    {label: 'module', key: 'path', value: (row) => row.module.path,
     text: (row) => '\u2003'.repeat(row.module.depth) + lastSegment(row.module.path)},
    {label: 'class', key: 'class', value: (row) => row.module.class,
     text: (row) => row.module.class, cls: 'text'},
    {label: 'ran', key: 'ran', value: (row) => moduleKind(row.module),
     text: (row) => row.module.note || moduleKind(row.module),
     cls: 'text'},
    column('params', 'params', (value) => si(value, '')),
    column('MACs', 'macs', (value) => si(value, 'MACs')),
    latency('fwd latency', 'latency_s'),
    latency('bwd latency', 'bwd_latency_s'),
    column('FLOPs', 'flops', (value) => si(value, 'FLOPs')),
    {label: 'source', key: 'flops_source', value: (row) => row.module.flops_source,
     text: (row) => row.module.flops_source || '-', cls: 'text'},
    column('achieved FLOPS', 'flops_per_s', (value) => si(value, 'FLOPS')),
    column('estimated FLOPs', 'estimated_flops', (value) => si(value, 'FLOPs')),
  ], rows, (row) => [row.index >= model ? 'outside' : '',
                     moduleKind(row.module) === 'never ran' ? 'never-ran' : '']
      .filter((name) => name).join(' '));
}

// ---- ranks x modules heatmap ----

function heatColour(excess, limit) {
  if (excess === null) return '#c9ced4';
  const t = Math.max(-1, Math.min(1, excess / limit));
  if (t >= 0) return 'hsl(8, 80%, ' + (96 - 46 * t).toFixed(1) + '%)';
  return 'hsl(212, 60%, ' + (96 + 36 * t).toFixed(1) + '%)';
}

function renderHeatmap(report) {
  const perRank = report.per_rank;
  const svg = byId('heatmap');
  svg.replaceChildren();
  if (!perRank || perRank.ranks.length === 0) {
    byId('heatmap-note').textContent = 'No per-rank figures in this report.';
    return;
  }
  const count = modelModules(report.profile).length;
  const modules = perRank.modules.slice(0, count);
  const ranks = perRank.ranks;
  const left = 70;
  const top = 130;
  const cell = Math.max(6, Math.min(44, Math.floor((ICICLE_WIDTH - left) / Math.max(1, modules.length))));
  const row = 20;
  const width = Math.max(ICICLE_WIDTH, left + modules.length * cell);  // wide jobs scroll
  svg.setAttribute('viewBox', '0 0 ' + width + ' ' + (top + ranks.length * row + 4));
  svg.style.width = width > ICICLE_WIDTH ? width + 'px' : '';
  let limit = 0.05;
  for (const module of modules) {
    for (const latency of module.latency_s) {
      if (latency !== null && module.median_s > 0) {
        limit = Math.max(limit, Math.abs(latency / module.median_s - 1));
      }
    }
  }
  ranks.forEach((rank, r) => {
    const label = svgElement('text', {x: left - 6, y: top + r * row + 14, 'text-anchor': 'end'}, svg);
    label.textContent = 'rank ' + rank.rank;
  });
  modules.forEach((module, m) => {
    const x = left + m * cell;
    if (cell >= 10) {  // narrower columns have no room for a name: hover a cell for it
      const name = svgElement('text', {
        x: x + cell / 2, y: top - 6, transform: 'rotate(-60 ' + (x + cell / 2) + ' ' + (top - 6) + ')',
      }, svg);
      name.textContent = lastSegment(module.path);
    }
    ranks.forEach((rank, r) => drawHeatCell(svg, module, rank, r, {x, y: top + r * row, cell, row, limit}));
  });
  byId('heatmap-note').textContent =
      'Each cell: a rank\u2019s own forward latency per step of a module (its own report over the ' +
      'same steps), coloured by how far it is from the module\u2019s median across ranks (blue ' +
      'faster, red slower, \u00b1' + percent(limit) + ' full colour); \u25b2 marks the slowest ' +
      'rank of each module. Ranks whose report could not be read: ' +
      (ranks.filter((rank) => rank.problem).map((rank) => rank.rank + ' (' + rank.problem + ')')
          .join(', ') || 'none') + '.';
}

function drawHeatCell(svg, module, rank, r, at) {
  const latency = module.latency_s[r];
  const excess = latency === null || !(module.median_s > 0) ? null : latency / module.median_s - 1;
  const rect = svgElement('rect', {
    'class': 'heat-cell', x: at.x, y: at.y, width: at.cell, height: at.row,
    fill: heatColour(excess, at.limit), 'data-rank': rank.rank, 'data-path': module.path,
    'data-value': rawValue(latency),
  }, svg);
  withTooltip(rect, () => 'rank ' + rank.rank + ' \u00b7 ' + module.path + '\nfwd latency ' +
      duration(latency) + ' (median across ranks ' + duration(module.median_s) + ', spread ' +
      duration(module.spread_s) + ', slowest rank ' + module.slowest_rank + ')');
  if (module.slowest_rank === rank.rank && module.spread_s > 0) {
    const cx = at.x + at.cell / 2;
    const cy = at.y + at.row / 2;
    svgElement('path', {
      'class': 'slowest-mark', 'data-path': module.path, 'data-rank': rank.rank,
      d: 'M' + (cx - 4) + ' ' + (cy + 3) + 'L' + (cx + 4) + ' ' + (cy + 3) + 'L' + cx + ' ' + (cy - 4) + 'Z',
    }, svg);
  }
}

// ---- step time per rank ----

function niceTicks(high, count) {
  const raw = high / count;
  const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((f) => f * magnitude).find((s) => s >= raw);
  const ticks = [0];
  while (ticks[ticks.length - 1] < high) ticks.push(ticks.length * step);
  return ticks;
}

function renderSteps(report) {
  const svg = byId('steps');
  svg.replaceChildren();
  const series = (report.per_rank && report.per_rank.step_time_s) || [];
  const points = series.flatMap((line) => line.s);
  if (points.length === 0) {
    byId('steps-note').textContent = 'No step times: the job marks no `step` ranges in the ' +
        'steps this report covers.';
    return;
  }
  const size = {width: ICICLE_WIDTH, height: 300, left: 70, right: 90, top: 10, bottom: 30};
  svg.setAttribute('viewBox', '0 0 ' + size.width + ' ' + size.height);
  const steps = series.flatMap((line) => line.steps);
  const first = Math.min(...steps);
  const last = Math.max(...steps);
  const ticks = niceTicks(Math.max(...points), 4);
  const high = ticks[ticks.length - 1];
  const x = (step) => size.left + (last > first ? (step - first) / (last - first) : 0.5) *
      (size.width - size.left - size.right);
  const y = (seconds) => size.top + (1 - seconds / high) * (size.height - size.top - size.bottom);
  const axis = svgElement('g', {'class': 'axis'}, svg);
  for (const tick of ticks) {
    svgElement('line', {x1: size.left, x2: size.width - size.right, y1: y(tick), y2: y(tick)}, axis);
    svgElement('text', {x: size.left - 6, y: y(tick) + 4, 'text-anchor': 'end'}, axis)
        .textContent = duration(tick);
  }
  for (const step of [first, last]) {
    svgElement('text', {x: x(step), y: size.height - 10, 'text-anchor': 'middle'}, axis)
        .textContent = 'step ' + step;
  }
  series.forEach((line, index) => drawStepLine(svg, line, index, x, y));
  byId('steps-note').textContent = 'Each line: one rank\u2019s `step` range per step (counted ' +
      'steps left out). A straggler is the line above the others.' +
      (report.per_rank.step_time_truncated ? ' Truncated: the daemon sends at most 100000 steps.' : '');
}

function drawStepLine(svg, line, index, x, y) {
  const colour = RANK_COLOURS[index % RANK_COLOURS.length];
  const path = line.steps.map((step, i) => (i ? 'L' : 'M') + x(step) + ' ' + y(line.s[i])).join('');
  svgElement('path', {'class': 'step-line', d: path, stroke: colour, 'data-rank': line.rank}, svg);
  line.steps.forEach((step, i) => {
    const dot = svgElement('circle', {
      cx: x(step), cy: y(line.s[i]), r: 3, fill: colour, 'class': 'step-point',
      'data-rank': line.rank, 'data-step': step, 'data-value': line.s[i],
    }, svg);
    withTooltip(dot, () => 'rank ' + line.rank + ', step ' + step + ': ' + duration(line.s[i]));
  });
  const end = line.steps.length - 1;
  svgElement('text', {x: x(line.steps[end]) + 8, y: y(line.s[end]) + 4, fill: colour}, svg)
      .textContent = 'rank ' + line.rank;
}

// ---- measured against estimated FLOPs ----

function renderFlopsComparison(profile) {
  const rows = profile.modules
      .map((module, index) => ({module, index}))
      .filter((row) => row.module.flops !== null && row.module.estimated_flops !== null &&
                       (row.module.flops_source === 'measured' || row.module.flops_source === 'announced'));
  byId('flops-note').textContent = rows.length === 0
      ? 'No module has both measured (or announced) and estimated FLOPs in this report: FLOPs ' +
        'here are ' + profile.flops_source + '.'
      : 'Modules with both figures, per step and GPU; ratio = measured / estimated.';
  if (rows.length === 0) {
    byId('flops-compare').replaceChildren();
    return;
  }
  fillTable(byId('flops-compare'), [
    {label: 'module', key: 'path', value: (row) => row.module.path, text: (row) => row.module.path},
    {label: 'measured', key: 'flops', value: (row) => row.module.flops,
     text: (row) => si(row.module.flops, 'FLOPs') + ' (' + row.module.flops_source + ')'},
    {label: 'estimated', key: 'estimated_flops', value: (row) => row.module.estimated_flops,
     text: (row) => si(row.module.estimated_flops, 'FLOPs')},
    {label: 'ratio', key: 'ratio', value: (row) => row.module.flops / row.module.estimated_flops,
     text: (row) => trimmed(row.module.flops / row.module.estimated_flops)},
  ], rows);
}

// ---- memory ledger ----

function bytes(value) {
  if (value === null || value === undefined) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let magnitude = value;
  let unit = 0;
  while (unit + 1 < units.length && magnitude >= 999.5) {
    magnitude /= 1024;
    unit += 1;
  }
  return unit === 0 ? String(Math.round(value)) + ' B' : trimmed(magnitude) + ' ' + units[unit];
}

// Each rank's ledger (profile.memory): the parts its tensors held, the formula's total and the
// GPU peaks; a part above its formula is marked and said under the table.
function renderMemory(profile) {
  const ranks = profile.memory || [];
  const flags = byId('memory-flags');
  flags.replaceChildren();
  if (ranks.length === 0) {
    byId('memory-note').textContent = 'No rank announced a memory ledger (the torch hooks ' +
        'measure it at the end of an optimizer step).';
    byId('memory').replaceChildren();
    return;
  }
  const margin = Math.round(ranks[0].margin * 100);
  byId('memory-note').textContent = 'What each rank\'s tensors held at the end of an ' +
      'optimizer step, each storage once; expected: the usual formula for its setup ' +
      '(docs/design/memory-ledger.md); ! above it by more than ' + margin + '%. Peaks and the ' +
      'activations a forward left allocated: CUDA\'s allocator, - on the CPU.';
  const part = (name) => ({
    label: name, key: name,
    value: (row) => (row.parts[name] ? row.parts[name].held : null),
    text: (row) => (row.parts[name] ? bytes(row.parts[name].held) +
                    (row.parts[name].flagged ? ' !' : '') : '-'),
  });
  const figure = (label, key) => ({
    label, key, value: (row) => row[key], text: (row) => bytes(row[key]),
  });
  fillTable(byId('memory'), [
    {label: 'rank', key: 'rank', value: (row) => row.rank, text: (row) => String(row.rank)},
    {label: 'setup', key: 'setup', value: (row) => row.setup_name,
     text: (row) => row.setup_name + (row.dp > 1 ? ' dp=' + row.dp : ''), cls: 'text'},
    part('params'), part('grads'), part('optimizer'), part('buckets'),
    figure('held', 'held'), figure('expected', 'expected'),
    figure('peak allocated', 'peak_allocated'), figure('peak reserved', 'peak_reserved'),
    figure('activations', 'activations'),
  ], ranks, (row) => (row.flagged ? 'flagged' : ''));
  for (const rank of ranks) {
    for (const flag of rank.flags) htmlElement('li', 'rank ' + rank.rank + ' ' + flag, flags);
  }
  renderModuleActivations(ranks);
}

// Per module (GPU): what each module's forward left allocated, the most of any rank, with that
// rank and its step (profile.memory[].module_activations); on the CPU a line saying why none.
function renderModuleActivations(ranks) {
  const most = new Map();  // path -> {path, bytes, rank, step}
  for (const rank of ranks) {
    const measured = rank.module_activations;
    if (!measured) continue;
    for (const module of measured.top) {
      const kept = most.get(module.path);
      if (!kept || module.bytes > kept.bytes) {
        most.set(module.path, {path: module.path, bytes: module.bytes, rank: rank.rank,
                               step: measured.step});
      }
    }
  }
  const note = byId('memory-activations-note');
  const table = byId('memory-activations');
  table.replaceChildren();
  if (most.size === 0) {
    const gpu = ranks.some((rank) => rank.peak_allocated !== null);
    note.textContent = gpu ? '' : 'Per-module activation memory: measured on GPUs only (the ' +
        'CPU allocator keeps no statistics).';
    return;
  }
  note.textContent = 'Activations per module (GPU): memory_allocated() after its forward less ' +
      'before it, its children\'s included, summed over its calls in a measured step; the most ' +
      'of any rank.';
  const rows = Array.from(most.values()).sort((a, b) => b.bytes - a.bytes);
  fillTable(table, [
    {label: 'module', key: 'path', value: (row) => row.path, text: (row) => row.path,
     cls: 'text'},
    {label: 'forward left', key: 'bytes', value: (row) => row.bytes,
     text: (row) => (row.bytes < 0 ? '-' + bytes(-row.bytes) : bytes(row.bytes))},
    {label: 'rank', key: 'rank', value: (row) => row.rank, text: (row) => String(row.rank)},
    {label: 'step', key: 'step', value: (row) => row.step, text: (row) => String(row.step)},
  ], rows);
}

// ---- start ----

function reportStatus(report, icicle) {
  const status = byId('render-status');
  status.dataset.modules = String(icicle.modules.length);
  status.dataset.boxes = String(document.querySelectorAll('#icicle .icicle-box').length);
  status.dataset.errors = JSON.stringify(renderErrors);
  status.dataset.ok = String(renderErrors.length === 0);
  status.dataset.schemaVersion = String(report.schema_version);
}

function main() {
  const report = readReport();
  renderHeader(report);
  const icicle = new Icicle(report);
  icicle.bindControls();
  icicle.draw();
  renderSummary(report.profile);
  renderModules(report.profile);
  renderHeatmap(report);
  renderSteps(report);
  renderFlopsComparison(report.profile);
  renderMemory(report.profile);
  reportStatus(report, icicle);
}

try {
  main();
} catch (error) {
  renderErrors.push(String(error && error.stack || error));
  console.error('flopscope report: ' + (error && error.stack || error));
  const status = byId('render-status');
  status.dataset.ok = 'false';
  status.dataset.errors = JSON.stringify(renderErrors);
}
