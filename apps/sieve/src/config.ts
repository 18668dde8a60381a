import { isAbsolute, join, resolve } from "node:path";
import { CONFIG_ERRORS, ConfigError, isMapping, readConfigFile } from "@sieve/config";
import type { Env } from "@sieve/config";

/**
 * The process-level configuration of the `sieve` command: where it listens, where data
 * lives, which queue and object store it uses, and where the other components are when
 * they run as separate processes. Each component reads its own section of the same file
 * (`distributor`, `ingester`, `querier`, `bloomGateway`; see docs/configuration.md).
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
  };
  /** Root of everything local: the write-ahead log and the filesystem store default under it. */
  readonly dataDir: string;
  readonly storage: StorageConfig;
  readonly queue: QueueConfig;
  readonly cluster: ClusterConfig;
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
  };
}

/** Addresses of the other components, for the distributed targets. */
export interface ClusterConfig {
  /** Base URLs of every ingester (the querier asks them all for unflushed data). */
  readonly ingesterUrls: readonly string[];
  /** Base URLs of the bloom gateways (requests are routed by jump hash of the block key). */
  readonly bloomGatewayUrls: readonly string[];
}

/** The sections the `sieve` command itself reads; the components read theirs. */
const COMPONENT_SECTIONS = ["distributor", "ingester", "querier", "bloomGateway"] as const;

/**
 * Every way the process configuration can be refused: the shared codes the command uses.
 * A value of the wrong kind or range is `invalid_value`; `invalid_type` is a file whose
 * top level is not a mapping.
 */
export const SIEVE_CONFIG_ERRORS = {
  unreadable_file: CONFIG_ERRORS.unreadable_file,
  invalid_yaml: CONFIG_ERRORS.invalid_yaml,
  unknown_key: CONFIG_ERRORS.unknown_key,
  invalid_type: CONFIG_ERRORS.invalid_type,
  invalid_value: CONFIG_ERRORS.invalid_value,
} as const;

/** A code of {@link SIEVE_CONFIG_ERRORS}. */
export type SieveConfigErrorCode = keyof typeof SIEVE_CONFIG_ERRORS;

/**
 * A configuration error naming the option (dotted path, environment variable or flag): the
 * shared `ConfigError` of `@sieve/config`, which the components throw too, under the name
 * this package has always exported.
 */
export const SieveConfigError = ConfigError;
/** An instance of {@link SieveConfigError}. */
export type SieveConfigError = ConfigError;

/** Reads a YAML file into a mapping (empty file: empty mapping); from `@sieve/config`. */
export { readConfigFile };

/** Where the configuration comes from, lowest precedence first. */
export interface SieveConfigSources {
  readonly file?: string;
  readonly env?: Env;
  /** Command-line flags, which win over everything. */
  readonly flags?: { readonly port?: string; readonly dataDir?: string; readonly host?: string };
}

type Kind = "string" | "port" | "optionalPort" | "partitions" | "boolean" | "list";

/** One option: its dotted path, kind, default and environment variable. */
interface Option {
  readonly path: string;
  readonly kind: Kind;
  readonly env: string;
  readonly fallback: string | number | boolean | readonly string[] | null;
}

// Config is data: every option in one line (STYLE.md 11). Empty directories default under dataDir.
const OPTIONS: readonly Option[] = [
  { path: "server.host", kind: "string", env: "SIEVE_HOST", fallback: "0.0.0.0" },
  { path: "server.port", kind: "port", env: "SIEVE_PORT", fallback: 3100 },
  {
    path: "server.internalPort",
    kind: "optionalPort",
    env: "SIEVE_INTERNAL_PORT",
    fallback: null,
  },
  { path: "dataDir", kind: "string", env: "SIEVE_DATA_DIR", fallback: "./data" },
  { path: "storage.backend", kind: "string", env: "SIEVE_STORAGE_BACKEND", fallback: "filesystem" },
  { path: "storage.dir", kind: "string", env: "SIEVE_STORAGE_DIR", fallback: "" },
  { path: "storage.s3.bucket", kind: "string", env: "SIEVE_S3_BUCKET", fallback: "" },
  { path: "storage.s3.region", kind: "string", env: "SIEVE_S3_REGION", fallback: "" },
  { path: "storage.s3.endpoint", kind: "string", env: "SIEVE_S3_ENDPOINT", fallback: "" },
  {
    path: "storage.s3.forcePathStyle",
    kind: "boolean",
    env: "SIEVE_S3_FORCE_PATH_STYLE",
    fallback: false,
  },
  { path: "queue.backend", kind: "string", env: "SIEVE_QUEUE_BACKEND", fallback: "wal" },
  { path: "queue.partitions", kind: "partitions", env: "SIEVE_QUEUE_PARTITIONS", fallback: 4 },
  { path: "queue.walDir", kind: "string", env: "SIEVE_WAL_DIR", fallback: "" },
  { path: "queue.kafka.brokers", kind: "list", env: "SIEVE_KAFKA_BROKERS", fallback: [] },
  { path: "queue.kafka.topic", kind: "string", env: "SIEVE_KAFKA_TOPIC", fallback: "sieve-push" },
  {
    path: "queue.kafka.groupId",
    kind: "string",
    env: "SIEVE_KAFKA_GROUP_ID",
    fallback: "sieve-ingesters",
  },
  { path: "cluster.ingesterUrls", kind: "list", env: "SIEVE_INGESTER_URLS", fallback: [] },
  {
    path: "cluster.bloomGatewayUrls",
    kind: "list",
    env: "SIEVE_BLOOM_GATEWAY_URLS",
    fallback: [],
  },
];

