// report.html in a real browser: Debian's Chromium (scripts/chromium.sh installs it when
// missing; a browser that cannot be had fails this test, it is never skipped) opens the
// page from a file, logs no console error and no page error, and lays out every plot with
// a nonzero size. A full-page screenshot is left in the OS temp dir for a human to look at.
import { execFile } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { chromium, type Browser } from "playwright-core";
import { afterAll, describe, expect, it } from "vitest";
import { renderReport } from "./report.js";
import { fixture } from "./report.test-helper.js";

const ROOT = resolve(import.meta.dirname, "../../../..");
const PLOTS = 5;

/** The browser's path from scripts/chromium.sh; its own message when it cannot install one. */
async function chromiumPath(): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)("sh", ["scripts/chromium.sh", "path"], {
      cwd: ROOT,
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout.trim();
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr ?? "";
    throw new Error(
      `sh scripts/chromium.sh path failed, so no browser to test the report in:\n${stderr}`,
      {
        cause: err,
      },
    );
  }
}

describe("report.html in Chromium", () => {
  let browser: Browser | undefined;
  afterAll(async () => {
    await browser?.close();
  });

  it("renders with no errors and shows every plot", async () => {
    const dir = await mkdtemp(join(tmpdir(), "sieve-report-"));
    const file = join(dir, "report.html");
    await writeFile(file, await renderReport(fixture({ interrupted: true })));

    browser = await chromium.launch({
      executablePath: await chromiumPath(),
      args: ["--no-sandbox"],
    });
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const errors: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(`console: ${m.text()}`);
    });
    page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
    // A self-contained page asks for nothing; any request but the file itself is a bug.
    const requests: string[] = [];
    page.on("request", (r) => requests.push(r.url()));

    await page.goto(pathToFileURL(file).href, { waitUntil: "load" });
    const svgs = await page.locator("svg").all();
    expect(svgs).toHaveLength(PLOTS);
    for (const svg of svgs) {
      const box = await svg.boundingBox(); // null when not laid out
      expect(box?.width ?? 0).toBeGreaterThan(0);
      expect(box?.height ?? 0).toBeGreaterThan(0);
    }
    expect(await page.locator(".banner.interrupted").isVisible()).toBe(true);
    expect(await page.locator("pre").innerText()).toContain('<script>alert("x")</script>');

    const screenshot = join(dir, "report.png");
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log(`report screenshot: ${screenshot} (page: ${file})`);

    expect(errors).toEqual([]);
    expect(requests).toEqual([pathToFileURL(file).href]);
  });
});
