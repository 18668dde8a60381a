/** A promise with its resolve function outside (Promise.withResolvers is Node 22+). */
export interface Deferred {
  readonly promise: Promise<void>;
  readonly resolve: () => void;
}

/** A new unresolved {@link Deferred}. */
export function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
