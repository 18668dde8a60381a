/**
 * Regular expressions from queries run on RE2 (the `re2` package: Google's engine, linear
 * time, Go's syntax), never on V8's backtracking engine, so that no user pattern can hang
 * the process. A global (`g`) regex keeps `lastIndex` state: use it only with
 * `String.prototype.replace`/`match`, which reset it. Compiled patterns are cached, because the same few patterns recur across
 * queries.
 */
import RE2 from "re2";

const cache = new Map<string, RE2>();
const CACHE_LIMIT = 1024;

/** Thrown by {@link compileRegex} with RE2's reason, e.g. `missing ): (a`. */
export class RegexSyntaxError extends Error {
  override readonly name = "RegexSyntaxError";
}

/**
 * Compiles `pattern` with RE2. `anchored` wraps it as `^(?:pattern)$`, the semantics of
 * label matchers; line filters and the `regexp` stage are unanchored, as in Loki.
 */
export function compileRegex(pattern: string, anchored: boolean, global = false): RE2 {
  const key = (anchored ? "A" : "U") + (global ? "g" : "-") + pattern;
  let re = cache.get(key);
  if (re !== undefined) return re;
  try {
    // The "s" flag is not set: `.` does not match a newline, as in Go.
    re = new RE2(anchored ? `^(?:${pattern})$` : pattern, global ? "gu" : "u");
  } catch (e) {
    if (anchored) compileRegex(pattern, false); // words the error with the user's pattern
    throw new RegexSyntaxError(
      `error parsing regexp: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!);
  cache.set(key, re);
  return re;
}
