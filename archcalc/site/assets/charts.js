// The model pages' roofline selectors (archcalc/site/charts.py draws the chart and writes its data into the page).
// The page reads without this script: the SVG shows the default accelerator and batch. Picking another one moves
// the roof, the two points and their labels; the figures are the page's exact FLOPs and bytes, the arithmetic here
// only places them (floats are fine for pixels).
(function () {
  "use strict";

  const CHAR = 6.3;  // px a character of an 11 px label takes: charts.py's CHAR
  const num = (v) => {  // an exact figure from the page: an integer, or "numerator/denominator"
    if (typeof v === "number") return v;
    const [a, b] = String(v).split("/");
    return Number(a) / Number(b || 1);
  };
  const one = (v) => v.toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });
  const two = (v) => v.toLocaleString("en-US", { maximumFractionDigits: 2 });  // charts.py's _two

  function axes(g) {  // [x lo, x hi, y lo, y hi, left, top, right, bottom] -> pixel mappings
    const [x0, x1, y0, y1, left, top, right, bottom] = g;
    const t = (v, lo, hi) => (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo));
    return { px: (v) => left + (right - left) * t(v, x0, x1), py: (v) => bottom - (bottom - top) * t(v, y0, y1),
             x0, x1, y0, right };
  }

  // charts.py's place(): right of the point (left of it near the right edge), down past earlier labels.
  function place(labels, right) {
    const boxes = [];
    return labels.map(([px, py, text]) => {
      const w = CHAR * text.length;
      const start = px + 8 + w <= right;
      const x = start ? px + 8 : px - 8;
      const x0 = start ? x : x - w;
      let y = py + 4;
      while (boxes.some(([b0, by, b1]) => Math.abs(y - by) < 12 && x0 < b1 && b0 < x0 + w)) y += 12;
      boxes.push([x0, y, x0 + w]);
      return [x, y, start ? "start" : "end"];
    });
  }

  const intensity = (pair) => num(pair[0]) / num(pair[1]);
  const attainable = (hw, i) => Math.min(hw.peak, hw.bandwidth * i);

  function draw(box, data, a) {
    const hw = data.hardware[box.querySelector('[data-select="hardware"]').value];
    const batch = box.querySelector('[data-select="batch"]').value;
    const figures = data.batches[batch];
    const ridge = hw.peak / hw.bandwidth;
    const start = Math.max(a.x0, a.y0 / hw.bandwidth);
    box.querySelector("[data-roof]").setAttribute("points", [[start, start * hw.bandwidth], [ridge, hw.peak], [a.x1, hw.peak]]
      .map(([x, y]) => `${a.px(x).toFixed(1)},${a.py(y).toFixed(1)}`).join(" "));
    const labels = [], parts = [];
    for (const phase of ["decode", "prefill"]) {
      const i = intensity(figures[phase]);
      const x = a.px(i), y = a.py(attainable(hw, i));
      const dot = box.querySelector(`[data-point="${phase}"]`);
      dot.setAttribute("cx", x.toFixed(1));
      dot.setAttribute("cy", y.toFixed(1));
      labels.push([x, y, phase]);
    }
    place(labels, a.right).forEach(([x, y, anchor], k) => {
      const text = box.querySelector(`[data-label="${labels[k][2]}"]`);
      text.setAttribute("x", x.toFixed(1));
      text.setAttribute("y", y.toFixed(1));
      text.setAttribute("text-anchor", anchor);
    });
    for (const phase of ["prefill", "decode"]) {
      const i = intensity(figures[phase]);
      const bound = i * hw.bandwidth >= hw.peak ? "compute" : "memory";
      parts.push(`${phase} ${one(i)} FLOP/byte, at most ${one(attainable(hw, i) / 1e12)} TFLOP/s (${bound}-bound)`);
    }
    box.querySelector(".archcalc-plot__caption").textContent =
      `${hw.name} (${two(hw.peak / 1e12)} TFLOP/s bf16, ${two(hw.bandwidth / 1e12)} TB/s), batch ${batch}: ${parts.join("; ")}.`;
  }

  function start(box) {
    const data = JSON.parse(box.dataset.roofline);
    const a = axes(data.axes);
    const controls = box.querySelector(".archcalc-plot__controls");
    controls.hidden = false;
    controls.querySelectorAll("select").forEach((s) => s.addEventListener("change", () => draw(box, data, a)));
  }

  document.querySelectorAll(".archcalc-plot[data-roofline]").forEach(start);
})();
