/**
 * Stream label sets: Loki's selector syntax parsed as Loki parses pushed labels, Prometheus'
 * label-name rule, the canonical string (Loki's `labels.String()`), and the fingerprint
 * (xxhash64 of that string) with its 8-byte queue key and partition.
 */
export { parseLabels, isValidLabelName, MAX_LABELS_STRING } from "./parse.js";
export type { Label } from "./parse.js";
export {
  labelsString,
  labelsFromObject,
  fingerprint,
  fingerprintKey,
  partitionOf,
} from "./canonical.js";
export { LabelsError, LABELS_ERRORS } from "./errors.js";
export type { LabelsErrorCode } from "./errors.js";
