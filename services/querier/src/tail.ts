/**
 * A tail (Loki's `pkg/querier/tail.go`, frames of `pkg/loghttp/tail.go`): first the most
 * recent `limit` lines since `start`, oldest first, then every new line the ingesters push
 * as it is appended, held `delay_for` seconds so that lines of several ingesters come out
 * in timestamp order. Frames are Loki's: `{"streams":[...],"dropped_entries":[...]}`.
 *
 * Why nothing is lost between the history and the live lines: the ingesters hold the tail
 * (`IngesterTail.held`) before the history is read, so a line is either appended before
 * (and the history, store and ingesters merged, holds it) or after (and it is pushed);
 * one appended in between is both, and is sent once: live lines equal to a history line
 * are dropped ({@link TailSession.history}). A flush changes nothing: lines are pushed at
 * append, not read back from heads.
 *
 * Why memory is bounded: lines waiting for their `delay_for` are at most
 * `maxPendingEntries` (past it the oldest go out early); what the socket holds unsent is at
 * most `maxBufferedBytes` plus one frame of at most {@link MAX_ENTRIES_PER_FRAME} lines:
 * past it lines are dropped and listed in the next frame's `dropped_entries` (at most
 * {@link MAX_DROPPED_ENTRIES}, Loki's caps), and a client that stays blocked
 * `slowReaderMs` is closed ({@link TAIL_CLOSE}).
 */
import type { IngesterStream } from "@sieve/proto";
import { categorize, type StreamValue } from "./marshal.js";
import { ParamError, goParseInt, parseBounds, parseLimit, type Form } from "./params.js";

/** Loki's `maxDelayForInTailing`: `delay_for` is at most 5 (seconds). */
export const MAX_DELAY_FOR_S = 5;
/** Loki's `maxEntriesPerTailResponse`: lines per frame. */
export const MAX_ENTRIES_PER_FRAME = 100;
/** Loki's `maxDroppedEntriesPerTailResponse`: dropped lines listed per frame (more are not listed). */
export const MAX_DROPPED_ENTRIES = 1000;

/**
 * Why a tail ends, with the WebSocket close code and words the client reads. Loki ends
 * every tail from the server's side with 1011 (`CloseInternalServerErr`) and the error's
 * text; these are its texts where it has one.
 */
export const TAIL_CLOSE = {
  /** Loki's, from the querier's `checkTailRequestLimit` (the numbers are appended). */
  too_many_tails: { code: 1011, reason: "max concurrent tail requests limit exceeded" },
  /** Loki's, at `tail_max_duration`. */
  max_duration: { code: 1011, reason: "reached tail max duration limit" },
  /** Loki's, when the tail has no ingester left. */
  ingesters_closed: { code: 1011, reason: "all ingesters closed the connection" },
  /**
   * Sieve's words: Loki has no slow-reader close of its own (its ingesters end a tail whose
   * querier is blocked 15 s); Sieve ends the client's tail after the same time.
   */
  slow_reader: {
    code: 1011,
    reason: "the client did not read the tail: closed after being blocked",
  },
  /**
   * The server is stopping (Sieve's words): 1001, "going away" (RFC 6455, 7.4.1), so a
   * client knows to reconnect rather than report an error.
   */
  shutdown: { code: 1001, reason: "the server is shutting down" },
  /** The history query or the ingesters failed: the error's text follows. */
  error: { code: 1011, reason: "" },
} as const;

/** A reason of {@link TAIL_CLOSE}. */
export type TailCloseReason = keyof typeof TAIL_CLOSE;

/** Loki's refusal of one tail too many (`count` includes the one refused). */
export function tooManyTails(count: number, limit: number): string {
  return `${TAIL_CLOSE.too_many_tails.reason}, count > limit (${count} > ${limit})`;
}

/** A tail request's parameters (Loki's `ParseTailQuery`). */
export interface TailQuery {
  readonly query: string;
  /** Unix ns; default `now - 1h`. */
  readonly start: bigint;
  readonly limit: number;
  readonly delayForS: number;
}

/** Parses a tail's form as Loki does, with its words (a {@link ParamError}, 400). */
export function parseTailQuery(form: Form, nowNs: bigint): TailQuery {
  const query = form.get("query") ?? "";
  const limit = parseLimit(form);
  const { start } = parseBounds(form, nowNs);
  const raw = form.get("delay_for") ?? "";
  const delay = raw === "" ? 0n : goParseInt(raw, "Atoi");
  // Loki reads it into a uint32: a negative value wraps past the maximum.
  if (delay < 0n || delay > BigInt(MAX_DELAY_FOR_S)) {
    throw new ParamError(`delay_for can't be greater than ${MAX_DELAY_FOR_S}`);
  }
  return { query, start, limit, delayForS: Number(delay) };
}

/** What a session writes to: the server side of a `ws` WebSocket, narrowed. */
export interface TailSocket {
  /** Bytes queued and not yet written to the network. */
  readonly bufferedAmount: number;
  send(data: string): void;
  close(code: number, reason: string): void;
}

