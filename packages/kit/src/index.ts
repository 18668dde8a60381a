export { closeUnusedConnections } from "./close.js";
export type { ClosingServer } from "./close.js";
export { crc32c, nativeCrc32c } from "./crc32c.js";
export { countedUpTo } from "./lru.js";
export { mapLimit } from "./pool.js";
export { isRetriable, retryRetriable } from "./retry.js";
export type { RetryOptions } from "./retry.js";
export {
  deadlineSignal,
  isDeadlineReason,
  settleBy,
  waitAtMost,
  withDeadline,
} from "./deadline.js";
export { SieveError, defineErrors, errorMessage, isHttpError, statusesOf } from "./errors.js";
export type { ErrorSpec } from "./errors.js";
export {
  NOT_FOUND_BODY,
  TEXT_ERROR_TYPE,
  errorHandler,
  errorStatus,
  notFoundHandler,
  textErrorBody,
} from "./http.js";
export type { ErrorHandlerOptions } from "./http.js";
export { PortPeer, Transfer, fromPortError, toPortError } from "./port.js";
export type { PortError, PortLike, PortMethods } from "./port.js";
export {
  primeSnappy,
  snappyCompress,
  snappyDeclaredLength,
  snappyImplementation,
  snappyUncompress,
} from "./snappy.js";
export { mulberry32 } from "./random.js";
export { MemoryWatermark, memoryMayHold } from "./watermark.js";
