import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_DRAIN_OPTIONS, Drain, samplesInRange } from "./drain.js";
import type { Cluster } from "./drain.js";
import { PLACEHOLDER, Tokenizer, detectFormat } from "./tokenize.js";
import type { LogFormat } from "./tokenize.js";

/** Whether `line` fits `pattern`: literal parts in order, `<_>` any text (Loki's reading). */
function fits(pattern: string, line: string): boolean {
  const parts = pattern.split(PLACEHOLDER);
  const re = new RegExp(
    "^" + parts.map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("[\\s\\S]*") + "$",
  );
  return re.test(line);
}

const LIMITS = { maxLineLength: 3000, maxTokens: 80 };

// Lines of words, numbers and punctuation, single-spaced, as plain logs are.
const word = fc.oneof(
  fc.constantFrom("GET", "POST", "user", "error", "db", "ok", "failed", "to", "from", "in"),
  fc.integer({ min: 0, max: 99999 }).map(String),
  fc.stringMatching(/^[a-z][a-z0-9_./:-]{0,12}$/),
  fc.constantFrom("=", ",", "(", ")", "[", "]", '"', "'", "é", "日本", "→", "…"),
);
const plainLine = fc.array(word, { minLength: 1, maxLength: 40 }).chain((words) =>
  fc
    .array(fc.integer({ min: 0, max: 3 }), {
      minLength: words.length + 1,
      maxLength: words.length + 1,
    })
    .map((spaces) => spaces.map((s, i) => " ".repeat(s) + (words[i] ?? "")).join("")),
);

describe("tokenizers", () => {
  it("plain: joining the tokens gives the line back", () => {
    const t = new Tokenizer("plain", LIMITS);
    fc.assert(
      fc.property(fc.oneof(plainLine, fc.string({ maxLength: 200, unit: "grapheme" })), (line) => {
        const r = t.tokenize(line);
        if (typeof r === "string") {
          expect(r).toBe("too_many_tokens");
          return;
        }
        expect(t.join(r.tokens, r.gaps)).toBe(line);
      }),
    );
  });

  it("logfmt: a line with bare and quoted values is joined back to itself", () => {
    const t = new Tokenizer("logfmt", LIMITS);
    const key = fc
      .stringMatching(/^[a-z][a-z_]{0,8}$/)
      .filter((k) => !["t", "ts", "time"].includes(k));
    const value = fc.oneof(
      fc.stringMatching(/^[a-zA-Z0-9_./:-]{1,12}$/),
      fc.string({ maxLength: 20 }).map((s) => JSON.stringify(s + " x")),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(key, value), { minLength: 1, maxLength: 20 }), (pairs) => {
        const line = pairs.map(([k, v]) => `${k}=${v}`).join(" ");
        const r = t.tokenize(line);
        expect(typeof r).toBe("object");
        if (typeof r === "string") return;
        expect(r.tokens).toHaveLength(pairs.length * 2);
        expect(t.join(r.tokens, r.gaps)).toBe(line);
      }),
    );
  });

  it.each<[LogFormat, string, string[] | string]>([
    ["plain", "GET /api/v1/users 200", ["GET", "/api/v1/users", "200"]],
    ["plain", 'a=b, c("d")', ["a", "=", "b", ",", "c", "(", '"', "d", '"', ")"]],
    ["plain", "user@host #3 100% €5 a+b", ["user", "@", "host", "#", "3", "100", "%", "€5", "a+b"]],
    ["plain", "Grüße, 世界。ok", ["Grüße", ",", "世界", "。", "ok"]],
    [
      "logfmt",
      'level=info msg="hello world" ts=123 flag',
      ["level", "info", "msg", "hello world", "ts", "<_>", "flag", ""],
    ],
    ["logfmt", 'msg="a \\"q\\" b" traceID=abc', ["msg", 'a "q" b', "traceID", "<_>"]],
    ["logfmt", 'msg="unterminated', "unparsable"],
    ["json", '{"level":"info","msg":"user 7 in","n":1}', ["user", "7", "in"]],
    ["json", '{"log":"first","msg":"second"}', ["first"]],
    ["json", '{"level":"info","n":1}', "unparsable"],
    ["json", "[1,2]", "unparsable"],
    ["plain", "x".repeat(3001), "line_too_long"],
  ])("%s %j", (format, line, expected) => {
    const r = new Tokenizer(format, LIMITS).tokenize(line);
    expect(typeof r === "string" ? r : r.tokens).toEqual(expected);
  });

  it.each<[string, LogFormat]>([
    ['{"a":1}', "json"],
    ['  {"msg":"x"}  ', "json"],
    ['level=info msg="hi there" n=3', "logfmt"],
    ["ts=2024-01-01T00:00:00Z caller=x.go:12 level=warn", "logfmt"],
    ["GET /x 200", "plain"],
    ["Jan 1 00:00:00 host sshd[1]: key=value", "plain"],
  ])("detects %j as %s", (line, format) => {
    expect(detectFormat(line)).toBe(format);
  });
});

