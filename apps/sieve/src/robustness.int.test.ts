// Issue 10's numbered cases that can be seen from outside, each against a real `sieve all`
// child over loopback: hostile bodies and queries must get a 4xx (or Loki's 504 for a query
// past its timeout), never a 5xx, a crash or a stall; /ready keeps answering meanwhile
// (p99 < 200 ms, probed every 50 ms); and the canary lines pushed before are all there
// after. Case 5 (the object store) and 6 (failures nobody sees) are tested where the
// store, the WAL and the Kafka consumer live; case 8 with the internal listener.
import { encodePushRequest } from "@sieve/proto";
import { compress } from "snappyjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Answer,
  type Canary,
  type ReadyStats,
  type Sieve,
  ReadyProbe,
  RssSampler,
  formatFindings,
  pushCanary,
  readCanary,
  rssBytes,
  runRequests,
  send,
  startSieve,
  whileProbing,
} from "./fuzz/harness.test-helper.js";
import { type FuzzRequest, decompressionBombs, jsonPush } from "./fuzz/push.test-helper.js";

const READY_P99_MS = 200;
/** Client-side patience for one hostile request: today's stalls last up to ~30 s. */
const PATIENCE_MS = 45_000;

const ns = (ms: number): string => String(BigInt(ms) * 1_000_000n);

/** The last hour, as query parameters. */
function lastHour(): Record<string, string> {
  const now = Date.now();
  return { start: ns(now - 3_600_000), end: ns(now + 60_000) };
}

function get(
  path: string,
  params: Record<string, string> = {},
  headers: Record<string, string> = {},
): FuzzRequest {
  const query = new URLSearchParams(params).toString();
  return { kind: path, method: "GET", path: query === "" ? path : `${path}?${query}`, headers };
}

function postForm(path: string, params: Record<string, string>): FuzzRequest {
  const body = Buffer.from(new URLSearchParams(params).toString());
  return {
    kind: path,
    method: "POST",
    path,
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body,
  };
}

/** Describes an answer for an assertion message. */
const said = (what: string, a: Answer): string =>
  `${what}: ${a.status} in ${Math.round(a.latencyMs)} ms: ${a.text.slice(0, 300)}`;

/** The process is running and every canary line reads back unchanged. */
async function expectIntact(sieve: Sieve, canary: Canary, tenant?: string): Promise<void> {
  expect(sieve.alive(), `sieve died; its output:\n${sieve.child.output()}`).toBe(true);
  expect(await readCanary(sieve.url, canary, tenant)).toEqual([...canary.lines].sort());
}

function expectReady(ready: ReadyStats, what: string): void {
  expect
    .soft(ready.p99Ms, `/ready p99 while ${what}: ${JSON.stringify(ready)}`)
    .toBeLessThan(READY_P99_MS);
}

async function flush(sieve: Sieve): Promise<void> {
  const answer = await send(
    sieve.url,
    { kind: "flush", method: "POST", path: "/flush", headers: {} },
    PATIENCE_MS,
  );
  expect(answer.status, said("POST /flush", answer)).toBe(204);
}

/** Runs `check` before a flush and after it, then restarts the process (the caller checks it again). */
async function flushAndRestart(
  sieve: Sieve,
  check: (when: string) => Promise<void>,
): Promise<Sieve> {
  await check("before the flush");
  await flush(sieve);
  await check("after the flush");
  return sieve.restart();
}

