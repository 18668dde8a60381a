/**
 * Helpers for configuration tests (imported as `@sieve/config/testing`): YAML files in a
 * temporary directory, and the error a call throws.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Temporary YAML files: `write` one, `path` of one that does not exist, `remove` them all. */
export interface ConfigFiles {
  readonly write: (text: string) => string;
  readonly path: (name: string) => string;
  readonly remove: () => void;
}

/** A fresh temporary directory for configuration files. */
export function configFiles(prefix = "sieve-config-"): ConfigFiles {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  let n = 0;
  return {
    write: (text) => {
      const path = join(dir, `c${n++}.yaml`);
      writeFileSync(path, text);
      return path;
    },
    path: (name) => join(dir, name),
    remove: () => {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** What `fn` throws, or undefined when it returns. */
export function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}
