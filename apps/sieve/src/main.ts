#!/usr/bin/env node
/**
 * `sieve <target>`: runs Sieve. `sieve all` (the default) runs every component in one
 * process on port 3100, with a write-ahead log and a filesystem store under `./data`.
 */
import { parseArgs } from "node:util";
import { setFlagsFromString } from "node:v8";
import { pino, type Logger } from "pino";
import { SIEVE_OPTIONS, loadSieveConfig } from "./config.js";
import { experimentCommand } from "./experiment/command.js";
import { TARGETS, start, type Target } from "./targets.js";

const USAGE = `Usage: sieve [${TARGETS.join(" | ")}] [options]
       sieve experiment run SPEC.yaml --out DIR [--quick]   (sieve experiment --help)

Options:
  --config-file F   YAML configuration (docs/configuration.md); repeatable, each file laid
                    over the ones before (mappings merged, lists and values replaced), e.g.
                    --config-file deploy/sieve/common.yaml --config-file deploy/sieve/querier.yaml
  --port P          HTTP port (default 3100)
  --data-dir D      local data: write-ahead log and filesystem store (default ./data)
  --host H          address to listen on (default 0.0.0.0)
  -h, --help        this text

Environment (every option of the file is also SIEVE_ + its dotted path in UPPER_SNAKE_CASE,
e.g. SIEVE_QUERIER_LIMITS_QUERY_TIMEOUT_MS; docs/configuration.md lists them all):
${SIEVE_OPTIONS.map((o) => `  ${o.env.padEnd(34)} ${o.option}${o.alias === undefined ? "" : ` (or ${o.alias})`}`).join("\n")}
`;

function isTarget(name: string): name is Target {
  return (TARGETS as readonly string[]).includes(name);
}

async function main(argv: readonly string[]): Promise<number> {
  if (argv[0] === "experiment") return experimentCommand(argv.slice(1));
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        "config-file": { type: "string", multiple: true },
        port: { type: "string" },
        "data-dir": { type: "string" },
        host: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    process.stderr.write(`sieve: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help === true) {
    process.stdout.write(USAGE);
    return 0;
  }
  const target = positionals[0] ?? "all";
  if (!isTarget(target) || positionals.length > 1) {
    process.stderr.write(
      `sieve: unknown target ${JSON.stringify(positionals.join(" "))}\n\n${USAGE}`,
    );
    return 2;
  }
  const files = values["config-file"] ?? [];
  let running;
  let logger: Logger;
  try {
    // The one read of the configuration: the file, the environment and the flags, every
    // section validated; each component gets its typed section from `config`.
    const config = loadSieveConfig({
      file: files,
      flags: {
        ...(values.port !== undefined && { port: values.port }),
        ...(values["data-dir"] !== undefined && { dataDir: values["data-dir"] }),
        ...(values.host !== undefined && { host: values.host }),
      },
    });
    logger = pino({ level: config.logLevel, base: { target } });
    // Read by V8 as each isolate is made, so it reaches the worker threads started below,
    // not this thread. With V8's own start a worker's old space is a few MiB, and it grows
    // by full collections: an ingest worker filling its heads collected again and again
    // (pushes 12% slower on bench:peers), a query worker loading its index and blooms and
    // caching its first chunks paused its first queries for them. A worker's heap cap
    // (`workerHeapMb`, `decodeWorkerHeapMb`) still holds.
    const { workerInitialOldSpaceMb } = config.server;
    if (workerInitialOldSpaceMb > 0) {
      setFlagsFromString(`--initial-old-space-size=${workerInitialOldSpaceMb}`);
    }
    running = await start(target, { config, logger });
  } catch (error) {
    // Configuration and start-up errors are the user's to fix: say what, not a stack.
    process.stderr.write(`sieve: ${(error as Error).message}\n`);
    return 1;
  }
  logger.info({ url: running.url, internalUrl: running.internalUrl }, `sieve ${target} is ready`);
  const stopped = new Promise<number>((resolve) => {
    const stop = (signal: string): void => {
      logger.info({ signal }, "shutting down: flushing head chunks");
      running.close().then(
        () => {
          resolve(0);
        },
        (error: unknown) => {
          logger.error({ err: error }, "shutdown failed");
          resolve(1);
        },
      );
    };
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
  return stopped;
}

process.exitCode = await main(process.argv.slice(2));
