/**
 * File-system steps the write-ahead log needs to be crash-safe on Linux/POSIX, each as
 * one function: positional full writes, directory fsync (so a created, renamed or
 * deleted name is itself durable) and atomic replacement of a small file.
 */
import { open, rename, rm } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { dirname } from "node:path";

/** Writes all of `buf` at `position`; `write` may write less than asked. */
export async function writeFully(fh: FileHandle, buf: Buffer, position: number): Promise<void> {
  let done = 0;
  while (done < buf.length) {
    const { bytesWritten } = await fh.write(buf, done, buf.length - done, position + done);
    done += bytesWritten;
  }
}

/** Reads exactly `length` bytes at `position`, or fewer only when the file ends first. */
export async function readFully(
  fh: FileHandle,
  buf: Buffer,
  length: number,
  position: number,
): Promise<number> {
  let done = 0;
  while (done < length) {
    const { bytesRead } = await fh.read(buf, done, length - done, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}

/** Makes the entries of `dir` (creations, renames, deletions) durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Replaces `path` with `bytes` so that after a crash it holds either the old or the new
 * content, never a mix: write a temporary file, fsync it, rename over, fsync the directory.
 */
export async function replaceFileAtomically(path: string, bytes: Buffer): Promise<void> {
  const tmp = `${path}.tmp`;
  const fh = await open(tmp, "w");
  try {
    await writeFully(fh, bytes, 0);
    await fh.datasync();
  } catch (error) {
    await fh.close();
    await rm(tmp, { force: true });
    throw error;
  }
  await fh.close();
  await rename(tmp, path);
  await fsyncDir(dirname(path));
}
