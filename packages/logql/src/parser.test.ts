/**
 * The parser table: queries written from the LogQL documentation, each with its canonical
 * text (the printer's output, which pins the tree: the test also checks that it parses back
 * to an equal tree), an explicit tree, or the exact error with its position.
 */
import { describe, expect, it } from "vitest";
import type { Expr } from "./ast.js";
import { ParseError } from "./errors.js";
import { parseExpr } from "./index.js";
import { printExpr } from "./printer.js";

type Case = [query: string, expected: string | Expr | { error: string }];

const sel = '{app="foo"}';
const err = (error: string): { error: string } => ({ error });

/** Queries whose canonical text is the query itself. */
const canonical: string[] = [
  '{app="foo"}',
  '{app="foo", env!="dev"}',
  '{app=~"foo|bar"}',
  '{app!~"foo.*", job="x"}',
  '{app="foo", x!=""}',
  '{app="a\\"b"}',
  '{app="line\\nbreak"}',
  '{app="foo"} |= "error"',
  '{app="foo"} != "debug"',
  '{app="foo"} |~ "err(or)?"',
  '{app="foo"} !~ "timeout|refused"',
  '{app="foo"} |> "<_> level=error <_>"',
  '{app="foo"} !> "<_> GET <_>"',
  '{app="foo"} |= "a" or "b"',
  '{app="foo"} != "a" or "b"',
  '{app="foo"} |~ "a" or "b.c"',
  '{app="foo"} |= ip("192.168.0.0/16")',
  '{app="foo"} != ip("10.0.0.1-10.0.0.9")',
  '{app="foo"} |= "a" |= "b" != "c"',
  '{app="foo"} | json',
  '{app="foo"} | json first_server="servers[0]", ua="request.headers[\\"User-Agent\\"]"',
  '{app="foo"} | json a="a"',
  '{app="foo"} | logfmt',
  '{app="foo"} | logfmt --strict',
  '{app="foo"} | logfmt --strict --keep-empty',
  '{app="foo"} | logfmt host="host", fwd="fwd_ip"',
  '{app="foo"} | logfmt --keep-empty level="lvl"',
  '{app="foo"} | regexp "(?P<method>\\\\w+) (?P<path>[\\\\w/]+)"',
  '{app="foo"} | pattern "<ip> - - <_> \\"<method> <uri> <_>\\" <status> <size>"',
  '{app="foo"} | unpack',
  '{app="foo"} | decolorize',
  '{app="foo"} | line_format "{{.status}} {{.method}}"',
  '{app="foo"} | line_format "{{ .msg | ToUpper }}"',
  '{app="foo"} | line_format "{{ if eq .level \\"error\\" }}E{{ else }}I{{ end }}"',
  '{app="foo"} | line_format "{{ __line__ }}"',
  '{app="foo"} | line_format "{{ printf \\"%s-%d\\" .a 5 }}"',
  '{app="foo"} | label_format dst=src',
  '{app="foo"} | label_format dst="{{.a}}-{{.b}}", other=src',
  '{app="foo"} | drop level, method="GET"',
  '{app="foo"} | drop __error__, __error_details__',
  '{app="foo"} | keep level, status=~"5.."',
  '{app="foo"} | level="error"',
  '{app="foo"} | level!="debug"',
  '{app="foo"} | level=~"err.*"',
  '{app="foo"} | level!~"info|debug"',
  '{app="foo"} | status==500',
  '{app="foo"} | status!=500',
  '{app="foo"} | status>=500',
  '{app="foo"} | status<400',
  '{app="foo"} | status<=-1',
  '{app="foo"} | ratio>0.5',
  '{app="foo"} | duration>1s',
  '{app="foo"} | duration>=1m30s',
  '{app="foo"} | latency<250ms',
  '{app="foo"} | latency==10us',
  '{app="foo"} | size>20MB',
  '{app="foo"} | size<=1KiB',
  '{app="foo"} | size!=10B',
  '{app="foo"} | addr=ip("10.0.0.0/8")',
  '{app="foo"} | addr!=ip("::1")',
  '{app="foo"} | a="1" and b="2"',
  '{app="foo"} | a="1" or b="2"',
  '{app="foo"} | a="1" and b="2" or c="3"',
  '{app="foo"} | a="1" and (b="2" or c="3")',
  '{app="foo"} | (a="1" or b="2") and c="3"',
  '{app="foo"} | a="1" or b="2" and c="3"',
  '{app="foo"} | __error__=""',
  '{app="foo"} | __error__!="JSONParserErr"',
  '{app="foo"} | json | status>=500 | line_format "{{.path}}"',
  '{app="foo"} |= "x" | logfmt | level="error" | drop level',
  '{app="foo"} | trace_id="4bf92f3577b34da6"',
  '{app="foo"} | trace_id="abc" | json',
  'count_over_time({app="foo"} [5m])',
  'count_over_time({app="foo"} |= "err" [1h])',
  'rate({app="foo"} [30s])',
  'rate({app="foo"} | json | status>=500 [5m])',
  'bytes_over_time({app="foo"} [1m])',
  'bytes_rate({app="foo"} [1m])',
  'absent_over_time({app="foo"} [10m])',
  'count_over_time({app="foo"} [5m] offset 1h)',
  'count_over_time({app="foo"} [24h])',
  'sum_over_time({app="foo"} | logfmt | unwrap bytes [5m])',
  'avg_over_time({app="foo"} | json | unwrap latency [5m]) by (host)',
  'min_over_time({app="foo"} | unwrap x [1m])',
  'max_over_time({app="foo"} | unwrap x [1m]) without (pod)',
  'stddev_over_time({app="foo"} | unwrap x [1m])',
  'stdvar_over_time({app="foo"} | unwrap x [1m])',
  'quantile_over_time(0.99, {app="foo"} | json | unwrap duration(latency) [5m]) by (path)',
  'quantile_over_time(0.5, {app="foo"} | unwrap duration_seconds(d) [5m])',
  'first_over_time({app="foo"} | unwrap x [1m])',
  'last_over_time({app="foo"} | unwrap bytes(size) [1m])',
  'rate_counter({app="foo"} | unwrap total [5m])',
  'rate({app="foo"} | unwrap x [5m])',
  'sum_over_time({app="foo"} | json | unwrap x | __error__="" [5m])',
  'sum_over_time({app="foo"} | unwrap x | __error__="" | x>0 [5m])',
  'sum(count_over_time({app="foo"} [5m]))',
  'sum by (level) (count_over_time({app="foo"} | logfmt [5m]))',
  'sum without (pod) (rate({app="foo"} [5m]))',
  'sum by () (rate({app="foo"} [5m]))',
  'avg(rate({app="foo"} [5m]))',
  'min(rate({app="foo"} [5m]))',
  'max(rate({app="foo"} [5m]))',
  'count(rate({app="foo"} [5m]))',
  'stddev(rate({app="foo"} [5m]))',
  'stdvar(rate({app="foo"} [5m]))',
  'topk(10, sum by (path) (rate({app="foo"} [5m])))',
  'bottomk(3, rate({app="foo"} [5m]))',
  'topk by (region) (2, rate({app="foo"} [5m]))',
  'sort(rate({app="foo"} [5m]))',
  'sort_desc(rate({app="foo"} [5m]))',
  'rate({app="foo"} [5m]) * 60',
  'rate({app="foo"} [5m]) + rate({app="bar"} [5m])',
  'rate({app="foo"} [5m]) - 1',
  'rate({app="foo"} [5m]) / 2',
  'rate({app="foo"} [5m]) % 2',
  'rate({app="foo"} [5m]) ^ 2',
  'rate({app="foo"} [5m]) > 10',
  'rate({app="foo"} [5m]) > bool 10',
  'rate({app="foo"} [5m]) == bool rate({app="bar"} [5m])',
  'rate({app="foo"} [5m]) != 0',
  'rate({app="foo"} [5m]) >= 1',
  'rate({app="foo"} [5m]) < 1',
  'rate({app="foo"} [5m]) <= 1',
  'rate({app="foo"} [5m]) and rate({app="bar"} [5m])',
  'rate({app="foo"} [5m]) or vector(0)',
  'rate({app="foo"} [5m]) unless rate({app="bar"} [5m])',
  'rate({app="foo"} [5m]) / on(host) rate({app="bar"} [5m])',
  'rate({app="foo"} [5m]) / ignoring(pod) rate({app="bar"} [5m])',
  'rate({app="foo"} [5m]) * on(host) group_left(region) rate({app="bar"} [5m])',
  'rate({app="foo"} [5m]) * on(host) group_right() rate({app="bar"} [5m])',
  'rate({app="foo"} [5m]) * ignoring() group_left(a, b) rate({app="bar"} [5m])',
  'rate({app="foo"} [5m]) > bool on(host) rate({app="bar"} [5m])',
  'sum(rate({app="foo"} |= "error" [5m])) / sum(rate({app="foo"} [5m]))',
  '(rate({app="foo"} [5m]) + 1) * 2',
  "1 + 2 * 3",
  "(1 + 2) * 3",
  "2 ^ 3 ^ 2",
  "(2 ^ 3) ^ 2",
  "1 - (2 - 3)",
  "1 - 2 - 3",
  "-1",
  "1 == bool 1",
  "1.5",
  "vector(1)",
  'vector(0) or sum(rate({app="foo"} [5m]))',
  'label_replace(rate({app="foo"} [5m]), "dst", "$1", "src", "(.*)")',
  'label_replace(sum by (a) (rate({app="foo"} [5m])), "b", "x-$1", "a", "(.+)-.*")',
  'sum(label_replace(rate({app="foo"} [5m]), "dst", "$1", "src", "(.*)"))',
  'count_over_time({app="foo"} | json | line_format "{{.a}}" [5m])',
  'count_over_time({app="foo"} | pattern "<a> <b>" | a="x" [5m])',
  'count_over_time({app="foo"} | regexp "(?P<a>.)" | keep a [5m])',
  'count_over_time({app="foo"} | label_format x=y [5m])',
  'max by (x) (max_over_time({app="foo"} | unwrap bytes(size) [5m]))',
];

