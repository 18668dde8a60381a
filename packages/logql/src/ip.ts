/**
 * `ip("...")` filters: a single address, a CIDR (`192.168.0.0/16`) or a range
 * (`192.168.0.1-192.168.0.9`), IPv4 or IPv6, checked with Node's `net.BlockList`.
 */
import { BlockList, isIP } from "node:net";

/** Thrown for an `ip()` argument that is neither an address, a CIDR nor a range. */
export class IpFilterError extends Error {
  override readonly name = "IpFilterError";
}

/** Compiles an `ip()` argument into a test of one address string. */
export function parseIpFilter(spec: string): (addr: string) => boolean {
  const list = new BlockList();
  const s = spec.trim();
  const bad = (): never => {
    throw new IpFilterError(
      `invalid ip filter ${JSON.stringify(spec)}: expected an address, a CIDR or a range`,
    );
  };
  const family = (a: string): "ipv4" | "ipv6" => {
    const v = isIP(a);
    if (v === 0) bad();
    return v === 4 ? "ipv4" : "ipv6";
  };
  try {
    if (s.includes("/")) {
      const [net, bits] = s.split("/") as [string, string];
      const f = family(net);
      const prefix = Number(bits);
      if (!/^\d+$/.test(bits) || prefix > (f === "ipv4" ? 32 : 128)) bad();
      list.addSubnet(net, prefix, f);
    } else if (s.includes("-")) {
      const [a, b] = s.split("-") as [string, string];
      const f = family(a.trim());
      if (family(b.trim()) !== f) bad();
      list.addRange(a.trim(), b.trim(), f);
    } else {
      list.addAddress(s, family(s));
    }
  } catch (e) {
    if (e instanceof IpFilterError) throw e;
    bad();
  }
  return (addr) => {
    const v = isIP(addr);
    return v !== 0 && list.check(addr, v === 4 ? "ipv4" : "ipv6");
  };
}

// Candidate addresses inside a line; linear (no nested quantifiers), run on V8.
const CANDIDATES = /[0-9A-Fa-f:.]{2,}/g;

/** True when some address written in `line` passes `test` (Loki's `|= ip(...)`). */
export function lineHasIp(line: string, test: (addr: string) => boolean): boolean {
  for (const m of line.matchAll(CANDIDATES)) {
    const c = m[0].replace(/^[.:]+|[.:]+$/g, (x) => (x === "::" ? x : ""));
    if (test(c)) return true;
  }
  return false;
}
