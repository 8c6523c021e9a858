// pgbenchlab report: flame graphs drawn from the embedded trees (no library, no network).
// A tree node is [name index, samples, children...]; the root spans the width, callers above
// callees (root at the top: an icicle). Click a frame to zoom into it, the root to zoom out.
(function () {
  "use strict";
  const R = JSON.parse(document.getElementById("report-data").textContent);
  const ROW = 17;

  function hue(name) {
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return name.startsWith("[") ? "hsl(0, 0%, " + (70 + (h % 15)) + "%)"
      : "hsl(" + (10 + (h % 40)) + ", " + (65 + (h % 25)) + "%, " + (55 + (h % 12)) + "%)";
  }

  function depth(node) {
    let d = 0;
    for (let i = 2; i < node.length; i++) d = Math.max(d, depth(node[i]));
    return d + 1;
  }

  function draw(box, graph, focus, path) {
    const names = graph.names;
    box.textContent = "";
    const total = graph.tree[1];
    box.style.height = (depth(focus) + path.length) * ROW + "px";
    let row = 0;
    // The frames above the focus: full width, to click back out.
    path.forEach((node, i) => {
      frame(box, names[node[0]], node[1], total, 0, 1, row++, () => draw(box, graph, node, path.slice(0, i)));
    });
    (function lay(node, left, width, level) {
      const parentPath = path;
      frame(box, names[node[0]], node[1], total, left, width, level, () => {
        if (node === focus && path.length) draw(box, graph, path[path.length - 1], path.slice(0, -1));
        else if (node !== focus) draw(box, graph, node, parentPath.concat(ancestors(focus, node)));
      });
      let x = left;
      for (let i = 2; i < node.length; i++) {
        const w = width * node[i][1] / node[1];
        if (w > 0.0005) lay(node[i], x, w, level + 1);
        x += w;
      }
    })(focus, 0, 1, row);
  }

  // The nodes from focus (included) down to node (excluded).
  function ancestors(focus, node) {
    const trail = [];
    (function find(n) {
      if (n === node) return true;
      trail.push(n);
      for (let i = 2; i < n.length; i++) if (find(n[i])) return true;
      trail.pop();
      return false;
    })(focus);
    return trail;
  }

  function frame(box, name, samples, total, left, width, level, onclick) {
    const div = document.createElement("div");
    div.className = "frame";
    div.style.left = (left * 100) + "%";
    div.style.width = (width * 100) + "%";
    div.style.top = (level * ROW) + "px";
    div.style.background = hue(name);
    div.title = name + ": " + samples.toLocaleString() + " samples (" + (100 * samples / total).toFixed(1) + " %)";
    if (width > 0.02) div.textContent = name;
    div.addEventListener("click", onclick);
    box.appendChild(div);
  }

  document.querySelectorAll(".flame[data-profile]").forEach((box) => {
    const graph = (R.flames || [])[Number(box.dataset.profile)];
    if (graph) draw(box, graph, graph.tree, []);
  });
  performance.mark("pgbenchlab:flames");
})();
