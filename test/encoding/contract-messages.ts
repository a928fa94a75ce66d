import type { DescFile, DescMessage } from "@bufbuild/protobuf";
import { file_agl_v1_calls } from "../../src/gen/agl/v1/calls_pb.js";
import { file_agl_v1_resources } from "../../src/gen/agl/v1/resources_pb.js";
import { file_agl_v1_store } from "../../src/gen/agl/v1/store_pb.js";
import { file_agl_v1_triplets } from "../../src/gen/agl/v1/triplets_pb.js";
import { file_agl_v1_types } from "../../src/gen/agl/v1/types_pb.js";
import { file_opentelemetry_proto_collector_trace_v1_trace_service } from "../../src/gen/opentelemetry/proto/collector/trace/v1/trace_service_pb.js";

function messagesOf(files: DescFile[]): DescMessage[] {
  const all: DescMessage[] = [];
  const walk = (message: DescMessage) => {
    all.push(message);
    message.nestedMessages.forEach(walk);
  };
  for (const file of files) file.messages.forEach(walk);
  return all;
}

/** Every message type of agl's contract and of the OTLP requests it serves, nested ones included. */
export const contractMessages = messagesOf([
  file_agl_v1_types,
  file_agl_v1_store,
  file_agl_v1_triplets,
  file_agl_v1_resources,
  file_agl_v1_calls,
  file_opentelemetry_proto_collector_trace_v1_trace_service,
]);
