import { resolve } from "node:path";
import { configFiles, thrown } from "@sieve/config/testing";
import { afterAll, describe, expect, it } from "vitest";
import {
  checkTarget,
  loadSieveConfig,
  SieveConfigError,
  type SieveConfigSources,
} from "./config.js";

const files = configFiles();
afterAll(files.remove);
const file = files.write;

describe("loadSieveConfig", () => {
  it("works with nothing: sieve all on 3100 with a WAL and a filesystem store under ./data", () => {
    const config = loadSieveConfig({ env: {} });
    expect(config.server).toEqual({ host: "0.0.0.0", port: 3100, workerInitialOldSpaceMb: 256 });
    expect(config.dataDir).toBe(resolve("data"));
    expect(config.storage.backend).toBe("filesystem");
    expect(config.storage.dir).toBe(resolve("data", "store"));
    expect(config.queue).toMatchObject({
      backend: "wal",
      partitions: 4,
      walDir: resolve("data", "wal"),
    });
  });

  const cases: {
    name: string;
    sources: () => SieveConfigSources;
    check: (c: ReturnType<typeof loadSieveConfig>) => void;
  }[] = [
    {
      name: "the file sets options and leaves component sections to the components",
      sources: () => ({
        file: file(
          "server: { port: 3200 }\ndataDir: /tmp/x\ningester: { chunkTargetBytes: 1024 }\nqueue: { partitions: 8 }\n",
        ),
        env: {},
      }),
      check: (c) => {
        expect(c.server.port).toBe(3200);
        expect(c.storage.dir).toBe("/tmp/x/store");
        expect(c.queue.partitions).toBe(8);
      },
    },
    {
      name: "the environment wins over the file",
      sources: () => ({ file: file("server: { port: 3200 }\n"), env: { SIEVE_PORT: "3300" } }),
      check: (c) => {
        expect(c.server.port).toBe(3300);
      },
    },
    {
      name: "flags win over the environment",
      sources: () => ({
        env: { SIEVE_PORT: "3300", SIEVE_DATA_DIR: "/a" },
        flags: { port: "0", dataDir: "/b" },
      }),
      check: (c) => {
        expect(c.server.port).toBe(0);
        expect(c.dataDir).toBe("/b");
        expect(c.queue.walDir).toBe("/b/wal");
      },
    },
    {
      name: "the internal listener is off unless a port is given (0: any free port)",
      sources: () => ({ file: file("server: { internalPort: 9095 }\n"), env: {} }),
      check: (c) => {
        expect(c.server.internalPort).toBe(9095);
        expect(loadSieveConfig({ env: {} }).server.internalPort).toBeUndefined();
        expect(loadSieveConfig({ env: { SIEVE_INTERNAL_PORT: "0" } }).server.internalPort).toBe(0);
        expect(thrown(() => loadSieveConfig({ env: { SIEVE_INTERNAL_PORT: "x" } }))).toBeInstanceOf(
          SieveConfigError,
        );
      },
    },
    {
      name: "lists come from YAML sequences or comma-separated variables",
      sources: () => ({
        file: file("cluster: { ingesterUrls: [ 'http://a:1', 'http://b:2' ] }\n"),
        env: { SIEVE_BLOOM_GATEWAY_URLS: "http://g:1, http://g:2" },
      }),
      check: (c) => {
        expect(c.cluster.ingesterUrls).toEqual(["http://a:1", "http://b:2"]);
        expect(c.cluster.bloomGatewayUrls).toEqual(["http://g:1", "http://g:2"]);
      },
    },
    {
      name: "S3 and Kafka",
      sources: () => ({
        env: {
          SIEVE_STORAGE_BACKEND: "s3",
          SIEVE_S3_BUCKET: "logs",
          SIEVE_S3_FORCE_PATH_STYLE: "true",
          SIEVE_QUEUE_BACKEND: "kafka",
          SIEVE_KAFKA_BROKERS: "127.0.0.1:9092",
        },
      }),
      check: (c) => {
        expect(c.storage).toMatchObject({
          backend: "s3",
          s3: { bucket: "logs", forcePathStyle: true },
        });
        expect(c.queue.kafka.brokers).toEqual(["127.0.0.1:9092"]);
      },
    },
  ];
  for (const { name, sources, check } of cases)
    it(name, () => {
      check(loadSieveConfig(sources()));
    });

  const refusals: { name: string; sources: () => SieveConfigSources; code: string; key: string }[] =
    [
      {
        name: "an unknown top-level key",
        sources: () => ({ file: file("serv: {}\n"), env: {} }),
        code: "unknown_key",
        key: "serv",
      },
      {
        name: "an unknown nested key",
        sources: () => ({ file: file("server: { prot: 1 }\n"), env: {} }),
        code: "unknown_key",
        key: "server.prot",
      },
      {
        name: "a port out of range",
        sources: () => ({ env: { SIEVE_PORT: "70000" } }),
        code: "out_of_range",
        key: "SIEVE_PORT",
      },
      {
        name: "a worker's initial old space below 0",
        sources: () => ({ env: { SIEVE_SERVER_WORKER_INITIAL_OLD_SPACE_MB: "-1" } }),
        code: "out_of_range",
        key: "SIEVE_SERVER_WORKER_INITIAL_OLD_SPACE_MB",
      },
      {
        name: "a port that is not a number",
        sources: () => ({ env: {}, flags: { port: "abc" } }),
        code: "invalid_type",
        key: "--port",
      },
      {
        name: "zero partitions",
        sources: () => ({ file: file("queue: { partitions: 0 }\n"), env: {} }),
        code: "out_of_range",
        key: "queue.partitions",
      },
      {
        name: "an unknown storage backend",
        sources: () => ({ env: { SIEVE_STORAGE_BACKEND: "gcs" } }),
        code: "invalid_value",
        key: "storage.backend",
      },
      {
        name: "S3 without a bucket",
        sources: () => ({ env: { SIEVE_STORAGE_BACKEND: "s3" } }),
        code: "invalid_value",
        key: "storage.s3.bucket",
      },
      {
        name: "Kafka without brokers",
        sources: () => ({ env: { SIEVE_QUEUE_BACKEND: "kafka" } }),
        code: "invalid_value",
        key: "queue.kafka.brokers",
      },
      {
        name: "a boolean that is not one",
        sources: () => ({ env: { SIEVE_S3_FORCE_PATH_STYLE: "yes" } }),
        code: "invalid_type",
        key: "SIEVE_S3_FORCE_PATH_STYLE",
      },
      {
        name: "a file that is not YAML",
        sources: () => ({ file: file("server: [\n"), env: {} }),
        code: "invalid_yaml",
        key: "",
      },
      {
        name: "a file whose top level is not a mapping",
        sources: () => ({ file: file("- server\n"), env: {} }),
        code: "invalid_type",
        key: "(root)",
      },
      {
        name: "a file that is missing",
        sources: () => ({ file: files.path("missing.yaml"), env: {} }),
        code: "unreadable_file",
        key: "",
      },
    ];
  for (const { name, sources, code, key } of refusals) {
    it(`refuses ${name} by name`, () => {
      const error = thrown(() => loadSieveConfig(sources()));
      expect(error).toBeInstanceOf(SieveConfigError);
      expect((error as SieveConfigError).code).toBe(code);
      if (key !== "") expect((error as SieveConfigError).key).toBe(key);
    });
  }
});

