/**
 * docker-compose.yml against the rest of the repository, read as files (the Compose CLI's
 * own validation is compose.int.test.ts): the services the cluster needs, every image
 * pinned, every Sieve role started as `sieve <role>` with deploy/sieve's common.yaml and its
 * role's file, `SIEVE_*` variables that Sieve's configuration schema really reads (an
 * unknown one would be ignored silently), and the addresses of the cluster configs, the
 * nginx gateway and Prometheus naming services of this file on the ports they listen on.
 */
import { existsSync } from "node:fs";
import { basename, join } from "node:path";
import { optionRows } from "@sieve/config";
import { describe, expect, test } from "vitest";
import { COMPONENT_SCHEMAS, SIEVE_OPTIONS } from "./config.js";
import {
  REPO,
  dependencies,
  nginxIncludes,
  nginxListenPorts,
  nginxProxyPasses,
  nginxUpstreams,
  readCompose,
  repoText,
  repoYaml,
  type ComposeService,
} from "./deploy.test-helper.js";
import { REPLICAS, ROLES, serviceNames } from "./cluster/topology.js";
import { TARGETS } from "./targets.js";

const compose = readCompose();
const services = compose.services;

/** Where the Sieve services mount deploy/sieve. */
const CONFIG_DIR = "/etc/sieve";

/** The Sieve services of one role, by name (`<role>-<n>`, or `<role>` alone). */
function replicas(role: string): string[] {
  return Object.keys(services).filter((name) => new RegExp(`^${role}(-\\d+)?$`).test(name));
}
const sieveServices = ROLES.flatMap((role) => replicas(role));

/** A service's command as a list (compose also takes a string, split on spaces). */
function command(service: ComposeService): string[] {
  const c = service.command ?? [];
  return Array.isArray(c) ? c : c.split(/\s+/);
}

/** The values of every `--config-file` of a command. */
function configFiles(args: readonly string[]): string[] {
  return args.flatMap((arg, i) => (arg === "--config-file" ? [args[i + 1] ?? ""] : []));
}

/** A config file of deploy/sieve as a mapping ({} when empty). */
function sieveConfig(file: string): Record<string, unknown> {
  return (repoYaml(`deploy/sieve/${file}`) ?? {}) as Record<string, unknown>;
}