/** Queries that differ from their canonical text only in spelling. */
const respelled: Case[] = [
  ['{app="foo" }', sel],
  ["{ app = `foo` }", sel],
  ['{app="foo",env="a"}', '{app="foo", env="a"}'],
  ["{app=`a\\b`}", '{app="a\\\\b"}'],
  ['{app="\\x41\\u00e9\\101"}', '{app="Aé\u0041"}'],
  ['{app="foo"}|="x"', '{app="foo"} |= "x"'],
  ['{app="foo"} |= `raw\\n`', '{app="foo"} |= "raw\\\\n"'],
  ['{app="foo"}\n  |= "x"\n  | json', '{app="foo"} |= "x" | json'],
  ['{app="foo"} # a comment\n|= "x"', '{app="foo"} |= "x"'],
  ['{app="foo"} | json servers', '{app="foo"} | json servers="servers"'],
  ['{app="foo"} | json a, b="c"', '{app="foo"} | json a="a", b="c"'],
  ['{app="foo"} | logfmt a', '{app="foo"} | logfmt a="a"'],
  ['{app="foo"} | status=500', '{app="foo"} | status==500'],
  ['{app="foo"} | status == +500', '{app="foo"} | status==500'],
  ['{app="foo"} | a="1", b="2"', '{app="foo"} | a="1" and b="2"'],
  ['{app="foo"} | a="1" b="2"', '{app="foo"} | a="1" and b="2"'],
  ['{app="foo"} | (a="1")', '{app="foo"} | a="1"'],
  ['{app="foo"} | ((a="1" , b="2"))', '{app="foo"} | a="1" and b="2"'],
  ['{app="foo"} | d > 90s', '{app="foo"} | d>1m30s'],
  ['{app="foo"} | d > 1.5h', '{app="foo"} | d>1h30m'],
  ['{app="foo"} | d > 1000ms', '{app="foo"} | d>1s'],
  ['{app="foo"} | s > 1024B', '{app="foo"} | s>1KiB'],
  ['{app="foo"} | s > 1000b', '{app="foo"} | s>1KB'],
  ['{app="foo"} | s > 1.5KB', '{app="foo"} | s>1500B'],
  ['{app="foo"} | s > 2mb', '{app="foo"} | s>2MB'],
  ['count_over_time({app="foo"}[5m])', 'count_over_time({app="foo"} [5m])'],
  ['count_over_time({app="foo"}[300s])', 'count_over_time({app="foo"} [5m])'],
  ['count_over_time(({app="foo"})[5m])', 'count_over_time({app="foo"} [5m])'],
  ['count_over_time(({app="foo"} |= "x")[5m])', 'count_over_time({app="foo"} |= "x" [5m])'],
  ['count_over_time(({app="foo"} [5m]))', 'count_over_time({app="foo"} [5m])'],
  ['count_over_time({app="foo"}[5m] |= "x")', 'count_over_time({app="foo"} |= "x" [5m])'],
  [
    'count_over_time({app="foo"}[5m] offset 1h |= "x")',
    'count_over_time({app="foo"} |= "x" [5m] offset 1h)',
  ],
  ['sum_over_time({app="foo"}[5m] | unwrap x)', 'sum_over_time({app="foo"} | unwrap x [5m])'],
  [
    'sum_over_time({app="foo"}[5m] offset 2m | unwrap x)',
    'sum_over_time({app="foo"} | unwrap x [5m] offset 2m)',
  ],
  ['sum_over_time(({app="foo"} | unwrap x)[5m])', 'sum_over_time({app="foo"} | unwrap x [5m])'],
  [
    'sum(count_over_time({app="foo"}[5m])) by (a)',
    'sum by (a) (count_over_time({app="foo"} [5m]))',
  ],
  [
    'sum(count_over_time({app="foo"}[5m])) without(a,b)',
    'sum without (a, b) (count_over_time({app="foo"} [5m]))',
  ],
  ['topk(5,rate({app="foo"}[5m])) by (a)', 'topk by (a) (5, rate({app="foo"} [5m]))'],
  ['((rate({app="foo"}[5m])))', 'rate({app="foo"} [5m])'],
  ["(1 + 2)", "1 + 2"],
  ["1 + (2 * 3)", "1 + 2 * 3"],
  ["2 ^ (3 ^ 2)", "2 ^ 3 ^ 2"],
  ["(1 - 2) - 3", "1 - 2 - 3"],
  [
    'rate({app="foo"}[5m]) / on() rate({app="bar"}[5m])',
    'rate({app="foo"} [5m]) / on() rate({app="bar"} [5m])',
  ],
  [
    'rate({app="foo"}[5m]) * on(a) group_left rate({app="bar"}[5m])',
    'rate({app="foo"} [5m]) * on(a) group_left() rate({app="bar"} [5m])',
  ],
  ["0x10", "16"],
  ["1e3", "1000"],
  ["1.", "1"],
  [".5", "0.5"],
  ["vector(+1)".replace("+", ""), "vector(1)"],
  ['count_over_time({app="foo"} [1h0m0s])', 'count_over_time({app="foo"} [1h])'],
  ['count_over_time({app="foo"} [7d])', 'count_over_time({app="foo"} [168h])'],
  ['count_over_time({app="foo"} [1w])', 'count_over_time({app="foo"} [168h])'],
  ['{app="foo"} | line_format `{{.a}}`', '{app="foo"} | line_format "{{.a}}"'],
  ['{app="foo"} |= "a" or "b" or "c"', '{app="foo"} |= "a" or "b" or "c"'],
  ['{app="foo"} | drop a,b', '{app="foo"} | drop a, b'],
];

