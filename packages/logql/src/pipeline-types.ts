/** Narrowed stage types used by the pipeline compiler. */
import type { Stage } from "./ast.js";

export type { CmpOp, LabelFilter, NamedMatcher, Stage } from "./ast.js";

/** A line filter stage. */
export type LineFilterStage = Extract<Stage, { kind: "lineFilter" }>;
