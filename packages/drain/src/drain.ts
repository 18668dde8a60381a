/**
 * Drain: online log parsing with a fixed-depth tree (He, Zhu, Zheng, Lyu: "Drain: An Online
 * Log Parsing Approach with Fixed Depth Tree", ICWS 2017), as Loki's pattern ingester runs
 * it (`pkg/pattern/drain/drain.go`), one instance per stream, with its defaults.
 *
 * A line's tokens go down the tree: first by level and token count, then by its first
 * tokens (at most `maxDepth - 2` of them), a token with a digit always down the `<_>` branch
 * and a node with `maxChildren` children sending new tokens there too. The leaf holds
 * clusters; the line joins the most similar one (equal tokens over all tokens, placeholders
 * not counted) if that is at least `similarity`, and the cluster's template then has `<_>`
 * wherever the two differ; otherwise the line starts a new cluster.
 *
 * Memory is bounded per instance: at most `maxClusters` clusters (the least recently
 * matched is evicted), each with at most `maxBuckets` time buckets of `bucketMs` and at most
 * `maxTokens` tokens of lines at most `maxLineLength` long; tree nodes left by evicted
 * clusters are pruned once they pass a bound proportional to `maxClusters`.
 * {@link Drain.bytes} estimates what an instance holds.
 */
import { Buffer } from "node:buffer";
import { PLACEHOLDER, Tokenizer } from "./tokenize.js";

// A module-local copy for the hot loops (an imported binding is a getter once bundled).
const PH = PLACEHOLDER;
import type { LogFormat, SkipReason } from "./tokenize.js";

/** How Drain learns and what it keeps. Loki's defaults in {@link DEFAULT_DRAIN_OPTIONS}. */
export interface DrainOptions {
  /** Tree depth: lines descend by their first `maxDepth - 2` tokens (Loki: 30). */
  readonly maxDepth: number;
  /** Least similarity (equal tokens / tokens) for a line to join a cluster (Loki: 0.3). */
  readonly similarity: number;
  /** Children of a tree node before new tokens share its `<_>` child (Loki: 15). */
  readonly maxChildren: number;
  /** Clusters kept; past it the least recently matched is evicted (Loki: 300). */
  readonly maxClusters: number;
  /** Longer lines are skipped, in UTF-16 code units (Loki: 3000 bytes). */
  readonly maxLineLength: number;
  /** Lines with fewer tokens are skipped (Loki: 4). */
  readonly minTokens: number;
  /** Lines with more tokens are skipped (Loki: 80). */
  readonly maxTokens: number;
  /** Width of a sample bucket, in ms (Loki: 10 s). */
  readonly bucketMs: number;
  /** Buckets one cluster keeps, the newest (3 h of 10 s by default, Loki's retention). */
  readonly maxBuckets: number;
  /**
   * Past this share of evictions to lines learned, learning pauses for `pauseMs` (Loki:
   * 0.25 and 10 minutes): lines that never repeat (ids in every position) would otherwise
   * each make a cluster and evict one, at ten times the cost of a match.
   */
  readonly maxEvictionRatio: number;
  /** How long learning pauses, in ms of the clock `train` is given. */
  readonly pauseMs: number;
}

/** Loki's pattern ingester's settings (drain.go `DefaultConfig`, 3 h of 10 s samples). */
export const DEFAULT_DRAIN_OPTIONS: DrainOptions = {
  maxDepth: 30,
  similarity: 0.3,
  maxChildren: 15,
  maxClusters: 300,
  maxLineLength: 3000,
  minTokens: 4,
  maxTokens: 80,
  bucketMs: 10_000,
  maxBuckets: 1080,
  maxEvictionRatio: 0.25,
  pauseMs: 10 * 60_000,
};

/** One pattern: its template, its level, and how many lines matched it in each bucket. */
export class Cluster {
  /** Bucket numbers (time / bucketMs), ascending, and the lines counted in each. */
  readonly buckets: number[] = [];
  readonly counts: number[] = [];
  /** Lines it holds over its kept buckets. */
  size = 0;
  /** Set when evicted or pruned: the tree drops it lazily. */
  dead = false;
  /** When it last matched a line, in lines learned by its Drain (for eviction). */
  lastUsed = 0;
  /** The joined pattern, until the template changes. */
  pattern: string | undefined = undefined;
  /** Estimated bytes held. */
  bytes: number;

  constructor(
    readonly id: number,
    readonly level: string,
    readonly tokens: string[],
    readonly gaps: number[] | undefined,
  ) {
    let b = CLUSTER_BYTES + tokens.length * 8 + (gaps?.length ?? 0) * 8;
    for (const t of tokens) b += STRING_BYTES + t.length * 2;
    this.bytes = b;
  }