/** Explicit trees. */
const trees: Case[] = [
  [
    '{app="foo"}',
    { kind: "log", matchers: [{ name: "app", op: "=", value: "foo" }], pipeline: [] },
  ],
  [
    '{app="foo"} |= "a" or "b" | json | status >= 500',
    {
      kind: "log",
      matchers: [{ name: "app", op: "=", value: "foo" }],
      pipeline: [
        {
          kind: "lineFilter",
          op: "|=",
          terms: [
            { value: "a", ip: false },
            { value: "b", ip: false },
          ],
        },
        { kind: "json", params: [] },
        { kind: "labelFilter", filter: { kind: "number", name: "status", op: ">=", value: 500 } },
      ],
    },
  ],
  [
    '{app="foo"} | a="1" or b=~"x" and c > 1s',
    {
      kind: "log",
      matchers: [{ name: "app", op: "=", value: "foo" }],
      pipeline: [
        {
          kind: "labelFilter",
          filter: {
            kind: "or",
            left: { kind: "string", name: "a", op: "=", value: "1" },
            right: {
              kind: "and",
              left: { kind: "string", name: "b", op: "=~", value: "x" },
              right: { kind: "duration", name: "c", op: ">", valueNs: 1e9 },
            },
          },
        },
      ],
    },
  ],
  [
    'quantile_over_time(0.9, {app="foo"} | unwrap duration(d) | __error__="" [5m] offset 1m) by (x)',
    {
      kind: "rangeAgg",
      op: "quantile_over_time",
      param: 0.9,
      range: {
        selector: { kind: "log", matchers: [{ name: "app", op: "=", value: "foo" }], pipeline: [] },
        rangeNs: 300_000_000_000n,
        offsetNs: 60_000_000_000n,
        unwrap: {
          label: "d",
          conversion: "duration",
          postFilters: [{ kind: "string", name: "__error__", op: "=", value: "" }],
        },
      },
      grouping: { without: false, labels: ["x"] },
    },
  ],
  [
    'sum by (a) (rate({app="foo"}[1m])) / ignoring(b) group_left(c) vector(2)',
    {
      kind: "binary",
      op: "/",
      returnBool: false,
      matching: { on: false, labels: ["b"], card: "many-to-one", include: ["c"] },
      left: {
        kind: "vectorAgg",
        op: "sum",
        grouping: { without: false, labels: ["a"] },
        inner: {
          kind: "rangeAgg",
          op: "rate",
          range: {
            selector: {
              kind: "log",
              matchers: [{ name: "app", op: "=", value: "foo" }],
              pipeline: [],
            },
            rangeNs: 60_000_000_000n,
            offsetNs: 0n,
          },
        },
      },
      right: { kind: "vector", value: 2 },
    },
  ],
  [
    "1 + 2 * 3 ^ 2",
    {
      kind: "binary",
      op: "+",
      returnBool: false,
      left: { kind: "literal", value: 1 },
      right: {
        kind: "binary",
        op: "*",
        returnBool: false,
        left: { kind: "literal", value: 2 },
        right: {
          kind: "binary",
          op: "^",
          returnBool: false,
          left: { kind: "literal", value: 3 },
          right: { kind: "literal", value: 2 },
        },
      },
    },
  ],
  [
    '{app="foo"} | label_format a=b, c="{{.d}}" | drop e, f="g" | keep h',
    {
      kind: "log",
      matchers: [{ name: "app", op: "=", value: "foo" }],
      pipeline: [
        {
          kind: "labelFormat",
          ops: [
            { dst: "a", src: "b", template: false },
            { dst: "c", src: "{{.d}}", template: true },
          ],
        },
        {
          kind: "drop",
          items: [{ name: "e" }, { name: "f", matcher: { name: "f", op: "=", value: "g" } }],
        },
        { kind: "keep", items: [{ name: "h" }] },
      ],
    },
  ],
  [
    '{app="foo"} |= ip("1.2.3.4") | size > 1MiB',
    {
      kind: "log",
      matchers: [{ name: "app", op: "=", value: "foo" }],
      pipeline: [
        { kind: "lineFilter", op: "|=", terms: [{ value: "1.2.3.4", ip: true }] },
        {
          kind: "labelFilter",
          filter: { kind: "bytes", name: "size", op: ">", value: 1024 * 1024 },
        },
      ],
    },
  ],
  ["vector(3)", { kind: "vector", value: 3 }],
  ["-2.5", { kind: "literal", value: -2.5 }],
];