describe("one tree", () => {
  it("hands each component its typed section from the one file", () => {
    const c = loadSieveConfig({
      file: file(
        "ingester: { chunkTargetBytes: 2048 }\nbloomGateway: { readTimeoutMs: 7 }\nquerier: { workers: 0 }\n",
      ),
      env: { SIEVE_DISTRIBUTOR_MAX_BODY_BYTES: "1000" },
    });
    expect(c.ingester.chunkTargetBytes).toBe(2048);
    expect(c.bloomGateway.readTimeoutMs).toBe(7);
    expect(c.querier.workers).toBe(0);
    expect(c.distributor.maxBodyBytes).toBe(1000);
  });

  it("refuses a bad component option by its path, as the component does", () => {
    const error = thrown(() =>
      loadSieveConfig({ file: file("querier: { cacheBytes: 1 }\n"), env: {} }),
    );
    expect(error).toMatchObject({ code: "unknown_key", key: "querier.cacheBytes" });
  });

  it.each<[string, string, Record<string, string>, boolean, boolean]>([
    ["off by default", "", {}, false, false],
    ["the top-level key for both", "authEnabled: true\n", {}, true, true],
    ["the top-level variable for both", "", { SIEVE_AUTH_ENABLED: "true" }, true, true],
    [
      "an older per-section key wins for its component",
      "authEnabled: true\nquerier: { authEnabled: false }\n",
      {},
      true,
      false,
    ],
    [
      "the older per-section keys alone",
      "distributor: { authEnabled: true }\nquerier: { authEnabled: true }\n",
      {},
      true,
      true,
    ],
  ])("authEnabled: %s", (_name, yaml, env, distributor, querier) => {
    const c = loadSieveConfig({ ...(yaml !== "" && { file: file(yaml) }), env });
    expect(c.distributor.authEnabled).toBe(distributor);
    expect(c.querier.authEnabled).toBe(querier);
  });

  it("reads every variable by the rule, and the older name when the rule's is unset", () => {
    const c = loadSieveConfig({
      env: {
        SIEVE_SERVER_PORT: "3400",
        SIEVE_PORT: "3300",
        SIEVE_S3_REGION: "eu-west-1",
        SIEVE_QUEUE_KAFKA_TOPIC: "t",
        SIEVE_CLUSTER_INGESTER_URLS: "http://i:1",
        SIEVE_LOG_LEVEL: "debug",
      },
    });
    expect(c.server.port).toBe(3400);
    expect(c.storage.s3.region).toBe("eu-west-1");
    expect(c.queue.kafka.topic).toBe("t");
    expect(c.cluster.ingesterUrls).toEqual(["http://i:1"]);
    expect(c.logLevel).toBe("debug");
  });

  it("refuses an unknown log level", () => {
    expect(thrown(() => loadSieveConfig({ env: { SIEVE_LOG_LEVEL: "loud" } }))).toMatchObject({
      code: "invalid_value",
      key: "logLevel",
    });
  });
});