describe("issue 10 case 1: a lone UTF-16 surrogate in a JSON label value", () => {
  it("does not poison the tenant: every read endpoint answers, before and after a flush and a restart", async () => {
    let sieve = await startSieve();
    try {
      const canary = await pushCanary(sieve.url);
      const poison = jsonPush(
        "surrogate",
        `{"streams":[{"stream":{"app":"x","k":"\\ud800"},"values":[["${ns(Date.now())}","poison"]]}]}`,
      );
      const pushed = await send(sieve.url, poison);
      // Go's decoder makes the label U+FFFD (Loki answers 204); refusing it (400) is fine too.
      expect([204, 400], said("the push", pushed)).toContain(pushed.status);

      const check = async (when: string): Promise<void> => {
        const window = lastHour();
        const reads = [
          get("/loki/api/v1/labels", window),
          get("/loki/api/v1/label/k/values", window),
          get("/loki/api/v1/query_range", { query: canary.selector, ...window }),
          get("/loki/api/v1/series", { "match[]": canary.selector, ...window }),
          get("/loki/api/v1/index/stats", { query: canary.selector, ...window }),
        ];
        for (const read of reads) {
          const answer = await send(sieve.url, read);
          expect.soft(answer.status, said(`${when}: ${read.path}`, answer)).toBe(200);
          if (pushed.status === 204 && read.path.startsWith("/loki/api/v1/label/k/values")) {
            expect.soft(answer.text, `${when}: the label as Go decodes it`).toContain("\ufffd");
          }
        }
        await expectIntact(sieve, canary);
      };
      sieve = await flushAndRestart(sieve, check);
      await check("after a restart");
    } finally {
      await sieve.dispose();
    }
  }, 120_000);
});

describe("a protobuf push whose line is not UTF-8", () => {
  it("reads back as U+FFFD beside its stream's other lines, before and after a flush and a restart", async () => {
    let sieve = await startSieve();
    try {
      const now = Date.now();
      const at = (i: number) => ({ seconds: Math.floor(now / 1000) - 10 + i, nanos: 0 });
      const encoded = Buffer.from(
        encodePushRequest({
          streams: [
            {
              labels: '{app="bytes"}',
              entries: [
                { timestamp: at(0), line: "before", structuredMetadata: [] },
                { timestamp: at(1), line: "a#PLACE#b", structuredMetadata: [] },
                { timestamp: at(2), line: "after", structuredMetadata: [] },
              ],
            },
          ],
        }),
      );
      // The same length: a truncated sequence, a stray continuation byte and 0xff.
      const placeholder = encoded.indexOf("#PLACE#");
      Buffer.from([0x61, 0xe2, 0x82, 0x62, 0x80, 0xff, 0x63]).copy(encoded, placeholder);
      const pushed = await send(sieve.url, {
        kind: "protobuf",
        method: "POST",
        path: "/loki/api/v1/push",
        headers: { "Content-Type": "application/x-protobuf" },
        body: compress(encoded),
      });
      expect(pushed.status, said("the push", pushed)).toBe(204);
      const check = async (when: string): Promise<void> => {
        const params = new URLSearchParams({
          query: '{app="bytes"}',
          direction: "forward",
          ...lastHour(),
        });
        const res = await fetch(`${sieve.url}/loki/api/v1/query_range?${params.toString()}`);
        expect(res.status, `${when}: the query`).toBe(200);
        const lines = (
          (await res.json()) as { data: { result: { values: [string, string][] }[] } }
        ).data.result.flatMap((r) => r.values.map(([, line]) => line));
        // One U+FFFD per maximal invalid sequence (the WHATWG decoder's rule, Node's).
        expect(lines, when).toEqual(["before", "aa\ufffdb\ufffd\ufffdcb", "after"]);
      };
      sieve = await flushAndRestart(sieve, check);
      await check("after a restart");
    } finally {
      await sieve.dispose();
    }
  }, 120_000);
});

