// cladebench serve, the embedding map: points on a canvas, coloured by category; hover shows the image, a click
// opens it, a dragged box selects rows (the server turns the box into a filter). Names go on the page as text.
"use strict";
(function () {
  const canvas = document.getElementById("map");
  if (!canvas) return;
  const status = document.getElementById("map-status");
  const hover = document.getElementById("map-hover");
  const legend = document.getElementById("map-legend");
  const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                   "#bcbd22", "#393b79", "#ad494a", "#9c9ea3", "#d4d8dc"];
  const context = canvas.getContext("2d");
  let data = null, scale = null, grid = null, drag = null, chosen = null;
  const PAD = 14, CELL = 12;

  function size() {
    const width = Math.max(240, canvas.parentElement.clientWidth);
    const height = Math.round(Math.min(width * 0.7, window.innerHeight * 0.72));
    const ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio; canvas.height = height * ratio;
    canvas.style.width = width + "px"; canvas.style.height = height + "px";
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    return [width, height];
  }
  function fit(width, height) {
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (let i = 0; i < data.n; i++) {
      x0 = Math.min(x0, data.x[i]); x1 = Math.max(x1, data.x[i]);
      y0 = Math.min(y0, data.y[i]); y1 = Math.max(y1, data.y[i]);
    }
    const sx = (width - 2 * PAD) / ((x1 - x0) || 1), sy = (height - 2 * PAD) / ((y1 - y0) || 1);
    return {
      px: function (x) { return PAD + (x - x0) * sx; }, py: function (y) { return height - PAD - (y - y0) * sy; },
      dx: function (p) { return x0 + (p - PAD) / sx; }, dy: function (p) { return y0 + (height - PAD - p) / sy; },
    };
  }
  function colour(code) { return code < data.legend.length - 2 ? COLOURS[code % 11] : COLOURS[code === data.legend.length - 2 ? 11 : 12]; }
  function draw() {
    const [width, height] = size();
    scale = fit(width, height);
    grid = new Map();
    context.clearRect(0, 0, width, height);
    const radius = data.n > 20000 ? 1.2 : data.n > 2000 ? 2 : 3.5;
    for (let i = 0; i < data.n; i++) {
      const px = scale.px(data.x[i]), py = scale.py(data.y[i]);
      context.fillStyle = colour(data.category[i]);
      context.fillRect(px - radius, py - radius, 2 * radius, 2 * radius);
      const key = Math.floor(px / CELL) + "," + Math.floor(py / CELL);
      if (!grid.has(key)) grid.set(key, []);
      grid.get(key).push(i);
    }
    const outline = drag && drag.to ? [drag.from, drag.to] : chosen;  // the box being drawn, or the last one
    if (outline) {
      const a = outline.map(function (p) { return [scale.px(p[0]), scale.py(p[1])]; });
      context.strokeStyle = "#1d2327"; context.setLineDash([4, 3]);
      context.strokeRect(a[0][0], a[0][1], a[1][0] - a[0][0], a[1][1] - a[0][1]);
      context.setLineDash([]);
    }
    canvas.dataset.drawn = String(data.n);
  }
  function nearest(px, py) {
    let best = -1, bestDistance = 64;
    const cx = Math.floor(px / CELL), cy = Math.floor(py / CELL);
    for (let gx = cx - 1; gx <= cx + 1; gx++) for (let gy = cy - 1; gy <= cy + 1; gy++) {
      for (const i of grid.get(gx + "," + gy) || []) {
        const d = (scale.px(data.x[i]) - px) ** 2 + (scale.py(data.y[i]) - py) ** 2;
        if (d < bestDistance) { best = i; bestDistance = d; }
      }
    }
    return best;
  }
  function position(event) {
    const box = canvas.getBoundingClientRect();
    return [event.clientX - box.left, event.clientY - box.top];
  }
  function toData(p) { return [scale.dx(p[0]), scale.dy(p[1])]; }
  function showLegend() {
    legend.replaceChildren();
    data.legend.forEach(function (entry, code) {
      if (!entry[1]) return;
      const li = document.createElement("li");
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = colour(code);
      li.appendChild(swatch);
      li.appendChild(document.createTextNode(entry[0] + " (" + entry[1] + ")"));
      legend.appendChild(li);
    });
  }
  function select(from, to) {
    const box = [from[0], from[1], to[0], to[1]].join(",");
    fetch("/map/select?column=" + encodeURIComponent(data.column) + "&box=" + encodeURIComponent(box),
          {credentials: "same-origin"})
      .then(function (r) { return r.json(); })
      .then(function (answer) {
        if (answer.error) { status.textContent = answer.error; return; }
        const section = document.getElementById("map-selection");
        section.hidden = false;
        document.getElementById("map-selected").textContent = answer.rows + " row" + (answer.rows === 1 ? "" : "s") +
          " selected" + (answer.browse || !answer.rows ? "" : " (more than " + answer.limit + ": take the filter away, or draw a smaller box to browse them here)");
        const link = document.getElementById("map-browse");
        link.hidden = !answer.browse;
        if (answer.browse) link.href = answer.browse;
        document.getElementById("map-where").value = answer.where || "";
      });
  }
  // Pointer events: a mouse, a pen or a finger (the canvas takes no touch scrolling: touch-action none).
  canvas.addEventListener("pointerdown", function (event) {
    if (!data) return;
    drag = {from: toData(position(event)), to: null, at: position(event)};
  });
  canvas.addEventListener("pointermove", function (event) {
    if (!data) return;
    const at = position(event);
    if (drag) { drag.to = toData(at); draw(); hover.hidden = true; return; }
    const i = nearest(at[0], at[1]);
    if (i < 0) { hover.hidden = true; canvas.classList.remove("pointing"); return; }
    canvas.classList.add("pointing");
    hover.querySelector("img").src = "/thumb/" + encodeURIComponent(data.uuid[i]);
    hover.querySelector("span").textContent = data.name[i] || data.uuid[i];
    const right = at[0] > canvas.clientWidth / 2;
    hover.style.left = (right ? at[0] - 124 : at[0] + 14) + "px";
    hover.style.top = Math.max(0, at[1] - 60) + "px";
    hover.hidden = false;
  });
  canvas.addEventListener("pointerleave", function () { hover.hidden = true; });
  window.addEventListener("pointerup", function (event) {
    if (!drag) return;
    const start = drag.at, at = position(event), from = drag.from;
    drag = null;
    if (Math.abs(at[0] - start[0]) < 4 && Math.abs(at[1] - start[1]) < 4) {  // a click, not a box
      const i = nearest(at[0], at[1]);
      if (i >= 0) window.location.href = "/image/" + encodeURIComponent(data.uuid[i]);
      return;
    }
    chosen = [from, toData(at)];
    draw();
    select(chosen[0], chosen[1]);
  });
  window.addEventListener("resize", function () { if (data) draw(); });
  const started = performance.now();
  fetch("/map/points?column=" + encodeURIComponent(canvas.dataset.column) + "&color=" +
        encodeURIComponent(canvas.dataset.color), {credentials: "same-origin"})
    .then(function (r) {
      return r.json().then(function (answer) { if (!r.ok) throw new Error(answer.error || "HTTP " + r.status); return answer; });
    })
    .then(function (answer) {
      data = answer;
      draw();
      showLegend();
      const explained = (answer.explained || "").split(",").map(function (v) { return (100 * Number(v)).toFixed(1) + "%"; });
      status.textContent = answer.n + " rows of " + answer.column + " · " + answer.method +
        (answer.explained ? " (explaining " + explained.join(" and ") + " of the variance)" : "") +
        " · drawn in " + Math.round(performance.now() - started) + " ms";
    })
    .catch(function (error) { status.textContent = "cannot draw the map: " + error.message; status.classList.add("error"); });
})();