describe("checkTarget", () => {
  const base = loadSieveConfig({ env: {} });
  it("refuses a lone querier without ingester URLs, naming the option", () => {
    const error = thrown(() => {
      checkTarget(base, "querier");
    });
    expect(error).toBeInstanceOf(SieveConfigError);
    expect(error).toMatchObject({ code: "invalid_value", key: "cluster.ingesterUrls" });
    expect((error as Error).message).toMatch(/queryStoreOnly/);
  });

  it("lets it read only the store on purpose, or with ingesters; sieve all needs none", () => {
    const storeOnly = loadSieveConfig({ env: { SIEVE_QUERIER_QUERY_STORE_ONLY: "true" } });
    const withIngesters = loadSieveConfig({ env: { SIEVE_INGESTER_URLS: "http://i:1" } });
    for (const [config, target] of [
      [storeOnly, "querier"],
      [withIngesters, "querier"],
      [base, "all"],
      [base, "distributor"],
    ] as const) {
      expect(
        thrown(() => {
          checkTarget(config, target);
        }),
      ).toBeUndefined();
    }
  });
});

describe("layered files (--config-file repeated)", () => {
  it("lays each file over the ones before, then the environment over all", () => {
    const common = file(
      "server: { port: 3100 }\nqueue: { backend: kafka, kafka: { brokers: [a:1], topic: t } }\n",
    );
    const role = file("queue: { kafka: { groupId: g } }\nserver: { port: 3200 }\n");
    const c = loadSieveConfig({
      file: [common, role],
      env: { SIEVE_QUEUE_KAFKA_BROKERS: "b:2,c:3" },
    });
    expect(c.server.port).toBe(3200);
    expect(c.queue.kafka).toMatchObject({ topic: "t", groupId: "g", brokers: ["b:2", "c:3"] });
  });

  it("refuses a heartbeat period over a third of the session timeout", () => {
    const error = thrown(() =>
      loadSieveConfig({
        env: {
          SIEVE_QUEUE_KAFKA_SESSION_TIMEOUT_MS: "6000",
          SIEVE_QUEUE_KAFKA_HEARTBEAT_INTERVAL_MS: "2500",
        },
      }),
    );
    expect(error).toMatchObject({ code: "invalid_value", key: "queue.kafka.heartbeatIntervalMs" });
  });

  // The cluster configs are the ones docker-compose.yml and scripts/cluster.sh start every
  // role with: each role must start from them as they are.
  const deploy = (name: string): string =>
    resolve(import.meta.dirname, "../../../deploy/sieve", `${name}.yaml`);
  it.each(["distributor", "ingester", "bloom-gateway", "querier"])(
    "deploy/sieve/common.yaml + %s.yaml is a valid tree for its role",
    (role) => {
      const c = loadSieveConfig({ file: [deploy("common"), deploy(role)], env: {} });
      checkTarget(c, role);
      expect(c.server.port).toBe(3100);
      expect(c.queue).toMatchObject({ backend: "kafka", kafka: { brokers: ["kafka:9092"] } });
      expect(c.storage).toMatchObject({
        backend: "s3",
        s3: { bucket: "sieve", endpoint: "http://minio:9000" },
      });
      // The tenants' limits of common.yaml survive the role's file.
      expect(c.distributor.limits.ingestionRateBytes).toBe(32 * 1024 * 1024);
      if (role === "querier") {
        expect(c.cluster.ingesterUrls).toEqual([
          "http://ingester-1:3100",
          "http://ingester-2:3100",
        ]);
        expect(c.cluster.bloomGatewayUrls).toEqual([
          "http://bloom-gateway-1:3100",
          "http://bloom-gateway-2:3100",
        ]);
      }
      if (role === "ingester") expect(c.queue.kafka.sessionTimeoutMs).toBe(10_000);
    },
  );
});
