/**
 * The entry of a push worker thread (see workers.ts): prepares one push and hands back the
 * outcome, transferring the records' buffer instead of copying it.
 */
import { Piscina } from "piscina";
import { preparePush } from "./prepare.js";
import type { PrepareTask } from "./prepare.js";

/** Piscina's task handler. */
export default function preparePushTask(task: PrepareTask): unknown {
  const outcome = preparePush(task);
  if (!outcome.ok) return outcome;
  // Piscina's "transferable" shape: the value to answer, and what to transfer with it. Its
  // type names the symbols as unique symbols its getters do not declare, hence the cast.
  const movable = {
    [Piscina.transferableSymbol]: [outcome.push.records.buffer],
    [Piscina.valueSymbol]: outcome,
  };
  return Piscina.move(movable as unknown as Parameters<typeof Piscina.move>[0]);
}
