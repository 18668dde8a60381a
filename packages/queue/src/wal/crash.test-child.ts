/**
 * The writer killed by crash.int.test.ts: appends records to a write-ahead log as fast as it
 * can from several concurrent callers and prints `ack <id>` for each record once its
 * append has resolved (stdout to a pipe is synchronous on Linux, so a printed id was
 * acknowledged before any kill). Runs until killed.
 *
 * argv: dir partitions firstId seed
 */
import { openWal } from "./wal.js";
import { crashRecordValue } from "./crash.test-helper.js";

const [dir, partitionsArg, firstIdArg, seedArg] = process.argv.slice(2);
const partitions = Number(partitionsArg);
let nextId = Number(firstIdArg);
let seed = Number(seedArg) >>> 0;

/** xorshift32: a seeded generator, so a failing round can be replayed. */
function random(below: number): number {
  seed ^= seed << 13;
  seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  seed >>>= 0;
  return seed % below;
}

const wal = await openWal({ dir: dir!, partitions, segmentBytes: 256 * 1024 });
process.stdout.write("ready\n");

async function writer(): Promise<never> {
  for (;;) {
    const count = 1 + random(40);
    const ids: number[] = [];
    const batch = Array.from({ length: count }, () => {
      const id = nextId++;
      ids.push(id);
      return {
        partition: random(partitions),
        key: Buffer.from(id.toString(16).padStart(16, "0"), "hex"),
        value: crashRecordValue(id, 1 + random(3000)),
      };
    });
    await wal.writer.append(batch);
    process.stdout.write(ids.map((id) => `ack ${id}\n`).join(""));
  }
}

await Promise.all([writer(), writer(), writer(), writer()]);
