/**
 * Stream selection: label matchers as data, evaluated with RE2 and Prometheus semantics
 * (regexes fully anchored; a missing label has the value ""). The querier and the ingester
 * select streams with {@link matchesLabels}.
 */
import type { Matcher } from "./ast.js";
import { compileRegex } from "./regex.js";

/** True when `value` satisfies `m`. */
export function matcherMatches(m: Matcher, value: string): boolean {
  switch (m.op) {
    case "=":
      return value === m.value;
    case "!=":
      return value !== m.value;
    case "=~":
      return compileRegex(m.value, true).test(value);
    case "!~":
      return !compileRegex(m.value, true).test(value);
  }
}

/** True when the label set satisfies every matcher (a missing label reads as ""). */
export function matchesLabels(
  matchers: readonly Matcher[],
  labels: Readonly<Record<string, string>>,
): boolean {
  for (const m of matchers) {
    if (!matcherMatches(m, labels[m.name] ?? "")) return false;
  }
  return true;
}
