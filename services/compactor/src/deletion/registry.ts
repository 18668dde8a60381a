import type { Registry } from "prom-client";
import { DeletionMetrics } from "./metrics.js";

const byRegistry = new WeakMap<Registry, DeletionMetrics>();

/**
 * The deletion metrics of `registry`, made once: the delete API and the processor share
 * them (prom-client refuses a metric name registered twice).
 */
export function deletionMetrics(registry: Registry): DeletionMetrics {
  let m = byRegistry.get(registry);
  if (m === undefined) byRegistry.set(registry, (m = new DeletionMetrics(registry)));
  return m;
}
