// Time axis ticks and labels, in UTC (the store's time zone).

const S = 1000, M = 60 * S, H = 60 * M, D = 24 * H;
const STEPS = [S, 2 * S, 5 * S, 10 * S, 15 * S, 30 * S, M, 2 * M, 5 * M, 10 * M, 15 * M, 30 * M,
  H, 2 * H, 3 * H, 6 * H, 12 * H, D, 2 * D, 7 * D, 14 * D, 30 * D];

export function ticks(t0, t1, maxTicks) {
  const span = Math.max(t1 - t0, 1);
  const step = STEPS.find((s) => span / s <= maxTicks) || STEPS[STEPS.length - 1];
  const out = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
  return { ticks: out, step };
}

export function label(t, step) {
  const iso = new Date(t).toISOString();
  if (step < M) return iso.slice(11, 19);
  if (step < D) return iso.slice(11, 16);
  return iso.slice(5, 10);
}

export function iso(t) {
  return new Date(t).toISOString().replace(".000Z", "Z");
}
