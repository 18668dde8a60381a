/** dskit's longest tenant ID. */
export const MAX_TENANT_ID_LENGTH = 150;

const TENANT_CHAR = /^[a-zA-Z0-9!\-_.*'()]$/;

/**
 * dskit's `tenant.ValidTenantID`, in its order (characters, then length, then `.` or `..`)
 * and with its words: characters `a-z A-Z 0-9 ! - _ . * ' ( )`, at most 150, and not `.`
 * or `..`. Answers the error message, or undefined when valid. The one rule every
 * component applies before a tenant ID is used anywhere (metrics, limits, queue records,
 * storage keys, configuration overrides).
 */
export function tenantIdError(id: string): string | undefined {
  for (let i = 0; i < id.length; i++) {
    if (!TENANT_CHAR.test(id[i]!)) {
      return `tenant ID '${id}' contains unsupported character '${String.fromCodePoint(id.codePointAt(i)!)}'`;
    }
  }
  if (id.length > MAX_TENANT_ID_LENGTH) {
    return `tenant ID is too long: max ${MAX_TENANT_ID_LENGTH} characters`;
  }
  if (id === "." || id === "..") return "tenant ID is '.' or '..'";
  if (id === "") return "no org id";
  return undefined;
}

/** The tenant of single-tenant mode (authentication off), as Loki's. */
export const FAKE_TENANT = "fake";

/** Why a request carries no usable tenant: 401 without one, 400 for an invalid one. */
export interface TenantRefusal {
  readonly status: 401 | 400;
  readonly message: string;
}

/**
 * The tenant of a request from its `X-Scope-OrgID` header (the first value, as dskit's
 * `ExtractOrgID` reads it), or {@link FAKE_TENANT} when authentication is off: one rule
 * for the distributor and the querier. Answers the tenant, or why the request is refused.
 */
export function requestTenant(
  header: string | readonly string[] | undefined,
  authEnabled: boolean,
): string | TenantRefusal {
  if (!authEnabled) return FAKE_TENANT;
  const id = typeof header === "string" ? header : header?.[0];
  if (id === undefined || id === "") return { status: 401, message: "no org id" };
  const error = tenantIdError(id);
  return error === undefined ? id : { status: 400, message: error };
}

/**
 * The tenants of a read across tenants, from `X-Scope-OrgID: a|b` as dskit's
 * `tenant.TenantIDs` reads it (the querier with `multiTenantQueriesEnabled`): every ID
 * valid, sorted and deduplicated, joined by `|` again (`b|a|b` → `a|b`; one ID left: that
 * tenant alone). Undefined when the header names no `|` (read it with {@link requestTenant}).
 */
export function requestTenants(
  header: string | readonly string[] | undefined,
): string | TenantRefusal | undefined {
  const id = typeof header === "string" ? header : header?.[0];
  if (id === undefined || !id.includes("|")) return undefined;
  const ids = [...new Set(id.split("|"))].sort();
  for (const one of ids) {
    const error = tenantIdError(one);
    if (error !== undefined) return { status: 400, message: error };
  }
  return ids.join("|");
}
