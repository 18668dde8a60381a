/** Every way a label set can be refused, as one table of code and message start. */
export const LABELS_ERRORS = {
  parse_error: "parse error",
  invalid_label_name: "invalid label name",
  invalid_fingerprint: "invalid fingerprint",
} as const;

/** A code of {@link LABELS_ERRORS}. */
export type LabelsErrorCode = keyof typeof LABELS_ERRORS;

/**
 * The error of `@sieve/labels`. Its message follows Prometheus' parser,
 * `1:<column>: parse error: <detail>`, which is what Loki puts in its `invalid_labels`
 * message; `column` is 1-based and counts UTF-16 code units.
 */
export class LabelsError extends Error {
  override readonly name = "LabelsError";

  constructor(
    readonly code: LabelsErrorCode,
    detail: string,
    readonly column = 0,
  ) {
    super(
      column > 0
        ? `1:${column}: ${LABELS_ERRORS[code]}: ${detail}`
        : `${LABELS_ERRORS[code]}: ${detail}`,
    );
  }
}
