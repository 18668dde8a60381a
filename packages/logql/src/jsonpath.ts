/**
 * The path language of `| json label="path"`: dotted keys and brackets, as Loki's
 * `jsonexpr` grammar: `a.b`, `servers[0]`, `request.headers["User-Agent"]`, `["a.b"]`.
 */

/** A path step: an object key or an array index. */
export type PathStep = string | number;

/** Thrown for a path that does not parse. */
export class JsonPathError extends Error {
  override readonly name = "JsonPathError";
}

/** Parses a path into steps; throws {@link JsonPathError}. */
export function parseJsonPath(path: string): PathStep[] {
  const steps: PathStep[] = [];
  let i = 0;
  const fail = (): never => {
    throw new JsonPathError(`invalid json expression ${JSON.stringify(path)}`);
  };
  if (path.length === 0) fail();
  let expectKey = true;
  while (i < path.length) {
    const c = path[i]!;
    if (c === "[") {
      const close = path.indexOf("]", i);
      if (close < 0) fail();
      const inner = path.slice(i + 1, close).trim();
      if (/^\d+$/.test(inner)) steps.push(Number(inner));
      else if (/^"(?:[^"\\]|\\.)*"$/.test(inner)) steps.push(JSON.parse(inner) as string);
      else fail();
      i = close + 1;
      expectKey = false;
      continue;
    }
    if (c === ".") {
      if (expectKey) fail();
      i++;
      expectKey = true;
      continue;
    }
    if (!expectKey) fail();
    const m = /^[A-Za-z0-9_$@:-]+/.exec(path.slice(i));
    if (m === null) fail();
    steps.push(m![0]);
    i += m![0].length;
    expectKey = false;
  }
  if (expectKey) fail();
  return steps;
}
