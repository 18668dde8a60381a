import { isAbsolute, join, resolve } from "node:path";
import {
  applyText,
  CONFIG_ERRORS,
  ConfigError,
  defineSchema,
  loadSection,
  optionRows,
  readConfigFile,
  readConfigFiles,
} from "@sieve/config";
import type { ConfigErrorCode, Env, Mapping, OptionRow } from "@sieve/config";
import { loadConfig as loadGatewayConfig, type BloomGatewayConfig } from "@sieve/bloom-gateway";
import { loadConfig as loadCompactorConfig, type CompactorConfig } from "@sieve/compactor";
import { loadConfig as loadDistributorConfig, type DistributorConfig } from "@sieve/distributor";
import { loadConfig as loadIngesterConfig, type IngesterConfig } from "@sieve/ingester";
import { loadConfig as loadQuerierConfig, type QuerierConfig } from "@sieve/querier";

/**
 * Sieve's one configuration tree, Loki-style: shared top-level options (where it listens,
 * where data lives, which queue and object store, where the other components are, whether
 * tenants authenticate) and a section per component (`distributor`, `ingester`, `querier`,
 * `bloomGateway`, `compactor`), each read by the component's own schema. The file is read and
 * validated once, here; each component is handed its typed section (docs/configuration.md).
 */
export interface SieveConfig {
  readonly server: {
    readonly host: string;
    readonly port: number;
    /**
     * Where the internal APIs (`/flush`, the ingester's query API, the bloom gateway's
     * filter API) listen, on `host`; undefined: on `port` with the public API. Loki keeps
     * them on its internal gRPC port; the cluster configs set this.
     */
    readonly internalPort: number | undefined;
    /**
     * V8's `--initial-old-space-size` for the process's worker threads (ingest, decode and
     * query workers), MiB; 0 leaves V8's own. See main.ts.
     */
    readonly workerInitialOldSpaceMb: number;
  };
  /** Root of everything local: the write-ahead log and the filesystem store default under it. */
  readonly dataDir: string;
  /** Loki's `auth_enabled`: whether pushes and queries must name their tenant (X-Scope-OrgID). */
  readonly authEnabled: boolean;
  /** pino's level for the process's log. */
  readonly logLevel: string;
  readonly storage: StorageConfig;
  readonly queue: QueueConfig;
  readonly cluster: ClusterConfig;
  readonly distributor: DistributorConfig;
  readonly ingester: IngesterConfig;
  readonly querier: QuerierConfig;
  readonly bloomGateway: BloomGatewayConfig;
  /** The compactor, and the retention the querier applies too. */
  readonly compactor: CompactorConfig;
}

/** The object store: a directory (embedded default) or an S3 bucket. */
export interface StorageConfig {
  readonly backend: "filesystem" | "s3";
  /** Filesystem root; default `<dataDir>/store`. */
  readonly dir: string;
  readonly s3: {
    readonly bucket: string;
    /** Empty: the AWS SDK's region chain. */
    readonly region: string;
    /** Empty: AWS. For MinIO e.g. `http://127.0.0.1:9000`. */
    readonly endpoint: string;
    readonly forcePathStyle: boolean;
  };
}

/** The queue between distributors and ingesters: a local write-ahead log or Kafka. */
export interface QueueConfig {
  readonly backend: "wal" | "kafka";
  readonly partitions: number;
  /** Write-ahead log directory; default `<dataDir>/wal`. */
  readonly walDir: string;
  readonly kafka: {
    readonly brokers: readonly string[];
    readonly topic: string;
    readonly groupId: string;
    /** An ingester that misses heartbeats this long loses its partitions to the others. */
    readonly sessionTimeoutMs: number;
    readonly heartbeatIntervalMs: number;
  };
}

/** Addresses of the other components, for the distributed targets. */
export interface ClusterConfig {
  /** Base URLs of every ingester (the querier asks them all for unflushed data). */
  readonly ingesterUrls: readonly string[];
  /** Base URLs of the bloom gateways (requests are routed by jump hash of the block key). */
  readonly bloomGatewayUrls: readonly string[];
}

