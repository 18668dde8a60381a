// RE2 on worker threads that are terminated and replaced, as the querier's pool does at a
// query's deadline: re2 1.23 kept one handle across isolates and aborted the whole process
// (V8 "Check failed: node->IsInUse()" in WrappedRE2Set::Init) when a new worker loaded it
// after another had been terminated (uhop/node-re2#235). Run in a child process, so that a
// crash fails this test instead of the test runner.
import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const RE2_PATH = createRequire(import.meta.url).resolve("re2");

const SCRIPT = `
const { Worker } = require("node:worker_threads");
const code = ${JSON.stringify(
  `const RE2 = require(${JSON.stringify(RE2_PATH)});
   if (!new RE2("a+b").test("xaab")) throw new Error("no match");
   require("node:worker_threads").parentPort.postMessage("loaded");
   setInterval(() => {}, 1000);`,
)};
(async () => {
  for (let i = 0; i < 10; i++) {
    const worker = new Worker(code, { eval: true });
    await new Promise((resolve, reject) => {
      worker.once("message", resolve);
      worker.once("error", reject);
    });
    await worker.terminate();
  }
  console.log("survived");
})();
`;

describe("RE2 on worker threads", () => {
  // Not spawnSync: a test worker blocked for long misses vitest's 60 s RPC deadline.
  it("loads in a new worker after another was terminated, ten times over", async () => {
    type Run = { stdout?: string; stderr?: string; code?: number | string | null };
    const run: Run = await promisify(execFile)(process.execPath, ["-e", SCRIPT], {
      encoding: "utf8",
      timeout: 50_000,
    }).then(
      (done) => ({ ...done, code: 0 }),
      (failed: unknown) => failed as Run,
    );
    expect(run.stderr?.slice(0, 500)).not.toMatch(/Fatal error|Check failed/);
    expect(run.code).toBe(0);
    expect(run.stdout?.trim()).toBe("survived");
  });
});
