/**
 * `GET /loki/api/v1/status/buildinfo`, in Loki's shape (`pkg/util/build`: `version`,
 * `revision`, `branch`, `buildUser`, `buildDate`, `goVersion`). Grafana's Loki data source
 * and Logs Drilldown read `version` to decide which of Loki's features they may use, so
 * Sieve answers the Loki release whose API it serves (and whose `logcli` its tests run),
 * and says what it is in the other fields.
 */
import { readFileSync } from "node:fs";
import type { FastifyInstance } from "fastify";

/** The Loki release whose read and push API Sieve serves (`scripts/loki.sh` builds its logcli). */
export const LOKI_API_VERSION = "3.7.6";

/** Loki's build information, as `status/buildinfo` answers it. */
export interface BuildInfo {
  /** {@link LOKI_API_VERSION}: what Grafana compares against Loki's releases. */
  readonly version: string;
  /** `sieve-<version of the sieve command>`: which Sieve answers. */
  readonly revision: string;
  /** Always `sieve` (Sieve has no build stamping of a git branch). */
  readonly branch: string;
  /** Empty, as a Loki built without stamping answers. */
  readonly buildUser: string;
  /** Empty, as a Loki built without stamping answers. */
  readonly buildDate: string;
  /** The runtime: `node <process.version>` (Loki answers its Go version). */
  readonly goVersion: string;
}

/** The `version` of `apps/sieve/package.json` (read beside `src/` and `dist/` alike). */
function sieveVersion(): string {
  try {
    const text = readFileSync(new URL("../package.json", import.meta.url), "utf8");
    const version = (JSON.parse(text) as { version?: unknown }).version;
    return typeof version === "string" ? version : "unknown";
  } catch {
    return "unknown";
  }
}

/** This process's {@link BuildInfo}. */
export function buildInfo(): BuildInfo {
  return {
    version: LOKI_API_VERSION,
    revision: `sieve-${sieveVersion()}`,
    branch: "sieve",
    buildUser: "",
    buildDate: "",
    goVersion: `node ${process.version}`,
  };
}

/** Serves `status/buildinfo` on `app` (every target serves it, as every Loki target does). */
export function registerBuildInfo(app: FastifyInstance): void {
  const body = JSON.stringify(buildInfo());
  app.get("/loki/api/v1/status/buildinfo", { logLevel: "warn" }, async (_request, reply) =>
    reply.type("application/json; charset=utf-8").send(body),
  );
}
