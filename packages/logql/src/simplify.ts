/**
 * Reduces a regular expression to the finite set of strings it matches, when it has one
 * that is small: `api|web`, `(GET|POST) /`, `a[bc]d?`. Loki does the same on Go's
 * `regexp/syntax` tree to turn regex label filters into bloom lookups. Hand-written on a
 * tiny subset (literals, escapes, groups, alternation, small classes, `?`); anything else
 * answers undefined, which callers must read as "cannot tell".
 */

/** Most strings a regex may expand to before it counts as unsimplifiable (Loki's limit). */
export const MAX_REGEX_LITERALS = 200;

const META = new Set(Array.from("\\.+*?()|[]{}^$"));

/** The strings `pattern` matches in full, or undefined if unknown, infinite or above `limit`. */
export function regexLiterals(pattern: string, limit = MAX_REGEX_LITERALS): string[] | undefined {
  let src = pattern;
  if (src.startsWith("^")) src = src.slice(1);
  if (src.endsWith("$") && !src.endsWith("\\$")) src = src.slice(0, -1);
  const chars = Array.from(src);
  let i = 0;
  class Unsimplifiable extends Error {}
  const no = (): never => {
    throw new Unsimplifiable();
  };
  const cap = (set: string[]): string[] => (set.length > limit ? no() : set);

  const parseAlt = (): string[] => {
    const out = new Set<string>(parseConcat());
    while (chars[i] === "|") {
      i++;
      for (const s of parseConcat()) out.add(s);
      if (out.size > limit) no();
    }
    return [...out];
  };
  const parseConcat = (): string[] => {
    let acc = [""];
    while (i < chars.length && chars[i] !== "|" && chars[i] !== ")") {
      let atom = parseAtom();
      if (chars[i] === "?") {
        i++;
        if (chars[i] === "?") i++;
        atom = ["", ...atom];
      } else if (chars[i] === "*" || chars[i] === "+" || chars[i] === "{") no();
      const next: string[] = [];
      for (const a of acc) for (const b of atom) next.push(a + b);
      acc = cap([...new Set(next)]);
    }
    return acc;
  };
  const parseAtom = (): string[] => {
    const c = chars[i]!;
    if (c === "(") {
      i++;
      if (chars[i] === "?") {
        const rest = chars.slice(i, i + 3).join("");
        if (rest.startsWith("?:")) i += 2;
        else if (rest.startsWith("?P<") || rest.startsWith("?<")) {
          while (i < chars.length && chars[i] !== ">") i++;
          i++;
        } else no();
      }
      const inner = parseAlt();
      if (chars[i] !== ")") no();
      i++;
      return inner;
    }
    if (c === "[") return parseClass();
    if (c === "\\") {
      const e = chars[i + 1];
      i += 2;
      if (e !== undefined && META.has(e)) return [e];
      if (e === "-" || e === "/" || e === " " || e === "#" || e === "&" || e === "~" || e === "=")
        return [e];
      if (e === "t") return ["\t"];
      if (e === "n") return ["\n"];
      return no();
    }
    if (META.has(c)) return no();
    i++;
    return [c];
  };
  const parseClass = (): string[] => {
    i++;
    if (chars[i] === "^") no();
    const out = new Set<string>();
    let first = true;
    while (i < chars.length && (chars[i] !== "]" || first)) {
      first = false;
      let c = chars[i]!;
      if (c === "[" || c === "\\") {
        if (c === "\\" && chars[i + 1] !== undefined && META.has(chars[i + 1]!)) {
          c = chars[i + 1]!;
          i++;
        } else no();
      }
      i++;
      if (chars[i] === "-" && chars[i + 1] !== undefined && chars[i + 1] !== "]") {
        const end = chars[i + 1]!;
        if (end === "\\" || end === "[") no();
        i += 2;
        const a = c.codePointAt(0)!;
        const b = end.codePointAt(0)!;
        if (b < a || b - a > limit) no();
        for (let k = a; k <= b; k++) out.add(String.fromCodePoint(k));
      } else out.add(c);
      if (out.size > limit) no();
    }
    if (chars[i] !== "]") no();
    i++;
    return [...out];
  };

  try {
    const set = parseAlt();
    if (i !== chars.length) return undefined;
    return set;
  } catch (e) {
    if (e instanceof Unsimplifiable) return undefined;
    throw e;
  }
}
