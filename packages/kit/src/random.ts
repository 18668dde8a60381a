/**
 * Mulberry32: a small seeded PRNG, for data that must be the same on every run and machine
 * (benchmarks, experiment datasets). Not for anything secret. Hand-written: 8 lines, and
 * the npm packages that hold it carry more than they would save.
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
