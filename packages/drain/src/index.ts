/**
 * Log patterns learned online with Drain (He et al., ICWS 2017), as Loki's pattern ingester
 * learns them: tokenizers for plain, logfmt and JSON lines, one bounded parse tree per
 * stream, and the lines each pattern matched counted in time buckets.
 */
export { Drain, Cluster, DEFAULT_DRAIN_OPTIONS, samplesInRange } from "./drain.js";
export type { DrainOptions, DrainStats } from "./drain.js";
export {
  Tokenizer,
  detectFormat,
  PLACEHOLDER,
  JSON_MESSAGE_FIELDS,
  SKIP_REASONS,
} from "./tokenize.js";
export type { LogFormat, SkipReason, Tokenized, TokenizerLimits } from "./tokenize.js";
