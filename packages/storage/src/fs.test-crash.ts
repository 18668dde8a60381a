/**
 * Child process of fs.int.test.ts's crash test: puts random objects under 20 keys in a loop
 * until killed. Each object is sha256(body) followed by body, so a reader can tell a whole
 * object from a torn one. Prints `start <key> <sha>` before and `done <key> <sha>` after
 * each put.
 */
import { createHash, randomBytes, randomInt } from "node:crypto";
import { FsObjectStore } from "./fs.js";

const store = new FsObjectStore(process.argv[2]!);
for (let i = 0; ; i++) {
  const key = `crash/k${i % 20}`;
  const body = randomBytes(randomInt(1, 200_000));
  const sha = createHash("sha256").update(body).digest();
  process.stdout.write(`start ${key} ${sha.toString("hex")}\n`);
  await store.put(key, Buffer.concat([sha, body]));
  process.stdout.write(`done ${key} ${sha.toString("hex")}\n`);
}
