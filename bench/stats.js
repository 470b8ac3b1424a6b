// Small statistics helpers for the benchmarks: median, percentiles, ratios and rounding.

/** Sorts a copy of the values in ascending order. */
function sorted(values) {
  return [...values].sort((a, b) => a - b);
}

/** Median of the values; the middle two are averaged for an even count. */
export function median(values) {
  if (values.length === 0) return Number.NaN;
  const s = sorted(values);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Nearest-rank percentile (p in 0…100), the definition most load tools use. */
export function percentile(values, p) {
  if (values.length === 0) return Number.NaN;
  const s = sorted(values);
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

/** Rounds to a fixed number of decimals and returns a number, not a string. */
export function round(value, decimals = 0) {
  const factor = 10 ** decimals;
  return Math.round(value * factor) / factor;
}

/** Relative spread of a set of rounds: (max - min) / median, a quick noise indicator. */
export function spread(values) {
  if (values.length === 0) return Number.NaN;
  const s = sorted(values);
  return (s[s.length - 1] - s[0]) / median(values);
}

/**
 * Rotates the order of the variants each round (ABC, BCA, CAB, …) so that no variant always
 * runs first, last or right after a particular neighbour on a noisy machine.
 */
export function rotations(variants, rounds) {
  const orders = [];
  for (let r = 0; r < rounds; r++) orders.push(variants.map((_, i) => variants[(i + r) % variants.length]));
  return orders;
}

/** Formats a number with thousands separators and a fixed number of decimals. */
export function fmt(value, decimals = 0) {
  return value.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
}

/** A promise that resolves after `ms` milliseconds. */
export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
