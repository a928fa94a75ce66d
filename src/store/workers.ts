import { create } from "@bufbuild/protobuf";
import { GetWorkerRequestSchema, QueryWorkersRequestSchema, UpdateWorkerRequestSchema } from "../gen/agl/v1/store_pb.js";
import { FilterLogic, WorkerSchema, WorkerStatus } from "../gen/agl/v1/types_pb.js";
import { pageInfo, type StoreContext } from "./context.js";
import { notFound } from "./errors.js";
import type { StoreApi } from "./store-api.js";
import { checkEnum, checkId, checkStruct, toPageSpec } from "./validate.js";

type WorkerMethods = Pick<StoreApi, "updateWorker" | "getWorker" | "queryWorkers">;

/** Workers: heartbeats and reads. Statuses change only through their attempts and dequeues. */
export function workerMethods(ctx: StoreContext): WorkerMethods {
  const { limits } = ctx;
  return {
    async updateWorker(init) {
      const req = create(UpdateWorkerRequestSchema, init);
      checkId(req.workerId, "worker_id", limits);
      checkStruct(req.heartbeatStats, "heartbeat_stats");
      return ctx.write(async (tx) => {
        const worker = (await tx.getWorker(req.workerId)) ?? create(WorkerSchema, { workerId: req.workerId, status: WorkerStatus.UNKNOWN });
        worker.lastHeartbeatTime = ctx.now();
        if (req.heartbeatStats !== undefined) worker.heartbeatStats = req.heartbeatStats;
        await tx.putWorker(worker);
        return worker;
      });
    },

    async getWorker(init) {
      const req = create(GetWorkerRequestSchema, init);
      checkId(req.workerId, "worker_id", limits);
      const worker = await ctx.read((tx) => tx.getWorker(req.workerId));
      if (!worker) throw notFound(`worker ${JSON.stringify(req.workerId)} not found`);
      return worker;
    },

    async queryWorkers(init) {
      const req = create(QueryWorkersRequestSchema, init);
      for (const status of req.statusIn) checkEnum(status, WorkerStatus, "status_in");
      checkEnum(req.filterLogic, FilterLogic, "filter_logic", true);
      const page = toPageSpec(req.page, "workers", limits);
      await ctx.maybeScan();
      const result = await ctx.read((tx) =>
        tx.queryWorkers(
          {
            statusIn: req.statusIn,
            workerIdContains: req.workerIdContains || undefined,
            any: req.filterLogic === FilterLogic.OR,
          },
          page,
        ),
      );
      return {
        $typeName: "agl.v1.QueryWorkersResponse",
        workers: result.items,
        page: pageInfo(result.total, page),
      };
    },
  };
}