/**
 * The one table of configuration errors, under the name this package has always exported:
 * the shared options and every component throw its codes.
 */
export const SIEVE_CONFIG_ERRORS = CONFIG_ERRORS;
/** A code of {@link SIEVE_CONFIG_ERRORS}. */
export type SieveConfigErrorCode = ConfigErrorCode;

/** A configuration error naming the option: `@sieve/config`'s `ConfigError`, by its older name. */
export const SieveConfigError = ConfigError;
/** An instance of {@link SieveConfigError}. */
export type SieveConfigError = ConfigError;

/** Reads a YAML file into a mapping (empty file: empty mapping); from `@sieve/config`. */
export { readConfigFile };

/** Where the configuration comes from, lowest precedence first. */
export interface SieveConfigSources {
  /**
   * The YAML file, or files laid over each other in order (`--config-file` repeated: a
   * cluster's shared file, then the role's), mappings merged key by key, lists and scalars
   * replaced (`layerMappings` of `@sieve/config`).
   */
  readonly file?: string | readonly string[];
  readonly env?: Env;
  /** Command-line flags, which win over everything. */
  readonly flags?: { readonly port?: string; readonly dataDir?: string; readonly host?: string };
}

// The shared options, one schema per top-level section, read like a component's section.
// Their variables follow the one rule (`SIEVE_` + dotted path); the names they had before
// the rule are still read (envAliases).

const ROOT = defineSchema({
  section: "",
  defaults: { dataDir: "./data", authEnabled: false, logLevel: "info" },
  docs: {
    dataDir: "local data: write-ahead log and filesystem store (`--data-dir`)",
    authEnabled:
      "require `X-Scope-OrgID` on pushes and queries (Loki's `auth_enabled`); off, every request is tenant `fake`",
    logLevel: "pino level: `fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`",
  },
});

const SERVER = defineSchema({
  section: "server",
  defaults: {
    host: "0.0.0.0",
    port: 3100,
    internalPort: null as number | null,
    workerInitialOldSpaceMb: 256,
  },
  ranges: { port: [0, 65535], internalPort: [0, 65535], workerInitialOldSpaceMb: [0, 65536] },
  envAliases: { host: "SIEVE_HOST", port: "SIEVE_PORT", internalPort: "SIEVE_INTERNAL_PORT" },
  docs: {
    host: "address to listen on (`--host`)",
    port: "HTTP port of every route of the process (`--port`)",
    internalPort: "internal APIs' port (`/flush`, ingester, gateway); unset: `server.port`",
    workerInitialOldSpaceMb:
      "V8 old space each worker thread starts with, MiB (`--initial-old-space-size`): no full collection until a worker's heap holds that much; 0: V8's own",
  },
});

const STORAGE = defineSchema({
  section: "storage",
  defaults: {
    backend: "filesystem",
    dir: "",
    s3: { bucket: "", region: "", endpoint: "", forcePathStyle: false },
  },
  group: "s3",
  envAliases: {
    "s3.bucket": "SIEVE_S3_BUCKET",
    "s3.region": "SIEVE_S3_REGION",
    "s3.endpoint": "SIEVE_S3_ENDPOINT",
    "s3.forcePathStyle": "SIEVE_S3_FORCE_PATH_STYLE",
  },
  shownDefaults: { dir: "`<dataDir>/store`", "s3.region": "SDK chain", "s3.endpoint": "AWS" },
  docs: {
    backend: "`filesystem` or `s3`",
    dir: "root of the filesystem store",
    s3: {
      bucket: "bucket (must exist); required with `s3`",
      region: "region",
      endpoint: "endpoint of an S3-compatible store, e.g. `http://127.0.0.1:9000`",
      forcePathStyle: "path-style addressing (MinIO needs it)",
    },
  },
});

