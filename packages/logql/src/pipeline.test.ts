/**
 * Pipeline evaluation: expected output lines and labels per query, including Loki's
 * `__error__` cases, and the proof that a catastrophic-backtracking regex runs in linear time.
 */
import { describe, expect, it } from "vitest";
import { parseExpr } from "./index.js";
import { compilePipeline, type LogEntry } from "./pipeline.js";

const STREAM = { app: "api", env: "prod" };

function run(
  query: string,
  line: string,
  sm: Record<string, string> = {},
  labels: Record<string, string> = STREAM,
) {
  const e = parseExpr(`{app="api"} ${query}`);
  if (e.kind !== "log") throw new Error("not a log query");
  const entry: LogEntry = {
    timestamp: 1_700_000_000_123_456_789n,
    line,
    labels,
    structuredMetadata: sm,
  };
  return compilePipeline(e.pipeline).process(entry);
}

type Row = [
  query: string,
  line: string,
  sm: Record<string, string>,
  expected: { line: string; labels: Record<string, string> } | null,
];
const L = (line: string, extra: Record<string, string> = {}) => ({
  line,
  labels: { ...STREAM, ...extra },
});

const rows: Row[] = [
  ['|= "err"', "an error here", {}, L("an error here")],
  ['|= "err"', "all good", {}, null],
  ['!= "err"', "an error", {}, null],
  ['|= "a" or "b"', "xbx", {}, L("xbx")],
  ['!= "a" or "b"', "xbx", {}, null],
  ['!= "a" or "b"', "xcx", {}, L("xcx")],
  ['|~ "e[r]+or"', "an error", {}, L("an error")],
  ['!~ "e[r]+or"', "an error", {}, null],
  ['|~ "(?i)ERROR"', "an error", {}, L("an error")],
  ['|> "<_> status=<_> <_>"', "GET status=500 ok", {}, L("GET status=500 ok")],
  ['!> "<_> status=<_> <_>"', "GET status=500 ok", {}, null],
  ['|= ip("10.0.0.0/8")', "from 10.1.2.3 port 80", {}, L("from 10.1.2.3 port 80")],
  ['|= ip("10.0.0.0/8")', "from 11.1.2.3", {}, null],
  [
    "| json",
    '{"a":"x","n":1.50,"o":{"p":true},"arr":[1,2],"z":null}',
    {},
    L('{"a":"x","n":1.50,"o":{"p":true},"arr":[1,2],"z":null}', { a: "x", n: "1.50", o_p: "true" }),
  ],
  [
    "| json",
    '{"app":"other","k-e.y":"v"}',
    {},
    L('{"app":"other","k-e.y":"v"}', { app_extracted: "other", k_e_y: "v" }),
  ],
  ["| json", '{"esc":"a\\"b\\u00e9"}', {}, L('{"esc":"a\\"b\\u00e9"}', { esc: 'a"bé' })],
  [
    "| json",
    "not json",
    {},
    L("not json", {
      __error__: "JSONParserErr",
      __error_details__: "Value looks like object, but can't find opening '{' symbol",
    }),
  ],
  [
    "| json",
    '{"a":',
    {},
    L('{"a":', { __error__: "JSONParserErr", __error_details__: "Unknown value type at offset 5" }),
  ],
  ['| json | __error__=""', "not json", {}, null],
  [
    '| json | __error__!=""',
    "not json",
    {},
    L("not json", {
      __error__: "JSONParserErr",
      __error_details__: "Value looks like object, but can't find opening '{' symbol",
    }),
  ],
  ["| json | drop __error__, __error_details__", "nope", {}, L("nope")],
  ["| json | status >= 500", '{"status":503}', {}, L('{"status":503}', { status: "503" })],
  ["| json | status >= 500", '{"status":200}', {}, null],
  ["| json | status >= 500", '{"other":1}', {}, null],
  [
    "| json | status >= 500",
    '{"status":"abc"}',
    {},
    L('{"status":"abc"}', {
      status: "abc",
      __error__: "LabelFilterErr",
      __error_details__: 'cannot parse "abc" as a number',
    }),
  ],
  [
    "| json | status >= 500",
    "broken",
    {},
    L("broken", {
      __error__: "JSONParserErr",
      __error_details__: "Value looks like object, but can't find opening '{' symbol",
    }),
  ],
  [
    '| json first="servers[0]", ua="req.headers[\\"User-Agent\\"]", miss="x.y"',
    '{"servers":["s1","s2"],"req":{"headers":{"User-Agent":"curl"}}}',
    {},
    L('{"servers":["s1","s2"],"req":{"headers":{"User-Agent":"curl"}}}', {
      first: "s1",
      ua: "curl",
      miss: "",
    }),
  ],
  [
    "| logfmt",
    'level=info msg="hello \\"you\\"" dur=1.5s empty= bare',
    {},
    L('level=info msg="hello \\"you\\"" dur=1.5s empty= bare', {
      level: "info",
      msg: 'hello "you"',
      dur: "1.5s",
    }),
  ],
  [
    "| logfmt --keep-empty",
    "a=1 empty= bare",
    {},
    L("a=1 empty= bare", { a: "1", empty: "", bare: "" }),
  ],
  ["| logfmt", 'a=1 b"c=2 d=3', {}, L('a=1 b"c=2 d=3', { a: "1", d: "3" })],
  [
    "| logfmt --strict",
    'a=1 b"c=2 d=3',
    {},
    L('a=1 b"c=2 d=3', {
      a: "1",
      __error__: "LogfmtParserErr",
      __error_details__: "logfmt syntax error at pos 6 : unexpected '\"'",
    }),
  ],
  [
    '| logfmt app, l="level"',
    "app=x level=warn other=1",
    {},
    L("app=x level=warn other=1", { app_extracted: "x", l: "warn" }),
  ],
  [
    '| logfmt | level="error" | line_format "{{.msg}}"',
    "level=error msg=boom",
    {},
    L("boom", { level: "error", msg: "boom" }),
  ],
  [
    '| regexp "(?P<method>\\\\w+) (?P<path>\\\\S+)"',
    "GET /api/x 200",
    {},
    L("GET /api/x 200", { method: "GET", path: "/api/x" }),
  ],
  ['| regexp "(?P<method>POST)"', "GET /", {}, L("GET /")],
  [
    '| pattern "<method> <path> <_>"',
    "GET /api 200 5ms",
    {},
    L("GET /api 200 5ms", { method: "GET", path: "/api" }),
  ],
  [
    '| pattern "<ip> - <user> ["',
    "1.2.3.4 - bob [x]",
    {},
    L("1.2.3.4 - bob [x]", { ip: "1.2.3.4", user: "bob" }),
  ],
  ["| unpack", '{"_entry":"real line","pod":"p1","n":5}', {}, L("real line", { pod: "p1" })],
  ['| line_format "{{.env}}/{{.app | ToUpper}}: {{ __line__ }}"', "msg", {}, L("prod/API: msg")],
  [
    '| line_format "{{ if eq .env \\"prod\\" }}P{{ else if eq .env \\"dev\\" }}D{{ else }}?{{ end }}"',
    "x",
    {},
    L("P"),
  ],
  [
    '| line_format "{{ .missing | default \\"none\\" }} {{ printf \\"%05.1f\\" 3.14159 }}"',
    "x",
    {},
    L("none 003.1"),
  ],
  ['| line_format "{{ __timestamp__ | unixEpoch }}"', "x", {}, L("1700000000")],
  [
    '| line_format "{{ div 1 0 }}"',
    "x",
    {},
    L("x", {
      __error__: "TemplateFormatErr",
      __error_details__: "template: integer divide by zero",
    }),
  ],
  [
    '| line_format "{{ regexReplaceAll \\"(\\\\\\\\d+)\\" .v \\"<$1>\\" }}"',
    "x",
    { v: "a12b3" },
    { line: "a<12>b<3>", labels: { ...STREAM, v: "a12b3" } },
  ],
  [
    '| label_format who=app, tag="{{.env}}-1"',
    "x",
    {},
    { line: "x", labels: { env: "prod", who: "api", tag: "prod-1" } },
  ],
  ["| drop env", "x", {}, { line: "x", labels: { app: "api" } }],
  ['| drop env="dev"', "x", {}, L("x")],
  ["| keep app", "x", { trace_id: "t" }, { line: "x", labels: { app: "api" } }],
  [
    '| keep env="prod", trace_id',
    "x",
    { trace_id: "t" },
    { line: "x", labels: { env: "prod", trace_id: "t" } },
  ],
  ["| decolorize", "\x1b[31mred\x1b[0m text", {}, L("red text")],
  ['| trace_id="t1"', "x", { trace_id: "t1" }, L("x", { trace_id: "t1" })],
  ['| trace_id="t1"', "x", { trace_id: "t2" }, null],
  ['| trace_id="t1"', "x", {}, null],
  ['| trace_id=""', "x", {}, L("x")],
  ['| trace_id=~"t[12]" or user="bob"', "x", { user: "bob" }, L("x", { user: "bob" })],
  ['| env="prod" and app="api"', "x", {}, L("x")],
  ['| (env="dev" or env="prod"), app!="web"', "x", {}, L("x")],
  ["| logfmt | d > 1s", "d=1500ms", {}, L("d=1500ms", { d: "1500ms" })],
  ["| logfmt | d > 1s", "d=500ms", {}, null],
  ["| logfmt | size >= 1KB", "size=2kB", {}, L("size=2kB", { size: "2kB" })],
  ["| logfmt | size >= 1KB", "size=999B", {}, null],
  [
    '| logfmt | addr = ip("192.168.0.0/16")',
    "addr=192.168.4.2",
    {},
    L("addr=192.168.4.2", { addr: "192.168.4.2" }),
  ],
  ["| logfmt | n == 3 or n < 0", "n=-1", {}, L("n=-1", { n: "-1" })],
  ["| logfmt | n != 3", "n=3", {}, null],
  // Parsed labels shadow structured metadata, which shadows stream labels.
  ['| logfmt | level="warn"', "level=warn", { level: "info" }, L("level=warn", { level: "warn" })],
  ['| env="staging"', "x", { env: "staging" }, L("x", { env: "staging" })],
];

