/**
 * The metric side of reads across tenants (see multi-tenant.ts): every admitted tenant's
 * streams collected under their own tenant, then labelled `__tenant_id__` before the one
 * evaluation, as Loki's multi-tenant querier labels its sample iterators. The selectors keep
 * their `__tenant_id__` matchers for the evaluation (which matches them against the label);
 * they are taken out only to read each tenant's series.
 */
import type { LogExpr, Matcher, StreamEntries } from "@sieve/logql";
import { matchesLabels } from "@sieve/logql";

/** The label naming each answer's tenant (Loki's `defaultTenantLabel`). */
export const TENANT_LABEL = "__tenant_id__";

/** The separator of tenants in `X-Scope-OrgID` (dskit's `tenant.JoinTenantIDs`). */
export const TENANT_SEPARATOR = "|";

/** The tenants of a task's tenant: `a|b` → [`a`, `b`]. */
export function tenantsOf(tenant: string): string[] {
  return tenant.split(TENANT_SEPARATOR);
}

/** A selector's matchers without those on {@link TENANT_LABEL}, and which tenants they admit. */
export function splitTenantMatchers(matchers: readonly Matcher[]): {
  matchers: Matcher[];
  admits: (tenant: string) => boolean;
} {
  const own = matchers.filter((m) => m.name === TENANT_LABEL);
  const rest = matchers.filter((m) => m.name !== TENANT_LABEL);
  return {
    matchers: rest,
    admits: (tenant) => own.length === 0 || matchesLabels(own, { [TENANT_LABEL]: tenant }),
  };
}

/**
 * Reads `sels` for each tenant with `read` (the selectors that admit it, without their
 * tenant matchers) and labels every stream with its tenant.
 */
export async function collectAcrossTenants(
  tenants: readonly string[],
  sels: readonly LogExpr[],
  read: (tenant: string, sels: readonly LogExpr[]) => Promise<StreamEntries[]>,
): Promise<StreamEntries[]> {
  const out: StreamEntries[] = [];
  const split = sels.map((s) => ({ sel: s, ...splitTenantMatchers(s.matchers) }));
  for (const tenant of tenants) {
    const own = split
      .filter((s) => s.admits(tenant))
      .map((s): LogExpr => ({ ...s.sel, matchers: s.matchers }));
    if (own.length === 0) continue;
    for (const s of await read(tenant, own)) {
      out.push({ labels: { ...s.labels, [TENANT_LABEL]: tenant }, entries: s.entries });
    }
  }
  return out;
}
