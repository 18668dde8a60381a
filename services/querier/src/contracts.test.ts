/*
 * Both sides of each internal API compile against the one definition in @sieve/proto
 * (proto/src/contracts.test.ts checks that no second copy is declared): what the querier
 * calls is what the ingester and the gateway implement, in process and over HTTP. The
 * `expectTypeOf` lines are checked by `tsc` (the typecheck of this package); the `expect`
 * lines check at run time that the implementations the querier is given are those types.
 */
import {
  BloomGateway,
  BloomGatewayClient,
  type ChunkFilter as GatewayChunkFilter,
  type FilterRequest as GatewayFilterRequest,
} from "@sieve/bloom-gateway";
import {
  Ingester,
  IngesterHttpClient,
  type IngesterQuerier as IngesterSide,
  type IngesterQueryRequest as IngesterSideRequest,
  type IngesterStream as IngesterSideStream,
} from "@sieve/ingester";
import type {
  ChunkFilter,
  FilterRequest,
  IngesterQuerier,
  IngesterQueryRequest,
  IngesterStream,
} from "@sieve/proto";
import { describe, expect, expectTypeOf, test } from "vitest";
import type { QuerierDeps } from "./querier.js";

describe("the querier and its neighbours share one contract", () => {
  test("the ingester's types are @sieve/proto's, and both of its querier faces implement them", () => {
    expectTypeOf<IngesterSideRequest>().toEqualTypeOf<IngesterQueryRequest>();
    expectTypeOf<IngesterSideStream>().toEqualTypeOf<IngesterStream>();
    expectTypeOf<IngesterSide>().toEqualTypeOf<IngesterQuerier>();
    expectTypeOf<Ingester>().toExtend<IngesterQuerier>();
    expectTypeOf<IngesterHttpClient>().toExtend<IngesterQuerier>();
    expectTypeOf<IngesterQuerier>().toExtend<NonNullable<QuerierDeps["ingesters"]>>();
    const client: IngesterQuerier = new IngesterHttpClient({ urls: ["http://127.0.0.1:1"] });
    expect(typeof client.query).toBe("function");
    expect(typeof Ingester.prototype.query).toBe("function");
    expect(typeof Ingester.prototype.series).toBe("function");
  });

  test("the gateway's types are @sieve/proto's, and the gateway and its client implement them", () => {
    expectTypeOf<GatewayFilterRequest>().toEqualTypeOf<FilterRequest>();
    expectTypeOf<GatewayChunkFilter>().toEqualTypeOf<ChunkFilter>();
    expectTypeOf<BloomGateway>().toExtend<ChunkFilter>();
    expectTypeOf<BloomGatewayClient>().toExtend<ChunkFilter>();
    expectTypeOf<ChunkFilter>().toExtend<NonNullable<QuerierDeps["chunkFilter"]>>();
    const client: ChunkFilter = new BloomGatewayClient({ urls: ["http://127.0.0.1:1"] });
    expect(typeof client.filterChunkRefs).toBe("function");
    expect(typeof BloomGateway.prototype.filterChunkRefs).toBe("function");
  });
});
