/**
 * Durations and byte sizes as LogQL spells them. Durations follow Go's `time.ParseDuration`
 * plus Prometheus' `d`, `w` and `y` (Loki accepts both); sizes follow go-humanize's
 * `ParseBytes` (SI and IEC units, case-insensitive). Written by hand because the npm
 * duration parsers (ms, parse-duration) accept other spellings than Loki does.
 */

const DURATION_UNITS: Record<string, number> = {
  ns: 1,
  us: 1e3,
  µs: 1e3,
  μs: 1e3,
  ms: 1e6,
  s: 1e9,
  m: 60e9,
  h: 3600e9,
  d: 86400e9,
  w: 7 * 86400e9,
  y: 365 * 86400e9,
};

const DURATION_RE = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d|w|y)/;

/** Parses `1h30m`, `1.5s`, `100ms`, `7d`; answers nanoseconds, or undefined when not a duration. */
export function parseDuration(text: string): number | undefined {
  if (text.length === 0) return undefined;
  let rest = text;
  let total = 0;
  while (rest.length > 0) {
    const m = DURATION_RE.exec(rest);
    if (m === null) return undefined;
    total += Number(m[1]) * DURATION_UNITS[m[2]!]!;
    rest = rest.slice(m[0].length);
  }
  return Number.isFinite(total) ? total : undefined;
}

const FORMAT_UNITS: [string, bigint][] = [
  ["h", 3_600_000_000_000n],
  ["m", 60_000_000_000n],
  ["s", 1_000_000_000n],
  ["ms", 1_000_000n],
  ["us", 1_000n],
  ["ns", 1n],
];

/**
 * The canonical spelling of a duration in nanoseconds: largest units first, integers only
 * (`1h30m`, `1m0.5s` is written `1m500ms`), so that it parses back to the same value.
 */
export function formatDuration(ns: bigint | number): string {
  let n = typeof ns === "bigint" ? ns : BigInt(Math.round(ns));
  if (n === 0n) return "0s";
  let out = n < 0n ? "-" : "";
  if (n < 0n) n = -n;
  for (const [unit, size] of FORMAT_UNITS) {
    if (n >= size) {
      out += `${n / size}${unit}`;
      n %= size;
    }
  }
  return out;
}

const BYTE_UNITS: Record<string, number> = {
  b: 1,
  "": 1,
  k: 1e3,
  kb: 1e3,
  kib: 1024,
  ki: 1024,
  m: 1e6,
  mb: 1e6,
  mib: 1024 ** 2,
  mi: 1024 ** 2,
  g: 1e9,
  gb: 1e9,
  gib: 1024 ** 3,
  gi: 1024 ** 3,
  t: 1e12,
  tb: 1e12,
  tib: 1024 ** 4,
  ti: 1024 ** 4,
  p: 1e15,
  pb: 1e15,
  pib: 1024 ** 5,
  pi: 1024 ** 5,
  e: 1e18,
  eb: 1e18,
  eib: 1024 ** 6,
  ei: 1024 ** 6,
};

const BYTES_RE = /^(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)$/;

/** Parses `20MB`, `1KiB`, `512b`; answers a byte count, or undefined when not a size. */
export function parseBytes(text: string): number | undefined {
  const m = BYTES_RE.exec(text);
  if (m === null) return undefined;
  const unit = BYTE_UNITS[m[2]!.toLowerCase()];
  if (unit === undefined) return undefined;
  const v = Number(m[1]) * unit;
  return Number.isFinite(v) ? Math.floor(v) : undefined;
}

const FORMAT_BYTES: [string, number][] = [
  ["EiB", 1024 ** 6],
  ["EB", 1e18],
  ["PiB", 1024 ** 5],
  ["PB", 1e15],
  ["TiB", 1024 ** 4],
  ["TB", 1e12],
  ["GiB", 1024 ** 3],
  ["GB", 1e9],
  ["MiB", 1024 ** 2],
  ["MB", 1e6],
  ["KiB", 1024],
  ["KB", 1e3],
];

/** The canonical spelling of a byte count: the largest unit that divides it exactly, else `B`. */
export function formatBytes(n: number): string {
  for (const [unit, size] of FORMAT_BYTES) {
    if (n >= size && n % size === 0) return `${n / size}${unit}`;
  }
  return `${n}B`;
}
