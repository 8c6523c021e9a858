// pgbenchlab report: draws the charts, the run table and a run's detail from the embedded data.
// Every string from the data is put in the page with textContent, never as HTML.
(function () {
  "use strict";

  const R = JSON.parse(document.getElementById("report-data").textContent);
  performance.mark("pgbenchlab:data");
  const EMBED = {
    actions: { export: true, source: false, compiled: false, editor: false },
    renderer: "svg",
    loader: { target: "_self" },
  };
  const views = {};
  const cellsById = new Map(R.cells.map((c) => [c.id, c]));
  const runsById = new Map();
  const runRows = R.runs.rows.map((values) => {
    const row = {};
    R.runs.columns.forEach((c, i) => { row[c.key] = values[i]; });
    runsById.set(row.id, row);
    return row;
  });

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // Columns back to rows: a null column has no values, a number as the first column counts on
  // from it (the seconds of a run).
  function columns(table, names) {
    if (!table) return [];
    const n = Math.max(...table.map((c) => (Array.isArray(c) ? c.length : 0)));
    const rows = [];
    for (let i = 0; i < n; i++) {
      const row = {};
      names.forEach((name, j) => { row[name] = counted(table[j], i); });
      rows.push(row);
    }
    return rows;
  }

  function counted(column, i) {
    if (typeof column === "number") return column + i;
    return column ? column[i] : null;
  }

  function histRows(id) {
    const d = R.detail.runs[id];
    if (!d || !d.h) return [];
    const [indexes, counts] = d.h;
    return indexes.map((b, i) => ({ lower_ms: R.detail.bins[b][0], upper_ms: R.detail.bins[b][1], count: counts[i] }));
  }

  function distRows() {
    const rows = [];
    for (const run of runRows) {
      if (run.status !== "ok") continue;
      const hist = histRows(run.id);
      const cell = cellsById.get(run.cell);
      if (!hist.length || !cell) continue;
      const total = hist.reduce((sum, b) => sum + b.count, 0) || 1;
      const base = { run: run.id, repeat: run.repeat, clients: run.clients, link: "#run-" + run.id };
      for (const [k, v] of Object.entries(cell)) if (k.startsWith("s_") || k.startsWith("p_")) base[k] = v;
      let below = 0;
      for (const b of hist) {
        below += b.count;
        if (b.count > 0) rows.push(Object.assign({ upper_ms: b.upper_ms, cum: below / total }, base));
      }
    }
    return rows;
  }

  // Every ok run's seconds sorted by TPS, fastest first, each at the middle of its share of
  // the run's seconds (chart_data.sorted_rows builds the same for the images).
  function sortedRows() {
    const rows = [];
    for (const run of runRows) {
      if (run.status !== "ok") continue;
      const d = R.detail.runs[run.id];
      const cell = cellsById.get(run.cell);
      if (!d || !d.s || !cell) continue;
      const seconds = columns(d.s, ["t", "tps"]).sort((a, b) => b.tps - a.tps);
      const base = { run: run.id, repeat: run.repeat, clients: run.clients, link: "#run-" + run.id };
      for (const [k, v] of Object.entries(cell)) if (k.startsWith("s_") || k.startsWith("p_")) base[k] = v;
      seconds.forEach((s, rank) => {
        rows.push(Object.assign({ t: s.t, tps: s.tps, position: (rank + 0.5) / seconds.length }, base));
      });
    }
    return rows;
  }

  const datasets = {
    cells: R.cells, tps_points: R.cells.concat(R.usl || []), changes: R.changes, dist: [], sorted: [],
  };

  function embed(id, spec, data) {
    const target = document.getElementById(id);
    if (!target) return Promise.resolve();
    if (views[id]) { views[id].finalize(); delete views[id]; }
    target.removeAttribute("data-rendered");
    const full = Object.assign({}, spec, { datasets: data });
    return vegaEmbed(target, full, EMBED).then((result) => {
      views[id] = result;
      target.setAttribute("data-rendered", "1");
    }).catch((error) => {
      target.replaceChildren(el("p", { class: "missing" }, "This chart could not be drawn: " + error));
      console.error("chart " + id + ": " + error);
    });
  }

  function drawMain(axis) {
    const jobs = [];
    for (const chart of R.charts) {
      const spec = chart.specs[axis] || Object.values(chart.specs)[0];
      jobs.push(embed(chart.id, spec, datasets));
    }
    return Promise.all(jobs);
  }

  // -- the run table -------------------------------------------------------------------------

  const fmt = {
    int: (v) => v.toLocaleString("en-US", { maximumFractionDigits: 0 }),
    tps: (v) => v.toLocaleString("en-US", { maximumFractionDigits: 1 }),
    ms: (v) => v.toLocaleString("en-US", { minimumFractionDigits: 3, maximumFractionDigits: 3 }),
    pct: (v) => (v * 100).toFixed(2) + " %",
    num: (v) => v.toLocaleString("en-US", { maximumFractionDigits: 2 }),
    text: (v) => String(v),
  };
  // Rows drawn at first: drawing every row of a thousand-run campaign takes most of a second.
  const FIRST_ROWS = 200;
  const tableState = { key: "order", dir: 1, cell: null, query: "", limit: FIRST_ROWS };

  function cellText(col, v) {
    if (v === null || v === undefined || v === "") return "";
    return (fmt[col.fmt] || fmt.text)(v);
  }

  function drawTable() {
    const table = document.getElementById("run-table");
    const head = el("tr");
    for (const col of R.runs.columns) {
      if (col.hidden) continue;
      const th = el("th", { scope: "col", class: col.fmt === "text" ? "" : "num", title: col.help || col.title }, col.title);
      if (tableState.key === col.key) th.setAttribute("aria-sort", tableState.dir > 0 ? "ascending" : "descending");
      th.addEventListener("click", () => {
        tableState.dir = tableState.key === col.key ? -tableState.dir : 1;
        tableState.key = col.key;
        drawTable();
      });
      head.appendChild(th);
    }
    const body = el("tbody");
    const rows = visibleRows();
    for (const row of rows.slice(0, tableState.limit)) body.appendChild(tableRow(row));
    table.replaceChildren(el("thead"), body);
    table.firstChild.appendChild(head);
    const shown = document.getElementById("run-count");
    shown.textContent = rows.length + " of " + runRows.length + " runs" +
      (rows.length > tableState.limit ? " (the first " + tableState.limit + " shown)" : "");
    document.getElementById("show-all").hidden = rows.length <= tableState.limit;
    document.getElementById("cell-filter").hidden = !tableState.cell;
  }

  function visibleRows() {
    const q = tableState.query.toLowerCase();
    const rows = runRows.filter((r) => (!tableState.cell || r.cell === tableState.cell) &&
      (!q || R.runs.columns.some((c) => String(r[c.key] ?? "").toLowerCase().includes(q))));
    const k = tableState.key;
    return rows.sort((a, b) => {
      const x = a[k], y = b[k];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * tableState.dir;
    });
  }

  function tableRow(row) {
    const tr = el("tr", { class: row.status !== "ok" ? "not-ok" : (row.warnings ? "warned" : "") });
    for (const col of R.runs.columns) {
      if (col.hidden) continue;
      const td = el("td", { class: col.fmt === "text" ? "" : "num" });
      if (col.key === "id") {
        td.appendChild(el("a", { href: "#run-" + row.id }, row.id));
      } else {
        td.textContent = cellText(col, row[col.key]);
        if (col.key === "status") td.className = "status-" + row.status;
      }
      tr.appendChild(td);
    }
    return tr;
  }

  // -- one run's detail -----------------------------------------------------------------------

  function factsTable(pairs) {
    const table = el("table", { class: "facts" });
    for (const [k, v] of pairs) {
      if (v === null || v === undefined || v === "") continue;
      const tr = el("tr");
      tr.appendChild(el("th", { scope: "row" }, k));
      tr.appendChild(el("td", {}, v));
      table.appendChild(tr);
    }
    return table;
  }

  function shellWord(word) {
    return /^[A-Za-z0-9_\-.,:/=@%+]+$/.test(word) ? word : "'" + word.replace(/'/g, "'\\''") + "'";
  }

  function showRun(id) {
    const run = runsById.get(id);
    const box = document.getElementById("run-detail");
    if (!run) { box.hidden = true; return Promise.resolve(); }
    const d = R.detail.runs[id] || {};
    box.hidden = false;
    const label = run.server + " · scale " + run.scale + " · " + run.workload + " · " + run.clients +
      (run.clients === 1 ? " client" : " clients") + " · repeat " + run.repeat;
    const parts = [el("h2", {}, "Run " + id + ": " + label)];
    const metrics = R.runs.columns.filter((c) => !c.hidden).map((c) => [c.title, cellText(c, run[c.key])]);
    const grid = el("div", { class: "grid" });
    const left = el("div");
    left.append(el("h3", {}, "Settings and results"), factsTable(metrics.concat(d.facts || [])));
    const right = el("div");
    const advice = R.advice.filter((a) => a.run_ids.includes(id));
    right.appendChild(el("h3", {}, "Warnings"));
    if (d.err) right.appendChild(el("pre", { class: "status-failed" }, d.err));
    if (!advice.length && !d.err) right.appendChild(el("p", { class: "ok-note" }, "None."));
    const list = el("ul", { class: "advice" });
    for (const a of advice) {
      const li = el("li", { class: a.severity });
      li.append(el("span", { class: "what" }, a.message), el("span", { class: "todo" }, "What to do: " + a.remedy));
      list.appendChild(li);
    }
    right.appendChild(list);
    right.append(el("h3", {}, "Command line"), el("pre", {}, (d.argv || []).map(shellWord).join(" ") || "-"));
    right.append(el("h3", {}, "pgbench's own report"),
      el("pre", {}, d.out || "The raw pgbench output was not kept with these results."));
    grid.append(left, right);
    parts.push(grid);
    const seconds = d.s ? columns(d.s, ["t", "tps", "mean", "min", "max", "lag"]) : [];
    const hist = histRows(id);
    const events = (d.e || []).map(([t, kind, detail]) => ({ t, kind, detail }));
    const telemetry = telemetryRows(d.x, run);
    const timeline = Object.keys(telemetry).length > 0 && seconds.length > 0;
    const charts = [["run-tps", timeline ? "timeline" : "tps_over_time"],
      ["run-latency", "latency_over_time"], ["run-sorted", "sorted_tps"], ["run-hist", "histogram"],
      ["run-cdf", "cdf"]];
    const data = Object.assign({ run_seconds: seconds, run_hist: hist, run_events: events }, telemetry);
    const positive = (k) => seconds.some((s) => s[k] > 0);
    const present = new Set(Object.keys(telemetry).filter((k) => telemetry[k].length));
    if (events.length) present.add("events");
    if (positive("min") && positive("max")) present.add("band");
    if (positive("lag")) present.add("lag");
    const telNote = telemetryNote(d, run);
    if (telNote) parts.push(el("p", { class: "note" }, telNote));
    const chartGrid = el("div", { class: "charts2" });
    const drawn = [];
    const said = new Set();
    for (const [cid, name] of charts) {
      const fromLog = name === "histogram" || name === "cdf";
      if (!(fromLog ? hist : seconds).length) {
        const why = fromLog ? "No latency histogram: this run kept no per-transaction log."
          : "No per-second series stored for this run.";
        if (!said.has(why)) chartGrid.appendChild(el("p", { class: "missing" }, why));
        said.add(why);
        continue;
      }
      chartGrid.appendChild(el("div", { id: cid, class: name === "timeline" ? "chart wide" : "chart" }));
      const spec = withoutMissing(JSON.parse(JSON.stringify(R.runCharts[name])), present);
      spec.title.text = spec.title.text.replace("{run}", "run " + id);
      drawn.push([cid, spec]);
    }
    parts.push(chartGrid);
    box.replaceChildren(...parts);
    box.scrollIntoView();
    return Promise.all(drawn.map(([cid, spec]) => embed(cid, spec, data)));
  }

  // The run's telemetry series (see payload.encode_telemetry) as long rows {t, s, v} per dataset.
  function telemetryRows(x, run) {
    const found = {};
    if (!x) return found;
    const [first, encoded] = x;
    const tel = R.detail.telemetry;
    for (const [index, scale, ...values] of encoded) {
      const [dataset, label] = tel.series[index];
      const rows = found[dataset] || (found[dataset] = []);
      values.forEach((v, i) => {
        if (v !== null) rows.push({ t: counted(first, i), s: label, v: v * scale });
      });
    }
    if (found[tel.limit.with]) found[tel.limit.dataset] = [{ s: tel.limit.label, v: run.threads }];
    return found;
  }

  function telemetryNote(d, run) {
    const tel = R.detail.telemetry;
    if (!tel || d.x) return "";
    if (run.telemetry === "left out") return tel.note;
    return "No telemetry to draw for this run (none was recorded, or none of the charted kinds).";
  }

  // Layers and panels whose "needs:a|b" description names data none of which this run has are
  // dropped (as runcharts.without_missing does for the images).
  function withoutMissing(spec, present) {
    for (const key of ["layer", "vconcat"]) {
      if (!spec[key]) continue;
      spec[key] = spec[key].filter((part) => {
        const needs = part.description || "";
        return !needs.startsWith("needs:") || needs.slice(6).split("|").some((k) => present.has(k));
      }).map((part) => withoutMissing(part, present));
    }
    return spec;
  }

  function route() {
    const hash = decodeURIComponent(location.hash.slice(1));
    if (hash.startsWith("run-")) return showRun(Number(hash.slice(4)));
    if (hash.startsWith("cell-")) {
      tableState.cell = hash.slice(5);
      drawTable();
      document.getElementById("runs").scrollIntoView();
    }
    return Promise.resolve();
  }

  // -- start -------------------------------------------------------------------------------------

  function start() {
    const pick = document.getElementById("series-axis");
    for (const axis of R.axes) {
      const option = el("option", { value: axis.key }, axis.title);
      if (axis.key === R.defaultAxis) option.selected = true;
      pick.appendChild(option);
    }
    pick.addEventListener("change", () => drawMain(pick.value));
    document.getElementById("run-filter").addEventListener("input", (e) => {
      tableState.query = e.target.value;
      drawTable();
    });
    document.getElementById("show-all").addEventListener("click", () => {
      tableState.limit = Infinity;
      drawTable();
    });
    document.getElementById("cell-filter-clear").addEventListener("click", () => {
      tableState.cell = null;
      drawTable();
    });
    drawTable();
    performance.mark("pgbenchlab:table");
    datasets.dist = distRows();
    performance.mark("pgbenchlab:dist");
    datasets.sorted = sortedRows();
    window.addEventListener("hashchange", route);
    drawMain(R.defaultAxis).then(route).then(() => {
      // Read by the browser test: the page is drawn, and how long that took.
      document.body.setAttribute("data-render-ms", String(Math.round(performance.now())));
      document.body.setAttribute("data-charts-done", "1");
    });
  }

  start();
})();
