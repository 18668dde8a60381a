/** Deterministic 32-hex-char keys shaped like trace ids (splitmix64 from `seed`). */
export function traceIds(count: number, seed: number): string[] {
  const mask = (1n << 64n) - 1n;
  let state = BigInt(seed) * 0x632be59bd9b4e019n;
  const next = (): string => {
    state = (state + 0x9e3779b97f4a7c15n) & mask;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask;
    return (z ^ (z >> 31n)).toString(16).padStart(16, "0");
  };
  const out: string[] = [];
  for (let i = 0; i < count; i++) out.push(next() + next());
  return out;
}

/** Fraction of `keys` for which `test` answers present. */
export function rate(keys: readonly string[], test: (key: string) => boolean): number {
  let hits = 0;
  for (const key of keys) if (test(key)) hits++;
  return hits / keys.length;
}