  /** Counts a line in bucket `b`; returns the bytes added. Keeps at most `maxBuckets`. */
  add(b: number, maxBuckets: number): number {
    const buckets = this.buckets;
    const last = buckets.length - 1;
    this.size++;
    if (last >= 0 && buckets[last] === b) {
      this.counts[last]!++;
      return 0;
    }
    if (last < 0 || buckets[last]! < b) {
      buckets.push(b);
      this.counts.push(1);
    } else {
      // Out of order: find its place from the end (entries mostly arrive in order).
      let i = last;
      while (i >= 0 && buckets[i]! > b) i--;
      if (i >= 0 && buckets[i] === b) {
        this.counts[i]!++;
        return 0;
      }
      buckets.splice(i + 1, 0, b);
      this.counts.splice(i + 1, 0, 1);
    }
    if (buckets.length > maxBuckets) {
      buckets.shift();
      this.size -= this.counts.shift()!;
      return 0;
    }
    this.bytes += BUCKET_BYTES;
    return BUCKET_BYTES;
  }

  /** Drops buckets before bucket `first`; returns the bytes freed. */
  dropBefore(first: number): number {
    let n = 0;
    while (n < this.buckets.length && this.buckets[n]! < first) n++;
    if (n === 0) return 0;
    for (let i = 0; i < n; i++) this.size -= this.counts[i]!;
    this.buckets.splice(0, n);
    this.counts.splice(0, n);
    this.bytes -= n * BUCKET_BYTES;
    return n * BUCKET_BYTES;
  }
}

// Estimates of V8's sizes (64-bit, pointer compression), calibrated against the heap
// (node --expose-gc, heapUsed after gc): 16 streams of lines without templates (300
// clusters, 7,337 nodes each) held 25.2 MB for 26.0 estimated; 200 streams of one
// template over 300 buckets held 2.63 MB for 2.69 estimated.
const CLUSTER_BYTES = 160;
const STRING_BYTES = 16;
const BUCKET_BYTES = 32;
const NODE_BYTES = 170;

class TreeNode {
  children: Map<string, TreeNode> | undefined = undefined;
  clusters: Cluster[] | undefined = undefined;
}

/**
 * A copy of `s` that does not hold the line it was sliced from (V8 keeps a slice of 13 or
 * more characters as a view of its parent): a cluster outlives its first line by hours.
 */
function detach(s: string): string {
  return s.length < 13 ? s : Buffer.from(s, "utf8").toString("utf8");
}

function hasDigit(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 48 && c <= 57) return true;
    if (c >= 128 && /\p{N}/u.test(s[i]!)) return true;
  }
  return false;
}

/** Counts of what training did, for metrics. */
export interface DrainStats {
  /** Clusters created. */
  created: number;
  /** Clusters evicted (over `maxClusters`). */
  evicted: number;
  /** Clusters removed by {@link Drain.prune} (no bucket left). */
  pruned: number;
}

/** Drain over one stream's lines. See the file comment. */
export class Drain {
  readonly options: DrainOptions;
  private readonly tokenizer: Tokenizer;
  /** First layer: by level, then by token count (an array: no string key to build a line). */
  private readonly root = new Map<string, (TreeNode | undefined)[]>();
  /**
   * Live clusters, oldest first. Recency is a counter on each cluster, and eviction scans
   * for the least recent: moving a cluster to the end of a Map on every line cost two Map
   * operations a line, an eviction (rare: see `maxEvictionRatio`) costs one scan.
   */
  private readonly lru = new Map<number, Cluster>();
  private clock = 0;
  /** Whether the last best match fits the line as is (no template change): set by bestMatch. */
  private fits = false;
  private nextId = 1;
  private nodes = 0;
  /** Beyond this many nodes the tree is pruned of branches without a live cluster. */
  private readonly maxNodes: number;
  private clusterBytes = 0;
  /** Lines learned and clusters evicted since the last pause, for `maxEvictionRatio`. */
  private learned = 0;
  private evictedSince = 0;
  /** Learning is paused until then (ms of the clock `train` is given); 0: not paused. */
  private pausedUntil = 0;
  readonly stats: DrainStats = { created: 0, evicted: 0, pruned: 0 };

  constructor(
    readonly format: LogFormat,
    options: Partial<DrainOptions> = {},
  ) {
    this.options = { ...DEFAULT_DRAIN_OPTIONS, ...options };
    if (this.options.maxDepth < 3) throw new RangeError("maxDepth must be at least 3");
    this.tokenizer = new Tokenizer(format, this.options);
    this.maxNodes = 2 * this.options.maxClusters * (this.options.maxDepth - 1) + 64;
  }

