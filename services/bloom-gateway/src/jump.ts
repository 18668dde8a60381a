/**
 * Jump consistent hash (Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash
 * Algorithm", 2014, arXiv:1406.2294): maps a 64-bit key to one of `buckets` buckets so that
 * going from n to n+1 buckets moves only 1/(n+1) of the keys. Written here because it is
 * the paper's ten lines; the npm packages that offer it either hash 32-bit keys or pull in
 * native code. Uses BigInt for the 64-bit linear congruential step: a gateway client calls
 * it once per bloom block of a request, not per token.
 */
export function jumpHash(key: bigint, buckets: number): number {
  if (!Number.isInteger(buckets) || buckets <= 0) return 0;
  let k = BigInt.asUintN(64, key);
  let b = -1;
  let j = 0;
  while (j < buckets) {
    b = j;
    k = BigInt.asUintN(64, k * 2862933555777941757n + 1n);
    // Same operation order as the reference, so the doubles round the same way.
    j = Math.floor((b + 1) * (2 ** 31 / (Number(k >> 33n) + 1)));
  }
  return b;
}
