/**
 * The metric side of reads across tenants (see multi-tenant.ts): each admitted tenant's
 * streams are folded under their own tenant, labelled `__tenant_id__` on both sides (the
 * querier's chunks and the ingesters' heads, metrics-query.ts), as Loki's multi-tenant
 * querier labels its sample iterators. The selectors keep their `__tenant_id__` matchers
 * for the folds (which match them against the label); they are taken out only to read
 * each tenant's series from the index.
 */
import type { Matcher } from "@sieve/logql";
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