/** A dotted path of a mapping, or undefined. */
function at(doc: unknown, path: string): unknown {
  let value = doc;
  for (const key of path.split(".")) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

/** An option of role `role` as the cluster configures it: its file over common.yaml. */
function roleOption(role: string, path: string): unknown {
  return at(sieveConfig(`${role}.yaml`), path) ?? at(sieveConfig("common.yaml"), path);
}

/** The port a Sieve service listens on in its container (`server.port`, default 3100). */
function sievePort(name: string): number {
  const role = name.replace(/-\d+$/, "");
  const env = services[name]!.environment ?? {};
  const fromEnv = env.SIEVE_SERVER_PORT ?? env.SIEVE_PORT;
  if (fromEnv !== undefined && fromEnv !== null) return Number(fromEnv);
  return Number(roleOption(role, "server.port") ?? 3100);
}

/** `host:port` → [host, port]. */
function hostPort(address: string): [string, number] {
  const i = address.lastIndexOf(":");
  return [address.slice(0, i), Number(address.slice(i + 1))];
}

/** Every variable name Sieve's configuration reads: the rule's name and the older alias. */
const SIEVE_ENV = new Set(
  [
    ...SIEVE_OPTIONS,
    ...optionRows(COMPONENT_SCHEMAS.distributor),
    ...optionRows(COMPONENT_SCHEMAS.ingester),
    ...optionRows(COMPONENT_SCHEMAS.querier),
    ...optionRows(COMPONENT_SCHEMAS.bloomGateway),
    ...optionRows(COMPONENT_SCHEMAS.compactor),
  ].flatMap((row) => (row.alias === undefined ? [row.env] : [row.env, row.alias])),
);

describe("docker-compose.yml's services", () => {
  test("are Kafka, MinIO and its bucket, each Sieve role as scripts/cluster.sh runs it, the gateway, Prometheus and Grafana", () => {
    expect(Object.keys(services).sort()).toEqual(
      [
        "kafka",
        "minio",
        "minio-init",
        ...ROLES.flatMap((role) => serviceNames(role)),
        "gateway",
        "prometheus",
        "grafana",
      ].sort(),
    );
    for (const role of ROLES) expect(replicas(role), role).toHaveLength(REPLICAS[role]);
  });

  test("pin every image by version and digest; the Sieve roles run the image the Dockerfile builds", () => {
    for (const [name, service] of Object.entries(services)) {
      if (sieveServices.includes(name)) {
        expect(service.build, name).toBe(".");
        expect(service.image, name).toBe("sieve:local");
        continue;
      }
      expect(service.build, name).toBeUndefined();
      // name:version@sha256:digest, the version never `latest`.
      expect(service.image, name).toMatch(/^[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}$/);
      expect(service.image, name).not.toMatch(/:latest@/);
    }
  });

  test("keep data in named volumes, every one declared; bind-mount only files of the repository", () => {
    const declared = Object.keys(compose.volumes ?? {});
    const used = new Set<string>();
    for (const [name, service] of Object.entries(services)) {
      for (const volume of service.volumes ?? []) {
        const [source] = volume.split(":") as [string];
        if (source.startsWith("./")) {
          expect(existsSync(join(REPO, source)), `${name}: ${source}`).toBe(true);
        } else {
          expect(declared, `${name}: volume ${source}`).toContain(source);
          used.add(source);
        }
      }
    }
    expect([...used].sort()).toEqual(declared.sort());
    for (const name of ["kafka", "minio", "prometheus", "grafana"]) {
      expect(
        services[name]!.volumes?.some((v) => !v.startsWith("./")),
        name,
      ).toBe(true);
    }
  });
});

describe("the Sieve roles", () => {
  test.each(sieveServices)(
    "%s runs `sieve <role>` with common.yaml then its role's file from deploy/sieve",
    (name) => {
      const role = name.replace(/-\d+$/, "");
      const args = command(services[name]!);
      expect(TARGETS).toContain(args[0]);
      expect(args[0]).toBe(role);
      expect(configFiles(args)).toEqual([
        `${CONFIG_DIR}/common.yaml`,
        `${CONFIG_DIR}/${role}.yaml`,
      ]);
      for (const file of configFiles(args)) {
        expect(existsSync(join(REPO, "deploy/sieve", basename(file))), file).toBe(true);
      }
      expect(services[name]!.volumes).toContain(`./deploy/sieve:${CONFIG_DIR}:ro`);
    },
  );

  test.each(sieveServices)("%s sets only SIEVE_* variables Sieve's configuration reads", (name) => {
    const env = services[name]!.environment ?? {};
    for (const variable of Object.keys(env)) {
      if (!variable.startsWith("SIEVE_")) {
        // The object store's credentials, for the AWS SDK's chain.
        expect(["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"], `${name}: ${variable}`).toContain(
          variable,
        );
        continue;
      }
      expect(SIEVE_ENV.has(variable), `${name}: ${variable} is no configuration variable`).toBe(
        true,
      );
    }
  });

  test("the variable check knows the schema's names (and so would catch a misspelt one)", () => {
    expect(SIEVE_ENV.has("SIEVE_INGESTER_INSTANCE_ID")).toBe(true);
    expect(SIEVE_ENV.has("SIEVE_SERVER_PORT")).toBe(true);
    expect(SIEVE_ENV.has("SIEVE_PORT")).toBe(true);
    expect(SIEVE_ENV.has("SIEVE_INGESTER_INSTANCEID")).toBe(false);
  });

  test("each ingester has an instance id of its own", () => {
    const ids = replicas("ingester").map(
      (name) => services[name]!.environment?.SIEVE_INGESTER_INSTANCE_ID,
    );
    expect(ids.every((id) => typeof id === "string" && id !== "")).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  test("the object store's credentials are MinIO's root user", () => {
    const minio = services.minio!.environment!;
    for (const name of sieveServices) {
      const env = services[name]!.environment!;
      expect(env.AWS_ACCESS_KEY_ID, name).toBe(minio.MINIO_ROOT_USER);
      expect(env.AWS_SECRET_ACCESS_KEY, name).toBe(minio.MINIO_ROOT_PASSWORD);
    }
  });
});

describe("addresses and ports agree", () => {
  test("the cluster configs' Kafka and S3 are this file's kafka and minio, and minio-init creates the bucket", () => {
    const brokers = roleOption("common", "queue.kafka.brokers") as string[];
    const kafkaEnv = services.kafka!.environment!;
    expect(brokers.length).toBeGreaterThan(0);
    for (const broker of brokers) {
      const [host, port] = hostPort(broker);
      expect(host).toBe("kafka");
      expect(String(kafkaEnv.KAFKA_ADVERTISED_LISTENERS)).toContain(`PLAINTEXT://${broker}`);
      expect(String(kafkaEnv.KAFKA_LISTENERS)).toContain(`PLAINTEXT://:${port}`);
    }
    // KRaft formats its storage with this id: a UUID, 16 bytes in URL-safe base64.
    expect(Buffer.from(String(kafkaEnv.CLUSTER_ID), "base64url")).toHaveLength(16);
    expect(kafkaEnv.KAFKA_PROCESS_ROLES).toBe("broker,controller");
    expect(roleOption("common", "storage.backend")).toBe("s3");
    const endpoint = new URL(String(roleOption("common", "storage.s3.endpoint")));
    expect(endpoint.hostname).toBe("minio");
    expect(endpoint.port).toBe("9000");
    expect(command(services.minio!)).toContain("server");
    const bucket = String(roleOption("common", "storage.s3.bucket"));
    const init = services["minio-init"]!.entrypoint as string[];
    expect(init.join(" ")).toContain(`mc mb --ignore-existing local/${bucket}`);
    expect(init.join(" ")).toContain("http://minio:9000");
  });

  test("the queriers' ingester and bloom gateway URLs are exactly this file's ingesters and gateways, on their ports", () => {
    for (const [option, role] of [
      ["cluster.ingesterUrls", "ingester"],
      ["cluster.bloomGatewayUrls", "bloom-gateway"],
    ] as const) {
      const urls = (roleOption("querier", option) as string[]).map((u) => new URL(u));
      expect(urls.map((u) => u.hostname).sort(), option).toEqual(replicas(role).sort());
      for (const url of urls) {
        expect(Number(url.port), `${option}: ${url.href}`).toBe(sievePort(url.hostname));
      }
    }
  });

  test("nginx's upstreams are this file's distributors, queriers and compactor on their ports; its routes use only them", () => {
    const conf = repoText("deploy/nginx/nginx.conf");
    const upstreams = nginxUpstreams(conf);
    expect([...upstreams.keys()].sort()).toEqual(["compactor", "distributor", "querier"]);
    for (const [upstream, servers] of upstreams) {
      expect(servers.map((s) => hostPort(s)[0]).sort(), upstream).toEqual(
        replicas(upstream).sort(),
      );
      for (const server of servers) {
        const [host, port] = hostPort(server);
        expect(port, server).toBe(sievePort(host));
      }
    }
    const routes = nginxIncludes(conf);
    expect(routes).toEqual(["routes.conf"]);
    const passes = nginxProxyPasses(repoText("deploy/nginx/routes.conf"));
    expect(new Set(passes)).toEqual(new Set(["compactor", "distributor", "querier"]));
    // The gateway mounts both files where nginx.conf's `include` finds routes.conf.
    expect(services.gateway!.volumes).toEqual([
      "./deploy/nginx/nginx.conf:/etc/nginx/nginx.conf:ro",
      "./deploy/nginx/routes.conf:/etc/nginx/routes.conf:ro",
    ]);
  });

  test("the gateway is the one entry point: nginx listens on the port compose publishes as the host's 3100", () => {
    const listen = nginxListenPorts(repoText("deploy/nginx/nginx.conf"));
    expect(listen).toEqual([3100]);
    expect(services.gateway!.ports).toEqual([`3100:${listen[0]}`]);
    for (const name of sieveServices) expect(services[name]!.ports, name).toBeUndefined();
    const health = services.gateway!.healthcheck!.test as string[];
    expect(health.join(" ")).toContain(`http://127.0.0.1:${listen[0]}/ready`);
  });

  test("Prometheus scrapes every Sieve service's /metrics on its port, one job per role, and MinIO", () => {
    const config = repoYaml("deploy/prometheus/prometheus.yml") as {
      scrape_configs: {
        job_name: string;
        metrics_path?: string;
        static_configs: { targets: string[] }[];
      }[];
    };
    const jobs = new Map(config.scrape_configs.map((job) => [job.job_name, job]));
    for (const role of ROLES) {
      const job = jobs.get(role);
      expect(job, role).toBeDefined();
      expect(job!.metrics_path ?? "/metrics").toBe("/metrics");
      const targets = job!.static_configs.flatMap((c) => c.targets);
      expect(targets.map((t) => hostPort(t)[0]).sort(), role).toEqual(replicas(role).sort());
      for (const target of targets) {
        const [host, port] = hostPort(target);
        expect(port, target).toBe(sievePort(host));
      }
    }
    expect(jobs.get("minio")?.static_configs[0]?.targets).toEqual(["minio:9000"]);
    expect(services.minio!.environment!.MINIO_PROMETHEUS_AUTH_TYPE).toBe("public");
    expect(services.prometheus!.volumes).toContain(
      "./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro",
    );
  });
});

describe("start order", () => {
  /** Every service `name` waits for, directly or not, with the condition of the direct wait. */
  function waitsFor(name: string, seen = new Set<string>()): Set<string> {
    for (const dep of Object.keys(dependencies(services[name]!))) {
      if (seen.has(dep)) continue;
      seen.add(dep);
      waitsFor(dep, seen);
    }
    return seen;
  }

  test("every depends_on names a service of this file, with a health or completion condition", () => {
    for (const [name, service] of Object.entries(services)) {
      for (const [dep, condition] of Object.entries(dependencies(service))) {
        expect(Object.keys(services), `${name} → ${dep}`).toContain(dep);
        const wanted = dep === "minio-init" ? "service_completed_successfully" : "service_healthy";
        expect(condition, `${name} → ${dep}`).toBe(wanted);
        // A healthy condition needs a health check: compose's own, or the image's.
        if (wanted === "service_healthy" && !sieveServices.includes(dep)) {
          expect(services[dep]!.healthcheck, dep).toBeDefined();
        }
      }
    }
  });

  test("Kafka and the bucket come first, the distributors (which create the topic) before the ingesters, the ingesters and gateways before the queriers, the queriers before the gateway", () => {
    for (const name of sieveServices) {
      expect(waitsFor(name), name).toContain("minio-init");
    }
    for (const name of [...replicas("distributor"), ...replicas("ingester")]) {
      expect(waitsFor(name), name).toContain("kafka");
    }
    for (const name of replicas("ingester")) {
      for (const d of replicas("distributor")) expect(waitsFor(name), name).toContain(d);
    }
    for (const name of replicas("querier")) {
      for (const d of [...replicas("ingester"), ...replicas("bloom-gateway")]) {
        expect(waitsFor(name), name).toContain(d);
      }
    }
    for (const d of [...replicas("distributor"), ...replicas("querier")]) {
      expect(waitsFor("gateway")).toContain(d);
    }
    expect(waitsFor("grafana")).toContain("gateway");
    expect(waitsFor("grafana")).toContain("prometheus");
    expect(waitsFor("minio-init")).toContain("minio");
  });
});