  /** Clusters held. */
  get size(): number {
    return this.lru.size;
  }

  /** Estimated bytes held: clusters (tokens and buckets) and tree nodes. */
  get bytes(): number {
    return this.clusterBytes + this.nodes * NODE_BYTES;
  }

  /** Live clusters, oldest first. */
  clusters(): IterableIterator<Cluster> {
    return this.lru.values();
  }

  /** Whether learning is paused now (see `maxEvictionRatio`). */
  paused(nowMs: number): boolean {
    return this.pausedUntil !== 0 && nowMs < this.pausedUntil;
  }

  /**
   * Learns one line of `level` at `timeMs`: the cluster it joined or started, or why it was
   * skipped. `nowMs` is the clock of the pause (default: the line's time).
   */
  train(line: string, timeMs: number, level: string, nowMs = timeMs): Cluster | SkipReason {
    const o = this.options;
    if (this.pausedUntil !== 0) {
      if (nowMs < this.pausedUntil) return "paused";
      this.pausedUntil = 0;
      this.learned = 0;
      this.evictedSince = 0;
    }
    if (this.learned > 0 && this.evictedSince > o.maxEvictionRatio * this.learned) {
      this.pausedUntil = nowMs + o.pauseMs;
      return "paused";
    }
    this.learned++;
    const t = this.tokenizer.tokenize(line);
    if (typeof t === "string") return t;
    const tokens = t.tokens;
    if (tokens.length < o.minTokens) return "too_few_tokens";
    const bucket = Math.floor(timeMs / o.bucketMs);
    let cluster = this.search(tokens, level);
    if (cluster === undefined) {
      cluster = new Cluster(
        this.nextId++,
        level,
        tokens.map(detach),
        t.gaps === undefined ? undefined : t.gaps.slice(),
      );
      this.stats.created++;
      this.clusterBytes += cluster.bytes;
      cluster.lastUsed = ++this.clock; // before any eviction: the newest is never the victim
      this.lru.set(cluster.id, cluster);
      this.insert(cluster);
      if (this.lru.size > o.maxClusters) this.evictOldest();
    } else if (!this.fits) {
      // The line differs from the template somewhere it has no placeholder yet.
      const template = cluster.tokens;
      for (let i = 0; i < template.length; i++) {
        if (template[i] !== tokens[i] && template[i] !== PH) {
          template[i] = PH;
          cluster.pattern = undefined;
        }
      }
    }
    cluster.lastUsed = ++this.clock;
    this.clusterBytes += cluster.add(bucket, o.maxBuckets);
    return cluster;
  }

  /** The pattern of a cluster, as Loki writes it (`<_>` for variable parts). */
  pattern(cluster: Cluster): string {
    return (cluster.pattern ??= this.tokenizer.join(cluster.tokens, cluster.gaps));
  }

  /**
   * Drops every bucket before `oldestMs`, then the clusters left without one, and prunes the
   * tree. Returns whether the instance is now empty.
   */
  prune(oldestMs: number): boolean {
    const first = Math.floor(oldestMs / this.options.bucketMs);
    for (const c of this.lru.values()) {
      this.clusterBytes -= c.dropBefore(first);
      if (c.buckets.length === 0) {
        this.remove(c);
        this.stats.pruned++;
      }
    }
    this.pruneTree();
    return this.lru.size === 0;
  }

  // ---- the tree ------------------------------------------------------------------------

  private search(tokens: readonly string[], level: string): Cluster | undefined {
    let node = this.root.get(level)?.[tokens.length];
    if (node === undefined) return undefined;
    const maxNodeDepth = this.options.maxDepth - 2;
    const n = tokens.length;
    let depth = 1;
    for (const token of tokens) {
      if (depth >= maxNodeDepth || depth === n) break;
      const next: TreeNode | undefined = node.children?.get(token) ?? node.children?.get(PH);
      if (next === undefined) return undefined;
      node = next;
      depth++;
    }
    return this.bestMatch(node.clusters, tokens);
  }

  private bestMatch(
    clusters: readonly Cluster[] | undefined,
    tokens: readonly string[],
  ): Cluster | undefined {
    if (clusters === undefined) return undefined;
    let best: Cluster | undefined;
    let bestSim = -1;
    let bestParams = -1;
    const n = tokens.length;
    for (const c of clusters) {
      if (c.dead) continue;
      const template = c.tokens;
      let same = 0;
      let params = 0;
      for (let i = 0; i < n; i++) {
        const t = template[i]!;
        if (t === PH) params++;
        else if (t === tokens[i]) same++;
      }
      const sim = same / n;
      if (sim > bestSim || (sim === bestSim && params > bestParams)) {
        bestSim = sim;
        bestParams = params;
        best = c;
        this.fits = same + params === n;
      }
    }
    return bestSim >= this.options.similarity ? best : undefined;
  }

