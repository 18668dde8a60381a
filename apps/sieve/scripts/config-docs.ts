/**
 * `pnpm docs:config`: writes the options tables of docs/configuration.md from the schemas;
 * `pnpm docs:config --check` only says whether the file is current (exit 1 if not).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { renderConfigDocs } from "../src/config-docs.js";

const path = fileURLToPath(new URL("../../../docs/configuration.md", import.meta.url));
const text = readFileSync(path, "utf8");
const rendered = renderConfigDocs(text);
if (process.argv.includes("--check")) {
  if (rendered !== text) {
    process.stderr.write(`${path} is out of date: run pnpm docs:config\n`);
    process.exitCode = 1;
  }
} else if (rendered !== text) {
  writeFileSync(path, rendered);
  process.stdout.write(`wrote ${path}\n`);
}