/** How a session behaves. */
export interface TailSessionOptions {
  /** Lines are held until `timestamp + delayForNs` is past (Loki's `delay_for`). */
  readonly delayForNs: bigint;
  /** Loki's `categorize-labels` encoding flag. */
  readonly categorize: boolean;
  /** Unsent bytes past which the socket is blocked: lines are dropped, and listed. */
  readonly maxBufferedBytes: number;
  /** Lines held for their delay, past which the oldest go out early. */
  readonly maxPendingEntries: number;
  /** A socket blocked this long is closed (`slow_reader`). */
  readonly slowReaderMs: number;
  /** Unix ns of now. */
  readonly nowNs: () => bigint;
  /** Monotonic ms (blocked time). */
  readonly nowMs: () => number;
  /** Told once when the session closes the socket, with why and the words sent. */
  readonly onClose?: (reason: TailCloseReason, text: string) => void;
  /** Told of each line dropped (the client did not read). */
  readonly onDropped?: () => void;
}

/** One line of a tail, in the frame's shape. */
interface TailLine {
  readonly ts: bigint;
  /** The frame's `stream`: every label, or the stream's own when categorized; sorted. */
  readonly stream: Record<string, string>;
  readonly streamKey: string;
  readonly value: StreamValue;
}

/** A frame's dropped entry: Loki's `{"timestamp":"<ns>","labels":{...}}`. */
interface Dropped {
  readonly timestamp: string;
  readonly labels: Record<string, string>;
}

function sorted(labels: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(labels).sort()) out[k] = labels[k]!;
  return out;
}

function lineKey(l: TailLine): string {
  return `${l.streamKey}\u0000${JSON.stringify(l.value)}`;
}

/** A line of an ingester's stream, as the frame shows it. */
function fromIngester(s: IngesterStream, categorized: boolean): TailLine[] {
  return s.entries.map((e) => {
    const labels = e.labels ?? { ...s.labelMap, ...e.structuredMetadata };
    const ts = e.timestamp.toString();
    if (!categorized) {
      const stream = sorted(labels);
      return { ts: e.timestamp, stream, streamKey: JSON.stringify(stream), value: [ts, e.line] };
    }
    const c = categorize({
      timestamp: e.timestamp,
      line: e.line,
      labels,
      stream: s.labelMap,
      metadata: e.structuredMetadata,
    });
    const extra: { structuredMetadata?: Record<string, string>; parsed?: Record<string, string> } =
      {};
    if (Object.keys(c.structuredMetadata).length > 0)
      extra.structuredMetadata = c.structuredMetadata;
    if (Object.keys(c.parsed).length > 0) extra.parsed = c.parsed;
    return {
      ts: e.timestamp,
      stream: c.stream,
      streamKey: JSON.stringify(c.stream),
      value: [ts, e.line, extra],
    };
  });
}

/**
 * The lines of a query answer's `streams` result (Loki's JSON, as `query_range` answers
 * it), oldest first; equal timestamps keep the answer's order.
 */
export function historyLines(
  result: readonly { stream: Record<string, string>; values: StreamValue[] }[],
): TailLine[] {
  const lines: TailLine[] = [];
  for (const s of result) {
    const stream = sorted(s.stream);
    const streamKey = JSON.stringify(stream);
    for (const value of s.values) lines.push({ ts: BigInt(value[0]), stream, streamKey, value });
  }
  return stableSortByTime(lines);
}

function stableSortByTime(lines: TailLine[]): TailLine[] {
  return lines
    .map((l, i) => ({ l, i }))
    .sort((a, b) => (a.l.ts < b.l.ts ? -1 : a.l.ts > b.l.ts ? 1 : a.i - b.i))
    .map((x) => x.l);
}

/** Consecutive lines of one stream share a stream object: the frame keeps the lines' order. */
function toFrameStreams(
  lines: readonly TailLine[],
): { stream: Record<string, string>; values: StreamValue[] }[] {
  const out: { stream: Record<string, string>; values: StreamValue[] }[] = [];
  let lastKey: string | undefined;
  for (const l of lines) {
    if (l.streamKey === lastKey) out[out.length - 1]!.values.push(l.value);
    else out.push({ stream: l.stream, values: [l.value] });
    lastKey = l.streamKey;
  }
  return out;
}

/**
 * One client's tail: its history, then the lines the ingesters push, each in frames of at
 * most {@link MAX_ENTRIES_PER_FRAME} lines, within the bounds of the module's comment.
 * The owner calls {@link live} from the ingesters' sink, {@link history} once, {@link check}
 * periodically (the ping period), and {@link close} when the socket goes.
 */
