import type { IngesterStream } from "@sieve/proto";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import {
  MAX_DROPPED_ENTRIES,
  MAX_ENTRIES_PER_FRAME,
  TailSession,
  historyLines,
  parseTailQuery,
  tooManyTails,
  type TailSessionOptions,
  type TailSocket,
} from "./tail.js";

const S = 1_000_000_000n;
const NOW = 1_700_000_000n * S;

// Loki's ParseTailQuery (pkg/loghttp/tail.go): limit 100, start now - 1h, delay_for ≤ 5.
const params: [Record<string, string>, ReturnType<typeof parseTailQuery> | string][] = [
  [{ query: '{a="b"}' }, { query: '{a="b"}', limit: 100, start: NOW - 3600n * S, delayForS: 0 }],
  [
    { query: '{a="b"}', limit: "7", start: "1699999000", delay_for: "5" },
    { query: '{a="b"}', limit: 7, start: 1_699_999_000n * S, delayForS: 5 },
  ],
  [{ query: '{a="b"}', delay_for: "6" }, "delay_for can't be greater than 5"],
  // Loki reads it into a uint32: -1 wraps past 5.
  [{ query: '{a="b"}', delay_for: "-1" }, "delay_for can't be greater than 5"],
  [{ query: '{a="b"}', delay_for: "x" }, 'strconv.Atoi: parsing "x": invalid syntax'],
  [{ query: '{a="b"}', limit: "0" }, "limit must be a positive value"],
  [{ query: '{a="b"}', start: "x" }, 'strconv.ParseInt: parsing "x": invalid syntax'],
];

describe("parseTailQuery", () => {
  test.each(params)("%j", (form, want) => {
    const run = () => parseTailQuery(new URLSearchParams(form), NOW);
    if (typeof want === "string") expect(run).toThrow(want);
    else expect(run()).toEqual(want);
  });

  test("the limit refusal is Loki's", () => {
    expect(tooManyTails(11, 10)).toBe(
      "max concurrent tail requests limit exceeded, count > limit (11 > 10)",
    );
  });
});

/** A socket that keeps what is sent; `bufferedAmount` is set by the test. */
class MemorySocket implements TailSocket {
  bufferedAmount = 0;
  readonly frames: {
    streams: { stream: Record<string, string>; values: string[][] }[];
    dropped_entries?: { timestamp: string; labels: Record<string, string> }[];
  }[] = [];
  closedWith: { code: number; reason: string } | undefined;
  send(data: string): void {
    this.frames.push(JSON.parse(data) as (typeof this.frames)[number]);
  }
  close(code: number, reason: string): void {
    this.closedWith = { code, reason };
  }
  lines(): string[] {
    return this.frames.flatMap((f) => f.streams.flatMap((s) => s.values.map((v) => v[1]!)));
  }
}

function stream(pod: string, entries: [bigint, string][]): IngesterStream {
  return {
    labels: `{pod="${pod}"}`,
    labelMap: { pod },
    fingerprint: 1n,
    entries: entries.map(([timestamp, line]) => ({ timestamp, line, structuredMetadata: {} })),
  };
}