describe("issue 10 case 2: queries that exhaust memory or CPU", () => {
  const QUERY_TIMEOUT_MS = 5_000;
  // Room to push 20 MB at once; a short query timeout so the CPU-bound query must be cut.
  const yaml = `distributor:
  limits:
    ingestionRateBytes: 268435456
    ingestionBurstBytes: 268435456
    perStreamRateBytes: 268435456
    perStreamBurstBytes: 268435456
querier:
  limits:
    queryTimeoutMs: ${QUERY_TIMEOUT_MS}
`;
  let sieve: Sieve;
  let canary: Canary;

  /** Pushes `count` lines made by `line` to `{app}`, spread over the last 30 minutes, in bodies of `batch`. */
  async function pushLines(
    app: string,
    count: number,
    line: (i: number) => string,
    batch: number,
  ): Promise<void> {
    const now = Date.now();
    for (let first = 0; first < count; first += batch) {
      const values = [];
      for (let i = first; i < Math.min(count, first + batch); i++) {
        values.push([ns(now - 1_800_000 + Math.floor((i * 1_800_000) / count)), line(i)]);
      }
      const answer = await send(
        sieve.url,
        jsonPush(app, JSON.stringify({ streams: [{ stream: { app }, values }] })),
      );
      expect(answer.status, said(`pushing ${app}`, answer)).toBe(204);
    }
  }

  beforeAll(async () => {
    sieve = await startSieve({ yaml });
    canary = await pushCanary(sieve.url);
    await pushLines("qf", 5_000, (i) => `{"i":${i},"level":"info","msg":"short line ${i}"}`, 5_000);
    await pushLines("qf5k", 4_000, (i) => `${i} ${"x".repeat(5_000)}`, 500);
    // From the store, as after any flush: each term of a metric query reads its own chunks.
    await flush(sieve);
  }, 120_000);

  afterAll(async () => {
    await sieve.dispose();
  }, 60_000);

  /**
   * Today a case can kill the process or leave it stuck: kill a process that does not answer
   * /ready within 2 s and start it again on the same data (the WAL replays what it
   * acknowledged), so each case is judged on its own.
   */
  async function running(): Promise<Sieve> {
    const ready = sieve.alive() ? await send(sieve.url, get("/ready"), 2_000) : undefined;
    if (ready?.status !== 200) sieve = await sieve.restart(1_000);
    return sieve;
  }

  /**
   * Runs `query` while /ready and small pushes are probed; expects a 4xx or Loki's 504 (or
   * a 200 when it is answered in time within its budgets), a live process, answers to both
   * probes throughout, and the canary intact.
   */
  async function attack(query: FuzzRequest, allowed: readonly number[]): Promise<Answer> {
    const s = await running();
    const pushes = new ReadyProbe(
      s.url,
      250,
      10_000,
      (n) =>
        jsonPush(
          "probe",
          JSON.stringify({
            streams: [{ stream: { app: "probe" }, values: [[ns(Date.now()), `probe ${n}`]] }],
          }),
        ),
      204,
    );
    const { result, ready } = await whileProbing(s.url, () => send(s.url, query, PATIENCE_MS));
    const pushed = await pushes.stop();
    expect.soft(s.alive(), `sieve died; its output:\n${s.child.output()}`).toBe(true);
    const status = result.status;
    expect
      .soft(allowed.includes(status) || (status >= 400 && status < 500), said("the query", result))
      .toBe(true);
    expect.soft(result.latencyMs, said("the query", result)).toBeLessThan(QUERY_TIMEOUT_MS + 3_000);
    expectReady(ready, "the query runs");
    expect
      .soft(pushed.p99Ms, `push p99 while the query runs: ${JSON.stringify(pushed)}`)
      .toBeLessThan(1_000);
    await expectIntact(s, canary);
    return result;
  }

  it('answers `line_format "{{ repeat 1048576 \\"a\\" }}"` over 5,000 lines (limit 5000) without dying', async () => {
    await attack(
      get("/loki/api/v1/query_range", {
        query: '{app="qf"} | line_format "{{ repeat 1048576 \\"a\\" }}"',
        limit: "5000",
        ...lastHour(),
      }),
      [504],
    );
  }, 240_000);

  it("answers a sum of 1,000 count_over_time terms over 4,000 lines of 5 KB without dying", async () => {
    const term = 'count_over_time({app="qf5k"}[1m])';
    await attack(
      get("/loki/api/v1/query_range", {
        query: Array<string>(1_000).fill(term).join(" + "),
        step: "60",
        ...lastHour(),
      }),
      [200, 504],
    );
  }, 240_000);

  it("answers a doubling line_format chain with a 4xx naming the limit, not 500 Invalid string length", async () => {
    const stage = ' | line_format "{{__line__}}{{__line__}}"';
    const answer = await attack(
      get("/loki/api/v1/query_range", {
        query: `{app="qf"}${stage.repeat(40)}`,
        limit: "10",
        ...lastHour(),
      }),
      [504],
    );
    expect(answer.text).not.toMatch(/Invalid string length/);
  }, 240_000);

  // The 1,000 stages took 10.3 s; the json stage is ~3× faster since (linear in a
  // line's keys), so 1,000 now end inside the timeout: 8,000 (under the 10,000-node bound)
  // keep the query CPU-bound well past it, on a quiet machine too.
  it("cuts 8,000 `| json` stages at the query timeout with Loki's 504, while pushes and /ready go on", async () => {
    const answer = await attack(
      // As a form: 56 KB in a URL would pass Node's 16 KiB header limit (431).
      postForm("/loki/api/v1/query_range", {
        query: `{app="qf"}${" | json".repeat(8_000)}`,
        limit: "5000",
        ...lastHour(),
      }),
      [504],
    );
    expect(answer.status, said("the query", answer)).toBe(504);
    expect(answer.text).toMatch(/request timed out/);
  }, 240_000);
});