describe("Drain", () => {
  it("a line always fits the pattern of the cluster it joined, now and after more lines", () => {
    fc.assert(
      fc.property(fc.array(plainLine, { minLength: 1, maxLength: 200 }), (lines) => {
        const d = new Drain("plain", { maxClusters: 20 });
        const joined: [string, Cluster][] = [];
        for (const line of lines) {
          const c = d.train(line, 0, "info");
          if (typeof c === "string") continue;
          expect(fits(d.pattern(c), line)).toBe(true);
          joined.push([line, c]);
        }
        // Templates only generalise: every earlier line still fits its live cluster.
        for (const [line, c] of joined) if (!c.dead) expect(fits(d.pattern(c), line)).toBe(true);
      }),
    );
  });

  it("identical lines form one cluster, whose pattern is the line, counted in their buckets", () => {
    fc.assert(
      fc.property(plainLine, fc.integer({ min: 1, max: 50 }), (line, n) => {
        const d = new Drain("plain");
        const r = new Tokenizer("plain", LIMITS).tokenize(line);
        fc.pre(typeof r !== "string" && r.tokens.length >= 4);
        for (let i = 0; i < n; i++) d.train(line, i * 1000, "info");
        expect(d.size).toBe(1);
        const [c] = [...d.clusters()];
        expect(d.pattern(c!)).toBe(line.replace(/(?:<_>)+/g, "<_>"));
        expect(c!.size).toBe(n);
        expect(c!.counts.reduce((a, b) => a + b, 0)).toBe(n);
      }),
    );
  });

  it("levels never share a cluster", () => {
    const d = new Drain("plain");
    d.train("user 1 logged in now", 0, "info");
    d.train("user 2 logged in now", 0, "error");
    d.train("user 3 logged in now", 0, "info");
    expect([...d.clusters()].map((c) => [c.level, c.size, d.pattern(c)])).toEqual([
      ["info", 2, "user <_> logged in now"],
      ["error", 1, "user 2 logged in now"],
    ]);
  });

  it("holds at most maxClusters clusters, buckets and tree nodes, on random input", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(plainLine, fc.integer({ min: 0, max: 2e6 })), { maxLength: 400 }),
        fc.integer({ min: 1, max: 12 }),
        (lines, maxClusters) => {
          const d = new Drain("plain", { maxClusters, maxBuckets: 8, maxDepth: 6 });
          for (const [line, t] of lines) d.train(line, t, line.length % 2 === 0 ? "info" : "warn");
          expect(d.size).toBeLessThanOrEqual(maxClusters);
          for (const c of d.clusters()) {
            expect(c.buckets.length).toBeLessThanOrEqual(8);
            expect(c.buckets).toEqual([...c.buckets].sort((a, b) => a - b));
            expect(c.size).toBe(c.counts.reduce((a, b) => a + b, 0));
          }
          // Nodes: bounded by the clusters alive (pruned past the bound).
          expect(d.bytes).toBeLessThan(
            maxClusters * (3000 + 8 * 16) + 2 * maxClusters * 5 * 96 + 64 * 96,
          );
        },
      ),
    );
  });

  it("evicts the least recently matched cluster", () => {
    const d = new Drain("plain", { maxClusters: 2 });
    d.train("alpha one two three", 0, "info");
    d.train("beta one two three four", 0, "info");
    d.train("alpha one two three", 0, "info"); // touches alpha
    d.train("gamma one two three four five", 0, "info"); // evicts beta
    expect([...d.clusters()].map((c) => d.pattern(c))).toEqual([
      "alpha one two three",
      "gamma one two three four five",
    ]);
    expect(d.stats).toMatchObject({ created: 3, evicted: 1 });
  });

  it("pauses learning for pauseMs once evictions pass maxEvictionRatio of the lines", () => {
    const d = new Drain("plain", { maxClusters: 4, pauseMs: 60_000 });
    const unique = (i: number): string =>
      `w${i}a w${i}b w${i}c w${i}d`.replace(/\d/g, (x) => "qrstuvwxyz"[+x]!);
    const results: (string | number)[] = [];
    for (let i = 0; i < 20; i++) {
      const r = d.train(unique(i), 1000, "info");
      results.push(typeof r === "string" ? r : r.id);
    }
    // 4 clusters fill the cache; each later line evicts one; paused once evictions > 25 %.
    const firstPause = results.indexOf("paused");
    expect(firstPause).toBeGreaterThan(4);
    expect(results.slice(firstPause).every((r) => r === "paused")).toBe(true);
    expect(d.stats.evicted).toBeGreaterThan(0.25 * (firstPause - 1));
    expect(d.train(unique(99), 1000, "info", 60_000)).toBe("paused");
    // After the pause it learns again, from fresh counts.
    expect(typeof d.train(unique(99), 1000, "info", 61_001)).toBe("object");
  });

  it("skips lines with too few or too many tokens", () => {
    const d = new Drain("plain");
    expect(d.train("a b c", 0, "info")).toBe("too_few_tokens");
    expect(d.train(Array.from({ length: 81 }, (_, i) => `w${i}`).join(" "), 0, "info")).toBe(
      "too_many_tokens",
    );
    expect(d.size).toBe(0);
  });

  it("prune drops old buckets, then empty clusters and their branches", () => {
    const d = new Drain("plain");
    d.train("old line with four tokens", 5_000, "info");
    d.train("new line with four tokens and more", 65_000, "info");
    d.train("new line with four tokens and more", 75_000, "info");
    const before = d.bytes;
    expect(d.prune(60_000)).toBe(false);
    expect([...d.clusters()].map((c) => [d.pattern(c), c.buckets, c.counts])).toEqual([
      ["new line with four tokens and more", [6, 7], [1, 1]],
    ]);
    expect(d.bytes).toBeLessThan(before);
    expect(d.prune(10 * 60_000)).toBe(true);
    expect(d.bytes).toBe(0);
  });

  it("counts out-of-order lines in their own bucket", () => {
    const d = new Drain("plain");
    for (const t of [30_000, 10_000, 20_000, 10_500, 40_000])
      d.train("same line of four", t, "info");
    const [c] = [...d.clusters()];
    expect(c!.buckets).toEqual([1, 2, 3, 4]);
    expect(c!.counts).toEqual([2, 1, 1, 1]);
  });

  it("samplesInRange sums buckets into steps in [from, through)", () => {
    const d = new Drain("plain");
    for (const t of [0, 5_000, 10_000, 25_000, 60_000, 61_000, 125_000])
      d.train("same line of four", t, "info");
    const [c] = [...d.clusters()];
    expect(samplesInRange(c!, 10_000, 0, 200_000, 60_000)).toEqual([
      [0, 4],
      [60, 2],
      [120, 1],
    ]);
    expect(samplesInRange(c!, 10_000, 10_000, 120_000, 10_000)).toEqual([
      [10, 1],
      [20, 1],
      [60, 2],
    ]);
  });
});

