/**
 * A/B of two running Sieve servers on the same data: `bench:peers`' four needle shapes
 * (narrow and wide selector, present and absent trace id), 20 needles a round, the servers
 * asked in turn query by query (the order reversed every other round), the first round
 * left out. Prints end-to-end p50/p90 and the servers' own execution p50 per shape.
 *
 * Two servers side by side do not run alike: the one started first, or asked first, was
 * up to 20% faster here whatever its build. Run it twice with the builds' places swapped
 * (each on the other's port and data copy) and quote both.
 *
 *   pnpm bench:needles-ab [--rounds 5] NAME=URL NAME=URL
 *
 * The servers hold a `bench:peers --keep DIR` data dir each (copies of one), with the
 * services `svc-0`..`svc-19` and `env="prod"` that benchmark writes.
 */
import { parseArgs } from "node:util";

const SHAPES = ["narrow present", "wide present", "narrow absent", "wide absent"] as const;
type Shape = (typeof SHAPES)[number];

interface Answer {
  data: {
    result: { stream: Record<string, string>; values: unknown[][] }[];
    stats?: { summary?: { execTime?: number } };
  };
}

const { values, positionals } = parseArgs({
  options: { rounds: { type: "string", default: "5" } },
  allowPositionals: true,
});
const servers = positionals.map((p) => {
  const at = p.indexOf("=");
  if (at <= 0) throw new Error(`expected NAME=URL, got ${p}`);
  return { name: p.slice(0, at), url: p.slice(at + 1) };
});
if (servers.length < 2) throw new Error("give two servers or more: NAME=URL NAME=URL");
const rounds = Number(values.rounds);

const nowNs = BigInt(Date.now()) * 1_000_000n;
const window = {
  start: String(nowNs - 6n * 3_600_000_000_000n),
  end: String(nowNs + 60_000_000_000n),
};

async function ask(url: string, query: string, limit = "1000"): Promise<Answer> {
  const params = new URLSearchParams({ query, ...window, limit, direction: "backward" });
  const res = await fetch(`${url}/loki/api/v1/query_range?${params.toString()}`);
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Answer;
}

// One trace id of each of the first 20 services, read from the first server.
const needles: { service: number; trace: string }[] = [];
for (let k = 0; k < 20; k++) {
  const answer = await ask(servers[0]!.url, `{service="svc-${k}", env="prod"}`, "1");
  const trace = answer.data.result[0]?.stream.trace_id;
  if (trace === undefined) throw new Error(`svc-${k}: no line with a trace_id`);
  needles.push({ service: k, trace });
}

const wall = new Map<string, Record<Shape, number[]>>();
const exec = new Map<string, Record<Shape, number[]>>();
const empty = (): Record<Shape, number[]> => ({
  "narrow present": [],
  "wide present": [],
  "narrow absent": [],
  "wide absent": [],
});
for (const s of servers) {
  wall.set(s.name, empty());
  exec.set(s.name, empty());
}

for (let round = 0; round < rounds; round++) {
  for (const [i, n] of needles.entries()) {
    const absent = `ffff${String(i).padStart(12, "0")}`;
    const cases: [Shape, string, number][] = [
      ["narrow present", `{service="svc-${n.service}"} | trace_id="${n.trace}"`, -1],
      ["wide present", `{env="prod"} | trace_id="${n.trace}"`, -1],
      ["narrow absent", `{service="svc-${n.service}"} | trace_id="${absent}"`, 0],
      ["wide absent", `{env="prod"} | trace_id="${absent}"`, 0],
    ];
    for (const [shape, query, want] of cases) {
      for (const s of round % 2 === 0 ? servers : [...servers].reverse()) {
        const t0 = performance.now();
        const answer = await ask(s.url, query);
        const ms = performance.now() - t0;
        const lines = answer.data.result.reduce((sum, r) => sum + r.values.length, 0);
        if (want === 0 ? lines !== 0 : lines === 0) {
          throw new Error(`${s.name} ${shape}: ${lines} lines`);
        }
        if (round === 0) continue;
        wall.get(s.name)![shape].push(ms);
        exec.get(s.name)![shape].push((answer.data.stats?.summary?.execTime ?? NaN) * 1000);
      }
    }
  }
}

function quantile(xs: readonly number[], q: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

console.log(`| server | ${SHAPES.map((s) => `${s} p50/p90 ms`).join(" | ")} |`);
console.log(`| --- |${SHAPES.map(() => " ---: |").join("")}`);
for (const s of servers) {
  const w = wall.get(s.name)!;
  const cells = SHAPES.map(
    (x) => `${quantile(w[x], 0.5).toFixed(2)}/${quantile(w[x], 0.9).toFixed(2)}`,
  );
  console.log(`| ${s.name} | ${cells.join(" | ")} |`);
}
console.log(`\n| server | ${SHAPES.map((s) => `${s} execution p50 ms`).join(" | ")} |`);
console.log(`| --- |${SHAPES.map(() => " ---: |").join("")}`);
for (const s of servers) {
  const e = exec.get(s.name)!;
  console.log(`| ${s.name} | ${SHAPES.map((x) => quantile(e[x], 0.5).toFixed(3)).join(" | ")} |`);
}
