// A heatmap of a query's heatmap(field): time (x) against log-scaled value buckets
// (y, high at the top), the count of each cell as a colour with a legend, time ticks,
// value ticks; drag a box to select (onSelect gets its time and value range); `mark`
// outlines a time range (an anomalous region).
import { label, ticks } from "./time.js";

const PALETTE = ["#1b2a49", "#23457a", "#2b66a8", "#3a8fc2", "#5cb8b2", "#9ad48a", "#e3de6a", "#f7a94b", "#f2663a", "#d7263d"];
const LEFT = 64, BOTTOM = 34, TOP = 8, RIGHT = 26;

function fmtValue(v) {
  if (v >= 1000) return `${+(v / 1000).toPrecision(3)}k`;
  if (v >= 1) return `${+v.toPrecision(3)}`;
  return `${+v.toPrecision(2)}`;
}

export function colour(count, max) {
  if (!count) return null;
  const i = Math.min(PALETTE.length - 1, Math.floor((Math.log1p(count) / Math.log1p(max)) * PALETTE.length));
  return PALETTE[i];
}

export class Heatmap {
  constructor(container, heat, { onSelect, mark, height = 360 } = {}) {
    this.heat = heat;
    this.onSelect = onSelect;
    this.mark = mark;
    this.times = heat.times.map((t) => Date.parse(t));
    const step = this.times.length > 1 ? this.times[1] - this.times[0] : 1000;
    this.t0 = this.times[0];
    this.t1 = this.times[this.times.length - 1] + step;
    this.rows = heat.buckets.length;
    this.max = Math.max(1, ...heat.counts.flat());
    const wrap = document.createElement("div");
    wrap.className = "heat-wrap";
    const width = Math.max(480, Math.min(container.clientWidth || 900, 1100));
    this.canvas = document.createElement("canvas");
    this.canvas.width = width;
    this.canvas.height = height;
    this.canvas.setAttribute("role", "img");
    this.canvas.setAttribute("aria-label", `heatmap of ${heat.field}: time against value, drag to select a box`);
    wrap.append(this.canvas);
    container.append(wrap, this.legend());
    this.w = width - LEFT - RIGHT;
    this.h = height - TOP - BOTTOM;
    // where the cells are, in canvas pixels (tests and tools that drive the page read it)
    this.canvas.dataset.plot = JSON.stringify({ left: LEFT, top: TOP, width: this.w, height: this.h, canvas: width });
    this.draw();
    this.listen();
  }

  x(t) { return LEFT + ((t - this.t0) / (this.t1 - this.t0)) * this.w; }
  y(row) { return TOP + this.h - (row / this.rows) * this.h; }
  timeAt(px) { return this.t0 + ((px - LEFT) / this.w) * (this.t1 - this.t0); }
  rowAt(py) { return Math.max(0, Math.min(this.rows, ((TOP + this.h - py) / this.h) * this.rows)); }
  valueAt(row) {
    const b = this.heat.buckets;
    const i = Math.max(0, Math.min(b.length - 1, Math.floor(row)));
    return row >= b.length ? b[b.length - 1].hi : b[i].lo * Math.pow(b[i].hi / b[i].lo, row - i);
  }