const QUEUE = defineSchema({
  section: "queue",
  defaults: {
    backend: "wal",
    partitions: 4,
    walDir: "",
    kafka: {
      brokers: [] as string[],
      topic: "sieve-push",
      groupId: "sieve-ingesters",
      sessionTimeoutMs: 30_000,
      heartbeatIntervalMs: 3000,
    },
  },
  group: "kafka",
  // Kafka's group.min/max.session.timeout.ms defaults bound what a broker accepts.
  ranges: {
    partitions: [1, 4096],
    "kafka.sessionTimeoutMs": [6000, 1_800_000],
    "kafka.heartbeatIntervalMs": [100, 600_000],
  },
  envAliases: {
    walDir: "SIEVE_WAL_DIR",
    "kafka.brokers": "SIEVE_KAFKA_BROKERS",
    "kafka.topic": "SIEVE_KAFKA_TOPIC",
    "kafka.groupId": "SIEVE_KAFKA_GROUP_ID",
  },
  shownDefaults: { walDir: "`<dataDir>/wal`" },
  docs: {
    backend: "`wal` (one process) or `kafka`",
    partitions: "partitions of the log or the topic (fixed once created)",
    walDir: "write-ahead log directory",
    kafka: {
      brokers: "`host:port` list (comma-separated in the environment)",
      topic: "topic, created with `queue.partitions` if missing",
      groupId: "consumer group of the ingesters",
      sessionTimeoutMs:
        "an ingester that sends no heartbeat this long is dropped from the group, and its partitions go to the others",
      heartbeatIntervalMs:
        "an ingester's heartbeat period (well under `sessionTimeoutMs`: a third at most)",
    },
  },
});

const CLUSTER = defineSchema({
  section: "cluster",
  defaults: { ingesterUrls: [] as string[], bloomGatewayUrls: [] as string[] },
  envAliases: { ingesterUrls: "SIEVE_INGESTER_URLS", bloomGatewayUrls: "SIEVE_BLOOM_GATEWAY_URLS" },
  docs: {
    ingesterUrls:
      "every ingester's base URL, for a separate querier (which refuses to start without, unless `querier.queryStoreOnly`)",
    bloomGatewayUrls: "the gateways' base URLs; empty: the querier prunes in process",
  },
});

/** Each component's schema, by its section: the components own their options. */
export const COMPONENT_SCHEMAS = {
  distributor: loadDistributorConfig.schema,
  ingester: loadIngesterConfig.schema,
  querier: loadQuerierConfig.schema,
  bloomGateway: loadGatewayConfig.schema,
  compactor: loadCompactorConfig.schema,
} as const;

/** The shared options, documented: for `sieve --help` and docs/configuration.md. */
export const SIEVE_OPTIONS: readonly OptionRow[] = [
  ...optionRows(SERVER, "server."),
  ...optionRows(ROOT),
  ...optionRows(STORAGE, "storage."),
  ...optionRows(QUEUE, "queue."),
  ...optionRows(CLUSTER, "cluster."),
];

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/** Refuses a top-level key that is neither a shared option nor a section, by name. */
function checkTopLevel(doc: Readonly<Mapping>): void {
  const known = [
    ...[SERVER, STORAGE, QUEUE, CLUSTER].map((s) => s.section),
    ...ROOT.scalars,
    ...Object.keys(COMPONENT_SCHEMAS),
  ];
  for (const key of Object.keys(doc)) {
    if (!known.includes(key))
      throw new ConfigError("unknown_key", key, `known: ${known.join(", ")}`);
  }
}

/**
 * The whole tree: defaults, then the file or files (each read once, later over earlier), then `SIEVE_*` environment
 * variables, then flags; every section validated. Unknown keys are refused by name, so a
 * typo never silently keeps a default. The top-level `authEnabled` is what the
 * distributor and the querier get unless their own (older) key is set.
 */
