/** The value of record `id` in the crash test: self-describing, so damage is visible. */
export function crashRecordValue(id: number, length: number): Buffer {
  const head = `id=${id};len=${length};`;
  const fill = String.fromCharCode(97 + (id % 26));
  return Buffer.from(head + fill.repeat(length));
}

/** The id of a crash-test value, or undefined when the value is not exactly one we write. */
export function parseCrashRecordValue(value: Uint8Array): number | undefined {
  const text = Buffer.from(value).toString("latin1");
  const match = /^id=(\d+);len=(\d+);/.exec(text);
  if (match === null) return undefined;
  const id = Number(match[1]);
  return crashRecordValue(id, Number(match[2])).equals(Buffer.from(value)) ? id : undefined;
}