export class TailSession {
  /** Live lines waiting: for the history to go first, or for their delay. */
  private pending: TailLine[] = [];
  /** Lines of the history, not to be sent again live; undefined until the history is in. */
  private sent: Set<string> | undefined;
  private dropped: Dropped[] = [];
  /** Lines dropped since the last frame, listed or not. */
  droppedTotal = 0;
  private blockedSince: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private closed = false;

  constructor(
    private readonly socket: TailSocket,
    private readonly options: TailSessionOptions,
  ) {}

  /** Whether the session ended (closed by either side). */
  get ended(): boolean {
    return this.closed;
  }

  /** Lines the ingesters pushed: held for the history and their delay, then sent. */
  live(stream: IngesterStream): void {
    if (this.closed) return;
    for (const l of fromIngester(stream, this.options.categorize)) this.pending.push(l);
    this.schedule();
  }

  /** The history's lines, oldest first: sent now, before any live line. */
  history(lines: readonly TailLine[]): void {
    if (this.closed) return;
    this.sent = new Set(lines.map(lineKey));
    this.emit(lines);
    this.schedule();
  }

  /**
   * The periodic check: a socket blocked past `slowReaderMs` is closed (even when no line
   * comes to notice it). Answers whether the socket is writable now (then a ping may go).
   */
  check(): boolean {
    if (this.closed) return false;
    if (this.socket.bufferedAmount <= this.options.maxBufferedBytes) {
      this.blockedSince = undefined;
      return true;
    }
    this.blocked();
    return false;
  }

  /** Closes the socket with `reason` (once; `text` instead of its words), and stops the timers. */
  close(reason: TailCloseReason, text: string = TAIL_CLOSE[reason].reason): void {
    if (this.closed) return;
    this.stop();
    const { code } = TAIL_CLOSE[reason];
    // A close reason is at most 123 bytes (RFC 6455, 5.5): a long error is cut.
    this.socket.close(code, truncateUtf8(text, 123));
    this.options.onClose?.(reason, text);
  }

  /** The socket went away: stop without writing. */
  stop(): void {
    this.closed = true;
    this.pending = [];
    this.sent = undefined;
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.immediate !== undefined) clearImmediate(this.immediate);
  }

  private schedule(): void {
    if (this.closed || this.sent === undefined || this.immediate !== undefined) return;
    this.immediate = setImmediate(() => {
      this.immediate = undefined;
      this.release();
    });
  }

  /** Sends the pending lines whose delay is past, in timestamp order. */
  private release(): void {
    if (this.closed || this.sent === undefined) return;
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    const sent = this.sent;
    const lines = stableSortByTime(this.pending.filter((l) => !sent.has(lineKey(l))));
    const dueBy = this.options.nowNs() - this.options.delayForNs;
    let n = 0;
    while (n < lines.length && lines[n]!.ts <= dueBy) n++;
    // Past the bound, the oldest go out before their delay rather than be held.
    n = Math.max(n, lines.length - this.options.maxPendingEntries);
    this.emit(lines.slice(0, n));
    this.pending = lines.slice(n);
    const next = this.pending[0];
    if (next !== undefined && !this.ended) {
      const waitNs = next.ts + this.options.delayForNs - this.options.nowNs();
      const waitMs = Math.min(1000, Math.max(1, Number(waitNs / 1_000_000n) + 1));
      this.timer = setTimeout(() => {
        this.release();
      }, waitMs);
    }
  }

  /** Writes `lines` in frames, or drops them (listed) while the socket is blocked. */
  private emit(lines: readonly TailLine[]): void {
    for (let at = 0; at < lines.length && !this.closed; at += MAX_ENTRIES_PER_FRAME) {
      const chunk = lines.slice(at, at + MAX_ENTRIES_PER_FRAME);
      if (this.socket.bufferedAmount > this.options.maxBufferedBytes) {
        for (const l of chunk) this.drop(l);
        this.blocked();
        continue;
      }
      this.blockedSince = undefined;
      const frame: Record<string, unknown> = { streams: toFrameStreams(chunk) };
      if (this.dropped.length > 0) frame.dropped_entries = this.dropped;
      this.socket.send(JSON.stringify(frame));
      this.dropped = [];
      this.droppedTotal = 0;
    }
  }

  private drop(l: TailLine): void {
    this.droppedTotal++;
    this.options.onDropped?.();
    if (this.dropped.length < MAX_DROPPED_ENTRIES) {
      this.dropped.push({ timestamp: l.ts.toString(), labels: l.stream });
    }
  }

  private blocked(): void {
    const now = this.options.nowMs();
    this.blockedSince ??= now;
    if (now - this.blockedSince >= this.options.slowReaderMs) this.close("slow_reader");
  }
}

/** `text` cut to at most `max` UTF-8 bytes, on a character boundary. */
function truncateUtf8(text: string, max: number): string {
  if (Buffer.byteLength(text) <= max) return text;
  let out = "";
  for (const ch of text) {
    if (Buffer.byteLength(out + ch) > max) break;
    out += ch;
  }
  return out;
}

export type { TailLine };
