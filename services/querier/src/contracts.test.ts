/*
 * Both sides of each internal API compile against the one definition in @sieve/proto
 * (proto/src/contracts.test.ts checks that no second copy is declared): what the querier
 * calls is what the ingester and the gateway implement, in process and over HTTP. The
 * `expectTypeOf` lines are checked by `tsc` (the typecheck of this package); the `expect`
 * lines check at run time that the implementations the querier is given are those types.
 */
import { BloomGateway, BloomGatewayClient } from "@sieve/bloom-gateway";
import { Ingester, IngesterHttpClient } from "@sieve/ingester";
import type { ChunkFilter, IngesterQuerier, IngesterTailer } from "@sieve/proto";
import { describe, expect, expectTypeOf, test } from "vitest";
import type { QuerierHttpDeps } from "./http.js";
import type { QuerierDeps } from "./querier.js";

describe("the querier and its neighbours share one contract", () => {
  test("both of the ingester's querier faces implement @sieve/proto's contract", () => {
    expectTypeOf<Ingester>().toExtend<IngesterQuerier>();
    expectTypeOf<IngesterHttpClient>().toExtend<IngesterQuerier>();
    expectTypeOf<IngesterQuerier>().toExtend<NonNullable<QuerierDeps["ingesters"]>>();
    const client: IngesterQuerier = new IngesterHttpClient({ urls: ["http://127.0.0.1:1"] });
    expect(typeof client.query).toBe("function");
    expect(typeof Ingester.prototype.query).toBe("function");
    expect(typeof Ingester.prototype.series).toBe("function");
  });

  test("the gateway and its client implement @sieve/proto's contract", () => {
    expectTypeOf<BloomGateway>().toExtend<ChunkFilter>();
    expectTypeOf<BloomGatewayClient>().toExtend<ChunkFilter>();
    expectTypeOf<ChunkFilter>().toExtend<NonNullable<QuerierDeps["chunkFilter"]>>();
    const client: ChunkFilter = new BloomGatewayClient({ urls: ["http://127.0.0.1:1"] });
    expect(typeof client.filterChunkRefs).toBe("function");
    expect(typeof BloomGateway.prototype.filterChunkRefs).toBe("function");
  });

  test("both of the ingester's tail faces implement @sieve/proto's contract", () => {
    expectTypeOf<Ingester>().toExtend<IngesterTailer>();
    expectTypeOf<IngesterHttpClient>().toExtend<IngesterTailer>();
    expectTypeOf<IngesterTailer>().toExtend<NonNullable<QuerierHttpDeps["tailer"]>>();
    expect(typeof IngesterHttpClient.prototype.tail).toBe("function");
    expect(typeof Ingester.prototype.tail).toBe("function");
  });
});