describe("pipeline", () => {
  it.each(rows)("%s on %j", (query, line, sm, expected) => {
    expect(run(query, line, sm)).toEqual(expected);
  });

  it("returns the stream's own labels for line-only pipelines (no copy)", () => {
    const e = parseExpr('{app="api"} |= "x"');
    if (e.kind !== "log") throw new Error("log");
    const p = compilePipeline(e.pipeline);
    expect(p.lineOnly).toBe(true);
    const out = p.process({ timestamp: 0n, line: "x", labels: STREAM, structuredMetadata: {} });
    expect(out?.labels).toBe(STREAM);
    expect(p.testLine?.("y")).toBe(false);
  });

  it("runs a catastrophic-backtracking regex in linear time (RE2)", () => {
    // (a+)+$ against "aaaa…b" takes exponential time in a backtracking engine: with 40 a's,
    // V8 would need ~2^40 steps. RE2 answers at once.
    const line = "a".repeat(40) + "b";
    const started = performance.now();
    expect(run('|~ "(a+)+$"', line)).toBeNull();
    expect(run('| regexp "(?P<x>(a|aa)+)c"', line)).toEqual(L(line));
    expect(run('| logfmt | x=~"(a*)*b"', `x=${line}`)).toEqual(L(`x=${line}`, { x: line }));
    const long = "a".repeat(100_000) + "!";
    expect(run('|~ "(a|aa)+$"', long)).toBeNull();
    expect(performance.now() - started).toBeLessThan(2000);
  });
});
