export { chunkKey } from "./ref.js";
export type { ChunkRef } from "./ref.js";
