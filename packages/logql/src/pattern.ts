/**
 * Loki's pattern language, for the `pattern` stage and the `|>` / `!>` line filters:
 * literal text and captures `<name>` (or `<_>` to skip). A capture runs until the next
 * literal; a trailing capture takes the rest of the line. Matching is a linear scan.
 */

/** Thrown for a pattern that Loki would refuse. */
export class PatternError extends Error {
  override readonly name = "PatternError";
}

type Part = { lit: string } | { cap: string };

/** A parsed pattern. */
export interface Pattern {
  parts: Part[];
  names: string[];
}

/** Parses a pattern; `needCapture` requires a named capture (the `pattern` stage does). */
export function parsePattern(src: string, needCapture: boolean): Pattern {
  const parts: Part[] = [];
  const re = /<(_|[A-Za-z_][A-Za-z0-9_]*)>/g;
  let last = 0;
  for (const m of src.matchAll(re)) {
    if (m.index > last) parts.push({ lit: src.slice(last, m.index) });
    const prev = parts[parts.length - 1];
    if (prev !== undefined && "cap" in prev) {
      throw new PatternError("found consecutive capture '" + m[0] + "': this would be ambiguous");
    }
    parts.push({ cap: m[1]! });
    last = m.index + m[0].length;
  }
  if (last < src.length) parts.push({ lit: src.slice(last) });
  const names = parts.flatMap((p) => ("cap" in p && p.cap !== "_" ? [p.cap] : []));
  if (new Set(names).size !== names.length) throw new PatternError("duplicate capture name");
  if (needCapture && names.length === 0) throw new PatternError("at least one capture is required");
  if (parts.length === 0) throw new PatternError("empty pattern");
  return { parts, names };
}

/**
 * Matches `line` against `p`; answers the captured values in order of `p.names`, or
 * undefined when the line does not fit. Literals must appear in order; text after the
 * last literal is ignored, as Loki does.
 */
export function matchPattern(p: Pattern, line: string): string[] | undefined {
  const out: string[] = [];
  let i = 0;
  const parts = p.parts;
  for (let k = 0; k < parts.length; k++) {
    const part = parts[k]!;
    if ("lit" in part) {
      if (!line.startsWith(part.lit, i)) return undefined;
      i += part.lit.length;
      continue;
    }
    const next = parts[k + 1];
    let end: number;
    if (next === undefined) end = line.length;
    else {
      end = line.indexOf((next as { lit: string }).lit, i);
      if (end < 0) return undefined;
    }
    if (part.cap !== "_") out.push(line.slice(i, end));
    i = end;
  }
  return out;
}
