/**
 * The type Loki gives a detected field's value (`determineType` in
 * `pkg/querier/queryrange/detected_fields.go`): the first of Go's parsers that accepts it,
 * in Loki's order: `strconv.ParseInt` → int, `strconv.ParseFloat` → float,
 * `strconv.ParseBool` → boolean, `time.ParseDuration` → duration, go-humanize's
 * `ParseBytes` → bytes, else string.
 *
 * Written by hand: the accepted spellings are Go's (a duration without `d`, signs allowed;
 * sizes with IEC and SI units, commas, spaces), and LogQL's own unit parsers in
 * `@sieve/logql` read LogQL's spellings, which differ (LogQL durations take `d`, `w`, `y`).
 */

/** A detected field's type, as Loki names it in `detected_fields`. */
export type DetectedFieldType = "string" | "int" | "float" | "boolean" | "duration" | "bytes";

const MAX_INT64 = (1n << 63n) - 1n;
const MIN_INT64 = -(1n << 63n);

/** Go's `strconv.ParseInt(v, 10, 64)` succeeds. */
export function isGoInt(v: string): boolean {
  if (!/^[+-]?\d+$/.test(v)) return false;
  const n = BigInt(v);
  return n <= MAX_INT64 && n >= MIN_INT64;
}

// Decimal (with `_` only between digits, as Go allows with a base prefix: not here), hex
// floats with a `p` exponent, and the special values, as `strconv.ParseFloat` reads them.
const GO_FLOAT_DEC = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const GO_FLOAT_HEX = /^[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+$/;
const GO_FLOAT_SPECIAL = /^[+-]?(?:inf|infinity|nan)$/i;

/** Go's `strconv.ParseFloat(v, 64)` succeeds (a value past float64 is a range error). */
export function isGoFloat(v: string): boolean {
  if (GO_FLOAT_SPECIAL.test(v)) return true;
  if (GO_FLOAT_DEC.test(v)) return Number.isFinite(Number(v));
  return GO_FLOAT_HEX.test(v);
}

const GO_BOOL = new Set([
  "1",
  "t",
  "T",
  "TRUE",
  "true",
  "True",
  "0",
  "f",
  "F",
  "FALSE",
  "false",
  "False",
]);

/** Go's `strconv.ParseBool` succeeds. */
export function isGoBool(v: string): boolean {
  return GO_BOOL.has(v);
}

const GO_DURATION_PART = /^(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h)/;

/** Go's `time.ParseDuration` succeeds: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0`. */
export function isGoDuration(v: string): boolean {
  let rest = v.startsWith("-") || v.startsWith("+") ? v.slice(1) : v;
  if (rest === "0") return true;
  if (rest === "") return false;
  while (rest !== "") {
    const m = GO_DURATION_PART.exec(rest);
    if (m === null) return false;
    rest = rest.slice(m[0].length);
  }
  return true;
}

/** go-humanize's unit table (lower case), in bytes. */
const HUMANIZE_UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  kib: 1024,
  ki: 1024,
  kb: 1e3,
  k: 1e3,
  mib: 1024 ** 2,
  mi: 1024 ** 2,
  mb: 1e6,
  m: 1e6,
  gib: 1024 ** 3,
  gi: 1024 ** 3,
  gb: 1e9,
  g: 1e9,
  tib: 1024 ** 4,
  ti: 1024 ** 4,
  tb: 1e12,
  t: 1e12,
  pib: 1024 ** 5,
  pi: 1024 ** 5,
  pb: 1e15,
  p: 1e15,
  eib: 1024 ** 6,
  ei: 1024 ** 6,
  eb: 1e18,
  e: 1e18,
};

/**
 * go-humanize's `ParseBytes`: a number (digits, `.`, `,` as thousands separators), optional
 * spaces, a unit of its table in any case; at most 2^64 - 1 bytes. Undefined when it fails.
 */
export function parseHumanBytes(v: string): number | undefined {
  const m = /^([\d.,]*)(.*)$/s.exec(v);
  if (m === null) return undefined;
  const num = m[1]!.replaceAll(",", "");
  // Go's fmt.Sscanf("%f") into a big.Rat: a decimal number, read as far as it goes.
  const lead = /^(?:\d+\.?\d*|\.\d+)/.exec(num);
  if (lead === null || lead[0] !== num) return undefined;
  const unit = HUMANIZE_UNITS[m[2]!.trim().toLowerCase()];
  if (unit === undefined) return undefined;
  const bytes = Number(num) * unit;
  return bytes < 2 ** 64 ? bytes : undefined;
}

/** The type of one value, as Loki's `determineType`. */
export function detectType(v: string): DetectedFieldType {
  if (isGoInt(v)) return "int";
  if (isGoFloat(v)) return "float";
  if (isGoBool(v)) return "boolean";
  if (isGoDuration(v)) return "duration";
  if (parseHumanBytes(v) !== undefined) return "bytes";
  return "string";
}

/** The units after which Loki rewrites a bytes value in `detected_field/<name>/values`. */
const BYTES_SUFFIXES = [
  "b",
  "kib",
  "kb",
  "mib",
  "mb",
  "gib",
  "gb",
  "tib",
  "tb",
  "pib",
  "pb",
  "eib",
  "eb",
  "ki",
  "k",
  "mi",
  "m",
  "gi",
  "g",
  "ti",
  "t",
  "pi",
  "p",
  "ei",
  "e",
];

/**
 * A value as Loki lists it among a field's values: a size with a unit is rewritten in
 * go-humanize's SI spelling without the space (`1536KiB` → `1.6MB`), so that it can be
 * pasted into a query; anything else as it is.
 */
export function displayValue(v: string): string {
  const lower = v.toLowerCase();
  if (!BYTES_SUFFIXES.some((s) => lower.endsWith(s))) return v;
  const bytes = parseHumanBytes(v);
  return bytes === undefined ? v : humanizeBytes(Math.floor(bytes));
}

const SI_SIZES = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];

/** go-humanize's `Bytes` (SI, one decimal below 10), without its space. */
export function humanizeBytes(n: number): string {
  if (n < 10) return `${n}B`;
  const e = Math.floor(Math.log(n) / Math.log(1000));
  const val = Math.floor((n / 1000 ** e) * 10 + 0.5) / 10;
  return `${val < 10 ? val.toFixed(1) : val.toFixed(0)}${SI_SIZES[e]}`;
}