describe("issue 10 case 3: user errors are 4xx on every endpoint", () => {
  let sieve: Sieve;
  let canary: Canary;

  beforeAll(async () => {
    sieve = await startSieve();
    canary = await pushCanary(sieve.url);
  }, 60_000);

  afterAll(async () => {
    await sieve.dispose();
  }, 60_000);

  const SELECTORS = ['{env!~"dev"}', '{a=""}', '{a=~".*"}'];
  const ENDPOINTS: [string, (selector: string) => Record<string, string>][] = [
    ["/loki/api/v1/index/stats", (q) => ({ query: q })],
    ["/loki/api/v1/series", (q) => ({ "match[]": q })],
    ["/loki/api/v1/labels", (q) => ({ query: q })],
    ["/loki/api/v1/label/app/values", (q) => ({ query: q })],
    ["/loki/api/v1/query_range", (q) => ({ query: q })],
  ];
  const cases = SELECTORS.flatMap((selector) =>
    ENDPOINTS.map(([path, params]) => ({ selector, path, params })),
  );

  it.each(cases)("$path with $selector answers 400", async ({ selector, path, params }) => {
    const answer = await send(sieve.url, get(path, { ...params(selector), ...lastHour() }));
    expect(answer.status, said(path, answer)).toBe(400);
    await expectIntact(sieve, canary);
  });

  it.each(["/loki/api/v1/query_range", "/loki/api/v1/query"])(
    "%s with `1 + 1 + ...` of 20,000 terms (80 KB, under the 128 KiB cap) answers 4xx",
    async (path) => {
      // As a form: in a URL it would pass Node's 16 KiB header limit (431) before the parser.
      const query = Array<string>(20_000).fill("1").join(" + ");
      const answer = await send(sieve.url, postForm(path, { query, ...lastHour() }));
      expect(answer.status, said(path, answer)).toBeGreaterThanOrEqual(400);
      expect(answer.status, said(path, answer)).toBeLessThan(500);
      await expectIntact(sieve, canary);
    },
  );
});