  private child(node: TreeNode, key: string): TreeNode {
    const made = new TreeNode();
    (node.children ??= new Map()).set(key, made);
    this.nodes++;
    return made;
  }

  private insert(cluster: Cluster): void {
    const tokens = cluster.tokens;
    const n = tokens.length;
    let node: TreeNode = this.root.get(cluster.level)?.[n] ?? this.rootNode(cluster.level, n);
    const maxNodeDepth = this.options.maxDepth - 2;
    const maxChildren = this.options.maxChildren;
    let depth = 1;
    for (const token of tokens) {
      if (depth >= maxNodeDepth || depth >= n) break;
      let next: TreeNode | undefined = node.children?.get(token);
      if (next === undefined) {
        const size = node.children?.size ?? 0;
        const wildcard: TreeNode | undefined = node.children?.get(PLACEHOLDER);
        if (hasDigit(token)) {
          // A token with a digit is likely a variable: it never gets a branch of its own.
          next = wildcard ?? this.child(node, PLACEHOLDER);
        } else if (wildcard !== undefined) {
          next = size < maxChildren ? this.child(node, token) : wildcard;
        } else if (size + 1 < maxChildren) {
          next = this.child(node, token);
        } else {
          // The last free child is the wildcard, for every token that comes later.
          next = this.child(node, PLACEHOLDER);
        }
      }
      node = next;
      depth++;
    }
    const live = node.clusters?.filter((c) => !c.dead) ?? [];
    live.push(cluster);
    node.clusters = live;
  }

  private rootNode(level: string, count: number): TreeNode {
    const made = new TreeNode();
    let byCount = this.root.get(level);
    if (byCount === undefined) {
      byCount = [];
      this.root.set(level, byCount);
    }
    byCount[count] = made;
    this.nodes++;
    return made;
  }

  private evictOldest(): void {
    let oldest: Cluster | undefined;
    for (const c of this.lru.values())
      if (oldest === undefined || c.lastUsed < oldest.lastUsed) oldest = c;
    if (oldest === undefined) return;
    this.remove(oldest);
    this.stats.evicted++;
    this.evictedSince++;
    if (this.nodes > this.maxNodes) this.pruneTree();
  }

  private remove(c: Cluster): void {
    c.dead = true;
    this.lru.delete(c.id);
    this.clusterBytes -= c.bytes;
  }

  /** Removes dead clusters from the leaves, and nodes with neither clusters nor children. */
  private pruneTree(): void {
    for (const [level, byCount] of this.root) {
      let left = 0;
      for (let n = 0; n < byCount.length; n++) {
        const node = byCount[n];
        if (node === undefined) continue;
        if (this.pruneNode(node)) {
          byCount[n] = undefined;
          this.nodes--;
        } else {
          left++;
        }
      }
      if (left === 0) this.root.delete(level);
    }
  }

  /** Prunes below `node`; true when `node` itself is now empty. */
  private pruneNode(node: TreeNode): boolean {
    if (node.children !== undefined) {
      for (const [key, child] of node.children) {
        if (this.pruneNode(child)) {
          node.children.delete(key);
          this.nodes--;
        }
      }
      if (node.children.size === 0) node.children = undefined;
    }
    if (node.clusters !== undefined) {
      const live = node.clusters.filter((c) => !c.dead);
      node.clusters = live.length === 0 ? undefined : live;
    }
    return node.children === undefined && node.clusters === undefined;
  }
}

/**
 * A cluster's counts in [fromMs, throughMs), summed into steps of `stepMs` (each step at a
 * multiple of `stepMs` since the epoch), as `[unix seconds, count]` in time order.
 */
export function samplesInRange(
  cluster: Cluster,
  bucketMs: number,
  fromMs: number,
  throughMs: number,
  stepMs: number,
): [number, number][] {
  const out: [number, number][] = [];
  const { buckets, counts } = cluster;
  let lastStep = Number.NaN;
  for (let i = 0; i < buckets.length; i++) {
    const t = buckets[i]! * bucketMs;
    if (t < fromMs) continue;
    if (t >= throughMs) break;
    const step = t - (t % stepMs);
    if (step === lastStep) {
      out[out.length - 1]![1] += counts[i]!;
    } else {
      out.push([Math.floor(step / 1000), counts[i]!]);
      lastStep = step;
    }
  }
  return out;
}