describe("TailSession", () => {
  let now: bigint;
  let ms: number;
  const options = (over: Partial<TailSessionOptions> = {}): TailSessionOptions => ({
    delayForNs: 0n,
    categorize: false,
    maxBufferedBytes: 1000,
    maxPendingEntries: 10_000,
    slowReaderMs: 15_000,
    nowNs: () => now,
    nowMs: () => ms,
    ...over,
  });
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setImmediate", "clearImmediate"] });
    now = NOW;
    ms = 0;
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  test("sends the history first, then live lines, and a live line equal to a history line once", () => {
    const socket = new MemorySocket();
    const session = new TailSession(socket, options());
    // Pushed while the history was read: held until it is sent.
    session.live(
      stream("a", [
        [NOW - 2n, "h2"],
        [NOW - 1n, "new"],
      ]),
    );
    vi.runAllTimers();
    expect(socket.frames).toEqual([]);
    session.history(
      historyLines([
        {
          stream: { pod: "a" },
          values: [
            [String(NOW - 2n), "h2"],
            [String(NOW - 3n), "h1"],
          ],
        },
      ]),
    );
    vi.runAllTimers();
    expect(socket.lines()).toEqual(["h1", "h2", "new"]);
    expect(socket.frames[0]).toEqual({
      streams: [
        {
          stream: { pod: "a" },
          values: [
            [String(NOW - 3n), "h1"],
            [String(NOW - 2n), "h2"],
          ],
        },
      ],
    });
  });

  test("holds lines for delay_for and sends them in timestamp order across streams", () => {
    const socket = new MemorySocket();
    const session = new TailSession(socket, options({ delayForNs: 2n * S }));
    session.history([]);
    session.live(stream("b", [[NOW - 1n * S, "b later"]]));
    session.live(stream("a", [[NOW - 3n * S, "a due"]]));
    session.live(stream("a", [[NOW - 2n * S - 1n, "a earlier"]]));
    vi.advanceTimersByTime(0);
    expect(socket.lines()).toEqual(["a due", "a earlier"]);
    now = NOW + 1n * S;
    vi.advanceTimersByTime(1000);
    expect(socket.lines()).toEqual(["a due", "a earlier", "b later"]);
    // Consecutive lines of one stream share a stream object; the lines keep their order.
    expect(socket.frames[0]!.streams).toHaveLength(1);
  });

  test("frames hold at most 100 lines", () => {
    const socket = new MemorySocket();
    const session = new TailSession(socket, options({ maxBufferedBytes: Infinity }));
    session.history([]);
    const entries = Array.from({ length: 250 }, (_, i): [bigint, string] => [
      NOW - 1000n + BigInt(i),
      `l${i}`,
    ]);
    session.live(stream("a", entries));
    vi.runAllTimers();
    expect(socket.frames.map((f) => f.streams[0]!.values.length)).toEqual([
      MAX_ENTRIES_PER_FRAME,
      MAX_ENTRIES_PER_FRAME,
      50,
    ]);
    expect(socket.lines()).toEqual(entries.map((e) => e[1]));
  });

  test("a blocked socket: lines dropped and listed (at most 1000), then closed as a slow reader", () => {
    const socket = new MemorySocket();
    let dropped = 0;
    const closes: string[] = [];
    const session = new TailSession(
      socket,
      options({ slowReaderMs: 15_000, onDropped: () => dropped++, onClose: (r) => closes.push(r) }),
    );
    session.history([]);
    socket.bufferedAmount = 5000;
    const many = Array.from({ length: 1500 }, (_, i): [bigint, string] => [
      NOW - 5000n + BigInt(i),
      `x${i}`,
    ]);
    session.live(stream("a", many));
    vi.runAllTimers();
    expect(socket.frames).toEqual([]);
    expect(dropped).toBe(1500);
    // The reader catches up: the next frame lists what was dropped, as Loki's does.
    socket.bufferedAmount = 0;
    session.live(stream("a", [[NOW, "after"]]));
    vi.runAllTimers();
    expect(socket.lines()).toEqual(["after"]);
    const listed = socket.frames[0]!.dropped_entries!;
    expect(listed).toHaveLength(MAX_DROPPED_ENTRIES);
    expect(listed[0]).toEqual({ timestamp: String(NOW - 5000n), labels: { pod: "a" } });
    // Blocked again, for longer than slowReaderMs: closed with 1011 and the reason.
    socket.bufferedAmount = 5000;
    expect(session.check()).toBe(false);
    ms = 14_999;
    expect(session.check()).toBe(false);
    expect(socket.closedWith).toBeUndefined();
    ms = 15_000;
    session.check();
    expect(socket.closedWith).toEqual({
      code: 1011,
      reason: "the client did not read the tail: closed after being blocked",
    });
    expect(closes).toEqual(["slow_reader"]);
    // Nothing more is sent or held once closed.
    socket.bufferedAmount = 0;
    session.live(stream("a", [[NOW + 1n, "late"]]));
    vi.runAllTimers();
    expect(socket.lines()).toEqual(["after"]);
  });

  test("close reasons are cut to 123 bytes (RFC 6455)", () => {
    const socket = new MemorySocket();
    const session = new TailSession(socket, options());
    session.close("error", "é".repeat(100));
    expect(Buffer.byteLength(socket.closedWith!.reason)).toBeLessThanOrEqual(123);
    expect(socket.closedWith!.code).toBe(1011);
  });

  test("categorize-labels: stream labels, then metadata and parsed labels apart", () => {
    const socket = new MemorySocket();
    const session = new TailSession(socket, options({ categorize: true }));
    session.history([]);
    session.live({
      labels: '{pod="a"}',
      labelMap: { pod: "a" },
      fingerprint: 1n,
      entries: [
        {
          timestamp: NOW,
          line: "l",
          structuredMetadata: { trace_id: "t" },
          labels: { pod: "a", trace_id: "t", level: "info" },
        },
      ],
    });
    vi.runAllTimers();
    expect(socket.frames[0]!.streams).toEqual([
      {
        stream: { pod: "a" },
        values: [
          [String(NOW), "l", { structuredMetadata: { trace_id: "t" }, parsed: { level: "info" } }],
        ],
      },
    ]);
  });
});
