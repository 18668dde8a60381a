/**
 * The native cluster's state file (`<CLUSTER_DIR>/cluster.json`), written by `launch.ts`
 * and read by it, by `status` and by the tests that start the cluster through
 * `scripts/cluster.sh`: which processes it started, their pids, URLs and logs.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** What `start` wrote: the tests read it to find the instances and their pids. */
export interface ClusterState {
  readonly entryUrl: string;
  readonly processes: readonly ProcessState[];
}

/** One process the launcher started (every instance, and nginx). */
export interface ProcessState {
  readonly name: string;
  /** Its base URL (nginx: the entry URL). */
  readonly url: string;
  readonly pid: number;
  readonly log: string;
  /** A string of its command line, so a pid reused by another process is never signalled. */
  readonly marker: string;
}

/** Where the state of the cluster in `dir` is kept. */
export const stateFile = (dir: string): string => join(dir, "cluster.json");

/** The state file, or undefined when the cluster never started here (or was stopped). */
export function readState(dir: string): ClusterState | undefined {
  if (!existsSync(stateFile(dir))) return undefined;
  return JSON.parse(readFileSync(stateFile(dir), "utf8")) as ClusterState;
}

/** Whether `pid` runs and is still the process started with `marker` in its command line. */
export function alive(process: Pick<ProcessState, "pid" | "marker">): boolean {
  try {
    const cmdline = readFileSync(`/proc/${process.pid}/cmdline`, "utf8").split("\0").join(" ");
    if (!cmdline.includes(process.marker)) return false;
    // A zombie (killed, not yet reaped by its parent) is no longer running.
    const stat = readFileSync(`/proc/${process.pid}/stat`, "utf8");
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

/** Writes the state file. */
export function writeState(dir: string, state: ClusterState): void {
  writeFileSync(stateFile(dir), `${JSON.stringify(state, null, 2)}\n`);
}
