/**
 * The online false-positive audit. A chunk a bloom test kept (explain's `passed`) is read
 * whole; when no entry satisfies the part of the query's bloom test the bloom evaluated, the
 * bloom said "may match" for nothing: a false positive, counted per query
 * (`stats.sieve.falsePositiveChunks`) and per tenant (`sieve_querier_bloom_false_positive_chunks_total`).
 * Blooms have no false negatives, so fp / (fp + pruned) is the observed false-positive rate
 * of pruning, to set against the configured one.
 *
 * Only chunks read to their end count: one that lies partly outside the query's range (its
 * entries there are not read) or that a log query stops reading at its limit is left out.
 */
import type { Entry } from "@sieve/chunk";
import {
  ALL_METADATA_TOKENS,
  literalNgrams,
  type MetadataTokens,
  type NgramOptions,
} from "@sieve/index";
import { evaluateMetadataTest, type BloomTest, type MetadataOracle } from "@sieve/logql";

const ALL: BloomTest = { kind: "all" };

/**
 * The part of `test` a bloom with `ngrams` and `tokens` evaluated: a line leaf stays only
 * when that bloom has n-grams and the literal is long enough for them; a `name` leaf only
 * when it holds `name` tokens; a pair leaf is its `name=value` token when it holds those,
 * else its `name` token when it holds that (otherwise the gateway answered "may match" for
 * the leaf, and a chunk without it is no false positive of the bloom). `all` when nothing
 * is left.
 */
export function testedPart(
  test: BloomTest,
  ngrams: NgramOptions | undefined,
  tokens: MetadataTokens = ALL_METADATA_TOKENS,
): BloomTest {
  switch (test.kind) {
    case "line":
      return ngrams !== undefined && literalNgrams(test.literal, ngrams) !== undefined ? test : ALL;
    case "and": {
      const children = test.children
        .map((c) => testedPart(c, ngrams, tokens))
        .filter((c) => c !== ALL);
      if (children.length === 0) return ALL;
      return children.length === 1 ? children[0]! : { kind: "and", children };
    }
    case "or": {
      const children = test.children.map((c) => testedPart(c, ngrams, tokens));
      return children.includes(ALL) ? ALL : { kind: "or", children };
    }
    case "key":
      return tokens.keys ? test : ALL;
    case "kv":
      return tokens.values ? test : tokens.keys ? { kind: "key", name: test.name } : ALL;
    case "all":
      return test;
  }
}

/**
 * Watches the entries read from one audited chunk for one that satisfies its tested part
 * exactly: a key or pair leaf by the entry's structured metadata (or a stream label of that
 * name, as the bloom does), a line leaf by the line containing the literal.
 */
export class ChunkAudit {
  /** Whether an entry seen so far satisfies the test. */
  found = false;
  private entry: Entry | undefined;
  private readonly oracle: MetadataOracle = {
    key: (name) => this.entry!.structuredMetadata.some((p) => p.name === name),
    pair: (name, value) =>
      this.entry!.structuredMetadata.some((p) => p.name === name && p.value === value),
    line: (literal) => this.entry!.line.includes(literal),
  };

  constructor(
    private readonly test: BloomTest,
    private readonly labels: Readonly<Record<string, string>>,
  ) {}

  /** Looks at the next entry of the chunk (nothing more once one satisfied the test). */
  see(e: Entry): void {
    if (this.found) return;
    this.entry = e;
    this.found = evaluateMetadataTest(this.test, this.oracle, this.labels);
  }
}