// Real-looking lines of a few templates and the patterns Drain finds in them.
describe("patterns of real-looking logs", () => {
  const cases: {
    name: string;
    format: LogFormat;
    lines: (i: number) => string[];
    patterns: string[];
  }[] = [
    {
      name: "logfmt (Loki's own logs)",
      format: "logfmt",
      lines: (i) => [
        `level=info ts=2024-05-0${(i % 9) + 1}T10:00:${10 + (i % 50)}.123Z caller=metrics.go:${100 + i} component=querier org_id=fake latency=fast query_type=limited status=200 duration=${i}.5ms`,
        `level=warn ts=2024-05-01T10:00:00Z caller=pool.go:88 msg="removing stale client" addr=10.0.${i % 4}.${i}:9095`,
      ],
      patterns: [
        "level=info ts=<_> caller=<_> component=querier org_id=fake latency=fast query_type=limited status=200 duration=<_>",
        'level=warn ts=<_> caller=pool.go:88 msg="removing stale client" addr=<_>',
      ],
    },
    {
      name: "JSON (message field)",
      format: "json",
      lines: (i) => [
        JSON.stringify({ level: "info", ts: i, msg: `GET /api/orders/${i} 200 ${i * 7}ms` }),
        JSON.stringify({
          level: "error",
          message: `payment ${1000 + i} declined: insufficient funds`,
          user: i,
        }),
      ],
      patterns: ["<_>GET <_> 200 <_>", "<_>payment <_> declined: insufficient funds<_>"],
    },
    {
      name: "plain (nginx, syslog)",
      format: "plain",
      lines: (i) => [
        `10.0.0.${i} - - [01/May/2024:10:00:${10 + (i % 50)} +0000] "GET /index.html HTTP/1.1" 200 ${500 + i} "-" "curl/8.5.0"`,
        `May  1 10:00:${10 + (i % 50)} web-1 sshd[${2000 + i}]: Accepted publickey for deploy from 192.168.1.${i} port ${40000 + i} ssh2`,
      ],
      patterns: [
        '<_> - - [<_> +0000] "GET /index.html HTTP/1.1" 200 <_> "-" "curl/8.5.0"',
        "May  1 <_> web-1 sshd[<_>]: Accepted publickey for deploy from <_> port <_> ssh2",
      ],
    },
  ];

  it.each(cases)("$name", ({ format, lines, patterns }) => {
    const d = new Drain(format);
    for (let i = 0; i < 40; i++) for (const line of lines(i)) d.train(line, i * 1000, "info");
    const found = [...d.clusters()].map((c) => d.pattern(c)).sort();
    expect(found).toEqual([...patterns].sort());
    for (const c of d.clusters()) expect(c.size).toBe(40);
  });

  it("defaults are Loki's", () => {
    expect(DEFAULT_DRAIN_OPTIONS).toMatchObject({
      maxDepth: 30,
      similarity: 0.3,
      maxChildren: 15,
      maxClusters: 300,
      maxLineLength: 3000,
      maxTokens: 80,
      bucketMs: 10_000,
    });
  });
});