/** The documented options, for `sieve --help` and docs/configuration.md. */
export const SIEVE_OPTIONS: readonly Pick<Option, "path" | "env" | "fallback">[] = OPTIONS;

/**
 * Defaults, then the file, then `SIEVE_*` environment variables, then flags; validated.
 * Unknown keys are refused by name, so a typo never silently keeps a default.
 */
export function loadSieveConfig(sources: SieveConfigSources = {}): SieveConfig {
  const env = sources.env ?? process.env;
  const values = new Map<string, unknown>();
  if (sources.file !== undefined) {
    const doc = readConfigFile(sources.file);
    flatten(doc, "", values);
  }
  const out: Record<string, unknown> = {};
  for (const option of OPTIONS) {
    let value: unknown = option.fallback;
    if (values.has(option.path)) value = coerce(option, option.path, values.get(option.path));
    const raw = env[option.env];
    if (raw !== undefined) value = coerce(option, option.env, raw);
    out[option.path] = value;
  }
  const flags = sources.flags ?? {};
  if (flags.port !== undefined) out["server.port"] = coerce(OPTIONS[1]!, "--port", flags.port);
  if (flags.dataDir !== undefined) out.dataDir = flags.dataDir;
  if (flags.host !== undefined) out["server.host"] = flags.host;
  return build(out);
}

function flatten(doc: Record<string, unknown>, prefix: string, into: Map<string, unknown>): void {
  for (const [key, value] of Object.entries(doc)) {
    const path = prefix + key;
    if (prefix === "" && (COMPONENT_SECTIONS as readonly string[]).includes(key)) continue;
    const known = OPTIONS.some((o) => o.path === path);
    const parent = OPTIONS.some((o) => o.path.startsWith(path + "."));
    if (known) into.set(path, value);
    else if (parent && isMapping(value)) flatten(value, path + ".", into);
    else {
      const roots = new Set([...OPTIONS.map((o) => o.path.split(".")[0]!), ...COMPONENT_SECTIONS]);
      throw new ConfigError("unknown_key", path, `known: ${[...roots].join(", ")}`);
    }
  }
}

function coerce(option: Option, name: string, raw: unknown): unknown {
  const text = typeof raw === "string" ? raw.trim() : raw;
  switch (option.kind) {
    case "string":
      if (typeof text !== "string") throw new ConfigError("invalid_value", name, "a string");
      return text;
    case "boolean":
      if (typeof text === "boolean") return text;
      if (text === "true" || text === "false") return text === "true";
      throw new ConfigError("invalid_value", name, "true or false");
    case "optionalPort":
      // Unset (empty or null): no listener of its own; otherwise a port as below.
      return text === "" || text === null ? null : coerce({ ...option, kind: "port" }, name, text);
    case "port":
    case "partitions": {
      const n = typeof text === "number" ? text : Number(text);
      const port = option.kind !== "partitions";
      const max = port ? 65535 : 4096;
      if (!Number.isInteger(n) || n < (port ? 0 : 1) || n > max) {
        throw new ConfigError("invalid_value", name, `an integer up to ${max}`);
      }
      return n;
    }
    case "list":
      if (Array.isArray(text) && text.every((v) => typeof v === "string")) return text;
      if (typeof text === "string")
        return text
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean);
      throw new ConfigError("invalid_value", name, "a list of strings (or comma-separated)");
  }
}

function build(v: Record<string, unknown>): SieveConfig {
  const str = (path: string): string => v[path] as string;
  const dataDir = resolve(str("dataDir"));
  const under = (path: string, name: string): string => {
    const dir = str(path);
    if (dir === "") return join(dataDir, name);
    return isAbsolute(dir) ? dir : resolve(dir);
  };
  const storageBackend = str("storage.backend");
  if (storageBackend !== "filesystem" && storageBackend !== "s3") {
    throw new ConfigError("invalid_value", "storage.backend", "filesystem or s3");
  }
  const queueBackend = str("queue.backend");
  if (queueBackend !== "wal" && queueBackend !== "kafka") {
    throw new ConfigError("invalid_value", "queue.backend", "wal or kafka");
  }
  const config: SieveConfig = {
    server: {
      host: str("server.host"),
      port: v["server.port"] as number,
      internalPort: (v["server.internalPort"] as number | null) ?? undefined,
    },
    dataDir,
    storage: {
      backend: storageBackend,
      dir: under("storage.dir", "store"),
      s3: {
        bucket: str("storage.s3.bucket"),
        region: str("storage.s3.region"),
        endpoint: str("storage.s3.endpoint"),
        forcePathStyle: v["storage.s3.forcePathStyle"] as boolean,
      },
    },
    queue: {
      backend: queueBackend,
      partitions: v["queue.partitions"] as number,
      walDir: under("queue.walDir", "wal"),
      kafka: {
        brokers: v["queue.kafka.brokers"] as string[],
        topic: str("queue.kafka.topic"),
        groupId: str("queue.kafka.groupId"),
      },
    },
    cluster: {
      ingesterUrls: v["cluster.ingesterUrls"] as string[],
      bloomGatewayUrls: v["cluster.bloomGatewayUrls"] as string[],
    },
  };
  if (config.storage.backend === "s3" && config.storage.s3.bucket === "") {
    throw new ConfigError("invalid_value", "storage.s3.bucket", "required with storage.backend s3");
  }
  if (config.queue.backend === "kafka" && config.queue.kafka.brokers.length === 0) {
    throw new ConfigError(
      "invalid_value",
      "queue.kafka.brokers",
      "required with queue.backend kafka",
    );
  }
  return config;
}
