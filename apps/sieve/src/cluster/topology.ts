/**
 * The cluster's topology as data, shared by the native launcher (`scripts/cluster.sh`,
 * `launch.ts`) and the tests that start the cluster through it: which instances run
 * (the service names of docker-compose.yml), with which configuration files (always
 * `deploy/sieve/common.yaml` then the role's file, as compose starts them), on which local
 * port, with which `SIEVE_*` overrides. Only addresses, ports and instance ids are
 * overridden here: everything else comes from `deploy/sieve/`, so the native cluster and
 * the compose one cannot drift.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root (this file is `apps/sieve/{src,dist}/cluster/topology.*`). */
export const REPO_ROOT = fileURLToPath(new URL("../../../../", import.meta.url));
/** The built `sieve` command every instance runs. */
export const SIEVE_MAIN = join(REPO_ROOT, "apps/sieve/dist/main.js");
/** The cluster configs. */
export const DEPLOY_DIR = join(REPO_ROOT, "deploy");

/** The roles, in start order: the distributors create the topic the ingesters join. */
export const ROLES = ["distributor", "ingester", "bloom-gateway", "querier", "compactor"] as const;
/** One of {@link ROLES}. */
export type Role = (typeof ROLES)[number];
/** Replicas of each role, as in docker-compose.yml: one compactor per bucket, two of the rest. */
export const REPLICAS: Readonly<Record<Role, number>> = {
  distributor: 2,
  ingester: 2,
  "bloom-gateway": 2,
  querier: 2,
  compactor: 1,
};

/** One process of the cluster. */
export interface Instance {
  /** The compose service name, e.g. `ingester-2`. */
  readonly name: string;
  readonly role: Role;
  /** Its local port: the entry port + 1, + 2, ... in {@link ROLES} order. */
  readonly port: number;
  readonly url: string;
}

/** Where the native cluster listens and what it connects to. */
export interface Addresses {
  /** The address every process listens on, and the one clients use. */
  readonly host: string;
  /** nginx's port, the one entry point; the instances take the next ports. */
  readonly entryPort: number;
  /** `host:port` list of the Kafka brokers. */
  readonly kafkaBrokers: string;
  /** The S3 endpoint (MinIO). */
  readonly s3Endpoint: string;
}

/**
 * The compose service names of a role's instances: `<role>-<n>`, or the role's own name
 * when it runs once (the compactor).
 */
export function serviceNames(role: Role): string[] {
  const n = REPLICAS[role];
  return n === 1 ? [role] : Array.from({ length: n }, (_, i) => `${role}-${i + 1}`);
}

/** Every instance, in start order, on ports after the entry port. */
export function instances(addresses: Pick<Addresses, "host" | "entryPort">): Instance[] {
  const out: Instance[] = [];
  for (const role of ROLES) {
    for (const name of serviceNames(role)) {
      const port = addresses.entryPort + 1 + out.length;
      out.push({ name, role, port, url: `http://${addresses.host}:${port}` });
    }
  }
  return out;
}

/** A role's configuration files, lowest first: common.yaml, the role's file, then `extra`. */
export function configFiles(role: Role, extra: readonly string[] = []): string[] {
  return [join(DEPLOY_DIR, "sieve/common.yaml"), join(DEPLOY_DIR, `sieve/${role}.yaml`), ...extra];
}

/** {@link configFiles} as `--config-file` arguments. */
export function configArgs(role: Role, extra: readonly string[] = []): string[] {
  return configFiles(role, extra).flatMap((file) => ["--config-file", file]);
}

/**
 * The `SIEVE_*` variables of one instance: where it listens, where Kafka and S3 are, the
 * other instances' addresses (queriers) and its own name (ingesters, whose instance id
 * names what they write to the shared bucket).
 */
export function instanceEnv(
  instance: Instance,
  all: readonly Instance[],
  addresses: Addresses,
): Record<string, string> {
  const urls = (role: Role): string =>
    all
      .filter((i) => i.role === role)
      .map((i) => i.url)
      .join(",");
  return {
    SIEVE_SERVER_HOST: addresses.host,
    SIEVE_SERVER_PORT: String(instance.port),
    SIEVE_QUEUE_KAFKA_BROKERS: addresses.kafkaBrokers,
    SIEVE_STORAGE_S3_ENDPOINT: addresses.s3Endpoint,
    ...(instance.role === "querier" && {
      SIEVE_CLUSTER_INGESTER_URLS: urls("ingester"),
      SIEVE_CLUSTER_BLOOM_GATEWAY_URLS: urls("bloom-gateway"),
    }),
    ...(instance.role === "ingester" && { SIEVE_INGESTER_INSTANCE_ID: instance.name }),
  };
}

/**
 * nginx's configuration for the native cluster: compose's deploy/nginx/nginx.conf with the
 * upstreams on local ports, in the foreground (the launcher keeps its pid), every path it
 * writes under `dir`, and the same routes.conf included, so the routes cannot drift.
 */
export function nginxConf(all: readonly Instance[], addresses: Addresses, dir: string): string {
  const upstream = (role: Role): string =>
    all
      .filter((i) => i.role === role)
      .map((i) => `        server ${addresses.host}:${i.port};\n`)
      .join("");
  const tmp = (name: string): string => `${name}_temp_path ${join(dir, "tmp", name)};`;
  return `# Generated by scripts/cluster.sh (apps/sieve/src/cluster/topology.ts): do not edit.
daemon off;
worker_processes 1;
pid ${join(dir, "nginx.pid")};
error_log ${join(dir, "error.log")} warn;

events {
    worker_connections 1024;
}

http {
    access_log ${join(dir, "access.log")};
    ${tmp("client_body")}
    ${tmp("proxy")}
    ${tmp("fastcgi")}
    ${tmp("uwsgi")}
    ${tmp("scgi")}

    upstream distributor {
${upstream("distributor")}        keepalive 16;
    }

    upstream querier {
${upstream("querier")}        keepalive 16;
    }

    upstream compactor {
${upstream("compactor")}    }

    server {
        listen ${addresses.host}:${addresses.entryPort};
        include ${join(DEPLOY_DIR, "nginx/routes.conf")};
    }
}
`;
}