  draw(box) {
    const g = this.canvas.getContext("2d");
    const { heat } = this;
    g.clearRect(0, 0, this.canvas.width, this.canvas.height);
    g.fillStyle = "#fafbfd";
    g.fillRect(LEFT, TOP, this.w, this.h);
    const cw = this.w / Math.max(1, this.times.length), rh = this.h / Math.max(1, this.rows);
    for (let r = 0; r < this.rows; r++) {
      const row = heat.counts[r];
      for (let c = 0; c < row.length; c++) {
        const fill = colour(row[c], this.max);
        if (!fill) continue;
        g.fillStyle = fill;
        g.fillRect(LEFT + c * cw, TOP + this.h - (r + 1) * rh, Math.ceil(cw), Math.ceil(rh));
      }
    }
    g.strokeStyle = "#98a2b3";
    g.strokeRect(LEFT, TOP, this.w, this.h);
    g.fillStyle = "#344054";
    g.font = "11px system-ui, sans-serif";
    const { ticks: ts, step } = ticks(this.t0, this.t1, Math.max(3, Math.floor(this.w / 90)));
    g.textAlign = "center";
    for (const t of ts) {
      const x = this.x(t);
      g.fillRect(x, TOP + this.h, 1, 4);
      g.fillText(label(t, step), x, TOP + this.h + 16);
    }
    g.fillText(`time (UTC), ${new Date(this.t0).toISOString().slice(0, 10)}`, LEFT + this.w / 2, TOP + this.h + 30);
    g.textAlign = "right";
    const every = Math.max(1, Math.ceil(this.rows / Math.max(2, Math.floor(this.h / 28))));
    for (let r = 0; r <= this.rows; r += every) {
      const y = this.y(r);
      g.fillRect(LEFT - 4, y, 4, 1);
      g.fillText(fmtValue(this.valueAt(r)), LEFT - 6, y + 4);
    }
    g.save();
    g.translate(12, TOP + this.h / 2);
    g.rotate(-Math.PI / 2);
    g.textAlign = "center";
    g.fillText(heat.field, 0, 0);
    g.restore();
    if (this.mark) {
      const [a, b] = this.mark.map((t) => this.x(Date.parse(t)));
      g.strokeStyle = "#d7263d";
      g.lineWidth = 2;
      g.setLineDash([5, 3]);
      g.strokeRect(a, TOP + 1, Math.max(2, b - a), this.h - 2);
      g.setLineDash([]);
      g.lineWidth = 1;
    }
    if (box) {
      g.fillStyle = "rgba(247, 169, 75, 0.18)";
      g.strokeStyle = "#f7a94b";
      g.lineWidth = 2;
      g.fillRect(box.x, box.y, box.w, box.h);
      g.strokeRect(box.x, box.y, box.w, box.h);
      g.lineWidth = 1;
    }
  }

  legend() {
    const div = document.createElement("div");
    div.className = "legend";
    const c = document.createElement("canvas");
    c.width = 160;
    c.height = 12;
    const g = c.getContext("2d");
    PALETTE.forEach((p, i) => { g.fillStyle = p; g.fillRect((i * c.width) / PALETTE.length, 0, c.width / PALETTE.length + 1, 12); });
    div.append("events per cell: 1", c, `${Math.round(this.max).toLocaleString()} (log scale)`);
    return div;
  }

  listen() {
    let start = null;
    const pos = (e) => {
      const r = this.canvas.getBoundingClientRect();
      const sx = this.canvas.width / r.width, sy = this.canvas.height / r.height;
      return { x: Math.max(LEFT, Math.min(LEFT + this.w, (e.clientX - r.left) * sx)), y: Math.max(TOP, Math.min(TOP + this.h, (e.clientY - r.top) * sy)) };
    };
    const rect = (a, b) => ({ x: Math.min(a.x, b.x), y: Math.min(a.y, b.y), w: Math.abs(a.x - b.x), h: Math.abs(a.y - b.y) });
    this.canvas.addEventListener("mousedown", (e) => { start = pos(e); e.preventDefault(); });
    window.addEventListener("mousemove", (e) => { if (start) this.draw(rect(start, pos(e))); });
    window.addEventListener("mouseup", (e) => {
      if (!start) return;
      const box = rect(start, pos(e));
      start = null;
      if (box.w < 3 || box.h < 3) { this.draw(); return; }
      this.draw(box);
      this.onSelect && this.onSelect(this.boxRange(box));
    });
  }

  boxRange(box) {
    return {
      from: this.timeAt(box.x), to: this.timeAt(box.x + box.w),
      lo: this.valueAt(this.rowAt(box.y + box.h)), hi: this.valueAt(this.rowAt(box.y)),
    };
  }

  /** Draw a box given as a range (a permalink's selection). */
  show(sel) {
    const x0 = this.x(sel.from), x1 = this.x(sel.to);
    const row = (v) => {
      const b = this.heat.buckets;
      let i = b.findIndex((k) => v < k.hi);
      if (i < 0) return this.rows;
      return i + Math.log(v / b[i].lo) / Math.log(b[i].hi / b[i].lo);
    };
    const y0 = this.y(row(sel.hi)), y1 = this.y(row(sel.lo));
    this.draw({ x: x0, y: y0, w: x1 - x0, h: y1 - y0 });
  }
}