describe("issue 10 case 4: huge and deep bodies do not stall the process", () => {
  let sieve: Sieve;
  let canary: Canary;

  beforeAll(async () => {
    sieve = await startSieve();
    canary = await pushCanary(sieve.url);
  }, 60_000);

  afterAll(async () => {
    await sieve.dispose();
  }, 60_000);

  const ts = (): string => `"${ns(Date.now())}"`;
  // [what, the request, the slowest answer allowed]. The stall is judged by /ready; an
  // answer's time is judged by the work it takes: a 2.7 MB stream object of 200,000 keys
  // costs ~0.4 s of CPU to refuse (JSON.parse of it alone ~0.2 s, then its labels sorted
  // for Loki's message), so 8 at once on this 2-core machine queue ~1.6 s by arithmetic.
  const bodies: [string, () => FuzzRequest, number][] = [
    [
      "a JSON stream of 200,000 labels",
      () => {
        const labels = Array.from({ length: 200_000 }, (_, i) => `"l${i}":"v"`).join(",");
        return jsonPush(
          "labels",
          `{"streams":[{"stream":{"app":"x",${labels}},"values":[[${ts()},"x"]]}]}`,
        );
      },
      5_000,
    ],
    [
      "JSON nested 1,000,000 deep",
      () => {
        const depth = 1_000_000;
        return jsonPush(
          "deep",
          `{"streams":[{"stream":{"app":"x"},"values":[[${ts()},"x",${"[".repeat(depth)}${"]".repeat(depth)}]]}]}`,
        );
      },
      2_000,
    ],
    [
      "a 1 GiB gzip bomb",
      () => ({
        kind: "bomb",
        method: "POST",
        path: "/loki/api/v1/push",
        headers: { "Content-Type": "application/json", "Content-Encoding": "gzip" },
        body: decompressionBombs().gzip,
      }),
      2_000,
    ],
    [
      "a 1 GiB deflate bomb",
      () => ({
        kind: "bomb",
        method: "POST",
        path: "/loki/api/v1/push",
        headers: { "Content-Type": "application/json", "Content-Encoding": "deflate" },
        body: decompressionBombs().deflate,
      }),
      2_000,
    ],
  ];

  it.each(bodies)(
    "refuses %s (8 at once) with a 4xx while /ready answers",
    async (what, make, slowMs) => {
      const request = make();
      const { result, ready } = await whileProbing(sieve.url, () =>
        runRequests({
          url: sieve.url,
          seed: 0,
          count: 8,
          concurrency: 8,
          make: () => request,
          timeoutMs: PATIENCE_MS,
          slowMs,
        }),
      );
      expect
        .soft(
          formatFindings(result.findings),
          `${what}: 5xx, no answer or slower than ${slowMs} ms`,
        )
        .toBe("");
      for (const status of Object.keys(result.statuses)) {
        expect
          .soft(
            Number(status),
            `${what}: statuses ${JSON.stringify(result.statuses)} ${JSON.stringify(result.examples)}`,
          )
          .toBeGreaterThanOrEqual(400);
        expect
          .soft(
            Number(status),
            `${what}: statuses ${JSON.stringify(result.statuses)} ${JSON.stringify(result.examples)}`,
          )
          .toBeLessThan(500);
      }
      expectReady(ready, `${what} is pushed`);
      await expectIntact(sieve, canary);
    },
    180_000,
  );
});

describe("issue 10 case 7: tenant state is created only for valid requests", () => {
  /** Stated bound: 10,000 refused tenants may cost at most this much RSS (today ~439 KB each). */
  const MAX_GROWTH_BYTES = 150 * 1024 * 1024;

  it("keeps RSS growth under 150 MiB across 10,000 tenant IDs whose bodies are refused", async () => {
    const sieve = await startSieve({
      yaml: "distributor:\n  authEnabled: true\nquerier:\n  authEnabled: true\n",
    });
    try {
      const canary = await pushCanary(sieve.url, 200, "canary");
      const before = rssBytes(sieve.pid);
      const rss = new RssSampler(sieve.pid);
      const body = Buffer.from(
        `{"streams":[{"stream":{},"values":[["${ns(Date.now())}","no labels"]]}]}`,
      );
      const run = await runRequests({
        url: sieve.url,
        seed: 0,
        count: 10_000,
        concurrency: 8,
        timeoutMs: PATIENCE_MS,
        keepGoing: () => sieve.alive(),
        make: (_rng, i) => ({
          kind: "bad-body",
          method: "POST",
          path: "/loki/api/v1/push",
          headers: { "Content-Type": "application/json", "X-Scope-OrgID": `tenant-${i}` },
          body,
        }),
      });
      const peak = rss.stop();
      expect.soft(run.statuses, JSON.stringify(run.examples)).toEqual({ 400: 10_000 });
      expect
        .soft(peak - before, `RSS ${before} -> peak ${peak} bytes`)
        .toBeLessThan(MAX_GROWTH_BYTES);
      await expectIntact(sieve, canary, "canary");
    } finally {
      await sieve.dispose();
    }
  }, 300_000);
});