const E = ERR_EMPTY();
function ERR_EMPTY(): string {
  return 'parse error : queries require at least one regexp or equality matcher that does not have an empty-compatible value. For instance, app=~".*" does not meet this requirement, but app=~".+" will';
}

/** Errors, with Loki's wording and the position of the offending token. */
const errors: Case[] = [
  ["", err("parse error at line 1, col 1: syntax error: unexpected $end")],
  ["{}", err(E)],
  ['{app=""}', err(E)],
  ['{app=~".*"}', err(E)],
  ['{app!="foo"}', err(E)],
  ['{app!~"foo"}', err(E)],
  ['{app=~".*", b=""}', err(E)],
  ['count_over_time({a=~".*"}[5m])', err(E)],
  [
    "{app}",
    err("parse error at line 1, col 5: syntax error: unexpected }, expecting = or != or =~ or !~"),
  ],
  [
    '{app="foo"',
    err("parse error at line 1, col 11: syntax error: unexpected $end, expecting , or }"),
  ],
  ['{app="foo}', err("parse error at line 1, col 6: literal not terminated")],
  [
    "{app=foo}",
    err("parse error at line 1, col 6: syntax error: unexpected IDENTIFIER, expecting STRING"),
  ],
  [
    '{app="foo"} |= foo',
    err("parse error at line 1, col 16: syntax error: unexpected IDENTIFIER, expecting STRING"),
  ],
  [
    '{app="foo"} | json |',
    err("parse error at line 1, col 21: syntax error: unexpected $end, expecting IDENTIFIER"),
  ],
  [
    '{app="foo"} |',
    err("parse error at line 1, col 14: syntax error: unexpected $end, expecting IDENTIFIER"),
  ],
  [
    '{app="foo"} | status >',
    err(
      "parse error at line 1, col 23: syntax error: unexpected $end, expecting NUMBER or DURATION or BYTES",
    ),
  ],
  [
    '{app="foo"} | status > "x"',
    err(
      "parse error at line 1, col 24: syntax error: unexpected STRING, expecting NUMBER or DURATION or BYTES",
    ),
  ],
  [
    '{app="foo"} | status =~ 5',
    err("parse error at line 1, col 25: syntax error: unexpected NUMBER, expecting STRING"),
  ],
  ['{app="foo"} [5m]', err("parse error at line 1, col 13: syntax error: unexpected [")],
  [
    '{app="foo"} | unwrap x',
    err("parse error at line 1, col 15: syntax error: unexpected IDENTIFIER"),
  ],
  [
    'rate({app="foo"})',
    err("parse error at line 1, col 17: syntax error: unexpected ), expecting ["),
  ],
  [
    'rate({app="foo"}[5])',
    err("parse error at line 1, col 18: syntax error: unexpected NUMBER, expecting DURATION"),
  ],
  [
    'rate({app="foo"}[5m]',
    err("parse error at line 1, col 21: syntax error: unexpected $end, expecting )"),
  ],
  [
    'rate({app="foo"}[5x])',
    err('parse error at line 1, col 18: syntax error: invalid duration or size "5x"'),
  ],
  [
    'rate({app="foo"}[5m] offset)',
    err("parse error at line 1, col 28: syntax error: unexpected ), expecting DURATION"),
  ],
  ["sum()", err("parse error at line 1, col 5: syntax error: unexpected )")],
  [
    'sum({app="foo"})',
    err(
      "parse error at line 1, col 5: syntax error: unexpected log query in sum, expecting a metric query",
    ),
  ],
  [
    'sum(rate({app="foo"}[5m])) by',
    err("parse error at line 1, col 30: syntax error: unexpected $end, expecting ("),
  ],
  [
    'sum(rate({app="foo"}[5m])) by (1)',
    err("parse error at line 1, col 32: syntax error: unexpected NUMBER, expecting IDENTIFIER"),
  ],
  [
    'foo(rate({app="foo"}[5m]))',
    err("parse error at line 1, col 1: syntax error: unexpected IDENTIFIER"),
  ],
  ['rate({app="foo"}[5m]) +', err("parse error at line 1, col 24: syntax error: unexpected $end")],
  [
    '{app="foo"} + 1',
    err(
      "parse error at line 1, col 13: unexpected type for left leg of binary operation (+): log query",
    ),
  ],
  [
    '1 + {app="foo"}',
    err(
      "parse error at line 1, col 3: unexpected type for right leg of binary operation (+): log query",
    ),
  ],
  [
    '{app="foo"} | regexp "(a"',
    err("parse error at line 1, col 22: error parsing regexp: missing ): (a"),
  ],
  [
    '{app="foo"} | regexp "(a)"',
    err("parse error at line 1, col 22: at least one named capture must be supplied"),
  ],
  [
    '{app="foo"} |~ "(a"',
    err("parse error at line 1, col 16: error parsing regexp: missing ): (a"),
  ],
  ['{app=~"(a"}', err("parse error at line 1, col 7: error parsing regexp: missing ): (a")],
  [
    '{app="foo"} | pattern "<a><b>"',
    err("parse error at line 1, col 23: found consecutive capture '<b>': this would be ambiguous"),
  ],
  [
    '{app="foo"} | pattern "foo"',
    err("parse error at line 1, col 23: at least one capture is required"),
  ],
  [
    '{app="foo"} | line_format "{{.a"',
    err("parse error at line 1, col 27: template: unclosed action"),
  ],
  [
    '{app="foo"} | line_format "{{ nosuch .a }}"',
    err('parse error at line 1, col 27: function "nosuch" not defined'),
  ],
  [
    '{app="foo"} | line_format "{{ range .a }}{{ end }}"',
    err("parse error at line 1, col 27: template: action {{range}} is not supported"),
  ],
  [
    '{app="foo"} | label_format a="{{ if .b }}"',
    err("parse error at line 1, col 30: template: unexpected EOF"),
  ],
  ['{app="foo"} | logfmt --nope', err("parse error at line 1, col 22: invalid logfmt flag --nope")],
  ['{app="foo"} | json a="b["', err('parse error at line 1, col 22: invalid json expression "b["')],
  [
    '{app="foo"} |= ip("nope")',
    err(
      'parse error at line 1, col 19: invalid ip filter "nope": expected an address, a CIDR or a range',
    ),
  ],
  [
    '{app="foo"} |~ ip("1.2.3.4")',
    err("parse error at line 1, col 16: syntax error: ip() is only allowed with |= and !="),
  ],
  ['{app="\\q"}', err("parse error at line 1, col 7: invalid syntax: unknown escape sequence \\q")],
  ["{app=`foo}", err("parse error at line 1, col 6: literal not terminated")],
  ['{app="foo"} @', err('parse error at line 1, col 13: syntax error: unexpected character "@"')],
  [
    '{app="foo"}\n| json\n| @',
    err('parse error at line 3, col 3: syntax error: unexpected character "@"'),
  ],
  [
    'sum_over_time({app="foo"}[5m])',
    err("parse error : invalid aggregation sum_over_time without unwrap"),
  ],
  [
    'avg_over_time({app="foo"}[5m])',
    err("parse error : invalid aggregation avg_over_time without unwrap"),
  ],
  [
    'quantile_over_time(0.9, {app="foo"}[5m])',
    err("parse error : invalid aggregation quantile_over_time without unwrap"),
  ],
  [
    'count_over_time({app="foo"} | unwrap x [5m])',
    err("parse error : invalid aggregation count_over_time with unwrap"),
  ],
  [
    'bytes_rate({app="foo"} | unwrap x [5m])',
    err("parse error : invalid aggregation bytes_rate with unwrap"),
  ],
  [
    'count_over_time({app="foo"}[5m]) by (x)',
    err("parse error : grouping not allowed for count_over_time aggregation"),
  ],
  [
    'bytes_over_time({app="foo"}[5m]) without (x)',
    err("parse error : grouping not allowed for bytes_over_time aggregation"),
  ],
  [
    'quantile_over_time({app="foo"} | unwrap x [5m])',
    err("parse error : parameter required for operation quantile_over_time"),
  ],
  ['topk(rate({app="foo"}[5m]))', err("parse error : parameter required for operation topk")],
  [
    'topk(1.5, rate({app="foo"}[5m]))',
    err("parse error : invalid parameter for operation topk(1.5,: must be a positive integer"),
  ],
  [
    'sum(5, rate({app="foo"}[5m]))',
    err("parse error : unsupported parameter for operation sum(5,"),
  ],
  [
    'sort by (a) (rate({app="foo"}[5m]))',
    err("parse error : grouping not allowed for sort aggregation"),
  ],
  [
    'rate({app="foo"}[5m]) + bool 1',
    err("parse error : bool modifier can only be used on comparison operators"),
  ],
  ["1 > 2", err("parse error : comparisons between scalars must use BOOL modifier")],
  [
    'rate({app="foo"}[5m]) and 1',
    err("parse error : unexpected literal for right leg of logical/set binary operation (and): 1"),
  ],
  [
    'rate({app="foo"}[5m]) or on(a) group_left rate({app="x"}[5m])',
    err("parse error : no grouping allowed for or operation"),
  ],
  [
    'label_replace(rate({app="foo"}[5m]), "1x", "", "a", "")',
    err("parse error : invalid destination label name in label_replace(): 1x"),
  ],
  [
    'label_replace(rate({app="foo"}[5m]), "a", "b")',
    err("parse error at line 1, col 46: syntax error: unexpected ), expecting ,"),
  ],
  ["1e999", err("parse error at line 1, col 1: syntax error: invalid number 1e999")],
  ["((((1))", err("parse error at line 1, col 8: syntax error: unexpected $end, expecting )")],
  [
    '{app="foo"} | json | a="1" or',
    err("parse error at line 1, col 30: syntax error: unexpected $end, expecting IDENTIFIER"),
  ],
];