export function loadSieveConfig(sources: SieveConfigSources = {}): SieveConfig {
  const env = sources.env ?? process.env;
  const file = sources.file ?? [];
  const doc = readConfigFiles(typeof file === "string" ? [file] : file);
  checkTopLevel(doc);
  const flags = sources.flags ?? {};
  const rootValues = Object.fromEntries(
    ROOT.scalars.flatMap((k) => (k in doc ? [[k, doc[k]]] : [])),
  );
  let root = loadSection(ROOT, { values: rootValues, env });
  if (flags.dataDir !== undefined)
    root = applyText(ROOT, root, "dataDir", flags.dataDir, "--data-dir");
  let server = loadSection(SERVER, { doc, env });
  if (flags.port !== undefined) server = applyText(SERVER, server, "port", flags.port, "--port");
  if (flags.host !== undefined) server = applyText(SERVER, server, "host", flags.host, "--host");
  const storage = loadSection(STORAGE, { doc, env });
  const queue = loadSection(QUEUE, { doc, env });
  const cluster = loadSection(CLUSTER, { doc, env });

  if (!LOG_LEVELS.includes(root.logLevel)) {
    throw new ConfigError("invalid_value", "logLevel", LOG_LEVELS.join(", "));
  }
  if (storage.backend !== "filesystem" && storage.backend !== "s3") {
    throw new ConfigError("invalid_value", "storage.backend", "filesystem or s3");
  }
  if (queue.backend !== "wal" && queue.backend !== "kafka") {
    throw new ConfigError("invalid_value", "queue.backend", "wal or kafka");
  }
  if (storage.backend === "s3" && storage.s3.bucket === "") {
    throw new ConfigError("invalid_value", "storage.s3.bucket", "required with storage.backend s3");
  }
  if (queue.kafka.heartbeatIntervalMs * 3 > queue.kafka.sessionTimeoutMs) {
    throw new ConfigError(
      "invalid_value",
      "queue.kafka.heartbeatIntervalMs",
      "at most a third of queue.kafka.sessionTimeoutMs, as Kafka advises",
    );
  }
  if (queue.backend === "kafka" && queue.kafka.brokers.length === 0) {
    throw new ConfigError(
      "invalid_value",
      "queue.kafka.brokers",
      "required with queue.backend kafka",
    );
  }

  const dataDir = resolve(root.dataDir);
  const under = (dir: string, name: string): string => {
    if (dir === "") return join(dataDir, name);
    return isAbsolute(dir) ? dir : resolve(dir);
  };
  const shared = { authEnabled: root.authEnabled };
  return {
    server: { ...server, internalPort: server.internalPort ?? undefined },
    dataDir,
    authEnabled: root.authEnabled,
    logLevel: root.logLevel,
    storage: { ...storage, backend: storage.backend, dir: under(storage.dir, "store") },
    queue: { ...queue, backend: queue.backend, walDir: under(queue.walDir, "wal") },
    cluster,
    distributor: loadDistributorConfig({ doc, env, base: shared }),
    ingester: loadIngesterConfig({ doc, env }),
    querier: loadQuerierConfig({ doc, env, base: shared }),
    bloomGateway: loadGatewayConfig({ doc, env }),
    compactor: loadCompactorConfig({ doc, env }),
  };
}

/**
 * Checks what a target needs beyond a valid tree: a lone querier (`sieve querier`) must
 * know the ingesters, or it would silently answer without every entry not yet flushed,
 * unless `querier.queryStoreOnly` says that is the point. `sieve all` has its own ingester.
 */
export function checkTarget(config: SieveConfig, target: string): void {
  if (target !== "querier" || config.cluster.ingesterUrls.length > 0) return;
  if (config.querier.queryStoreOnly) return;
  throw new ConfigError(
    "invalid_value",
    "cluster.ingesterUrls",
    "`sieve querier` needs the ingesters' URLs (SIEVE_CLUSTER_INGESTER_URLS), or querier.queryStoreOnly: true to read only the object store",
  );
}