const table: Case[] = [...canonical.map((q): Case => [q, q]), ...respelled, ...trees, ...errors];

describe("parser table", () => {
  it("has at least 200 cases", () => {
    expect(table.length).toBeGreaterThanOrEqual(200);
  });

  it.each(table)("%s", (query, expected) => {
    if (typeof expected === "object" && "error" in expected) {
      let caught: unknown;
      try {
        parseExpr(query);
      } catch (e) {
        caught = e;
      }
      expect(caught).toBeInstanceOf(ParseError);
      expect((caught as ParseError).message).toBe(expected.error);
      return;
    }
    const tree = parseExpr(query);
    if (typeof expected === "string") expect(printExpr(tree)).toBe(expected);
    else expect(tree).toEqual(expected);
    // Printing then parsing gives the same tree.
    expect(parseExpr(printExpr(tree))).toEqual(tree);
  });
});

describe("limits", () => {
  it("refuses a query above the size cap with a typed error", () => {
    const q = `{app="${"x".repeat(200_000)}"}`;
    expect(() => parseExpr(q)).toThrow(ParseError);
    expect(() => parseExpr(q)).toThrow(/query too large/);
    expect(parseExpr(q, { maxQueryLength: 300_000 }).kind).toBe("log");
  });

  it("refuses nesting deeper than the cap instead of overflowing the stack", () => {
    const q = "(".repeat(5000) + "1" + ")".repeat(5000);
    expect(() => parseExpr(q)).toThrow(/nested deeper than 128 levels/);
  });

  const chain = (n: number, term = "1", op = " + "): string =>
    Array.from({ length: n }, () => term).join(op);
  const filters = (n: number, sep: string): string =>
    `{app="foo"} | ${Array.from({ length: n }, (_, i) => `a${i % 10}="${i}"`).join(sep)}`;

  /** Trees deeper than the bound, however they get deep: each is refused with its position. */
  const tooDeep: [name: string, query: string, error: string][] = [
    // 80 KB, under the length cap: a RangeError (500) before the bound.
    [
      "20,000-term sum",
      chain(20_000),
      "parse error at line 1, col 511: syntax error: query nested deeper than 128 levels",
    ],
    [
      "129-term sum",
      chain(129),
      "parse error at line 1, col 511: syntax error: query nested deeper than 128 levels",
    ],
    [
      "right-associative powers",
      chain(200, "2", " ^ "),
      "parse error at line 1, col 517: syntax error: query nested deeper than 128 levels",
    ],
    [
      "label filters joined by ,",
      filters(2_000, ", "),
      "parse error at line 1, col 1183: syntax error: query nested deeper than 128 levels",
    ],
    [
      "label filters joined by and",
      filters(200, " and "),
      "parse error at line 1, col 1565: syntax error: query nested deeper than 128 levels",
    ],
    [
      "label filters joined by or",
      filters(200, " or "),
      "parse error at line 1, col 1438: syntax error: query nested deeper than 128 levels",
    ],
    [
      "nested sums",
      `${"sum(".repeat(130)}rate({a="b"}[1m])${")".repeat(130)}`,
      "parse error at line 1, col 517: syntax error: query nested deeper than 128 levels",
    ],
    [
      "range aggregations in a chain",
      chain(200, 'rate({a="b"}[1m])'),
      "parse error at line 1, col 2519: syntax error: query nested deeper than 128 levels",
    ],
  ];

  it.each(tooDeep)("refuses a tree deeper than the bound: %s", (_name, query, error) => {
    let caught: unknown;
    try {
      parseExpr(query);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(ParseError);
    expect((caught as ParseError).message).toBe(error);
  });

  it.each([
    ["128-term sum", chain(128)],
    ["128 levels of powers", chain(128, "2", " ^ ")],
    // 126 filters: 126 levels, with the stage and the query 128.
    ["126 label filters", filters(126, ", ")],
    [
      "64 range aggregations in two chains",
      `${chain(32, 'rate({a="b"}[1m])')} / (${chain(32, 'rate({a="c"}[1m])')})`,
    ],
  ])("parses, prints and re-parses a query at the bound: %s", (_name, query) => {
    const tree = parseExpr(query);
    expect(parseExpr(printExpr(tree))).toEqual(tree);
  });

  it("refuses more nodes than the bound, with a typed error and a position", () => {
    const q = `{app="foo"}${' |= "x"'.repeat(10_000)}`;
    let caught: unknown;
    try {
      parseExpr(q);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(ParseError);
    expect((caught as ParseError).code).toBe("query_too_large");
    expect((caught as ParseError).message).toBe(
      "parse error at line 1, col 70006: query too large: more than 10000 expressions, matchers and stages",
    );
    expect(parseExpr(q, { maxNodes: 10_002 }).kind).toBe("log");
    expect(() => parseExpr(`{app="foo"}${' |= "x"'.repeat(9_998)}`)).not.toThrow();
  });

  it("reports line and column on later lines", () => {
    try {
      parseExpr('sum(\n  rate({app="foo"}[5m]\n)) by (x');
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ParseError);
      expect((e as ParseError).line).toBe(3);
      expect((e as ParseError).col).toBe(9);
    }
  });
});
