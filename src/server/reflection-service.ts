import { createRegistry, toBinary, type DescFile, type DescService, type Registry } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import * as v1 from "../gen/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { serviceRegistration, type ServiceRegistration } from "./service-registration.js";

/** Options of {@link createReflectionServices}. */
export interface ReflectionServiceOptions {
  /** The services the server exposes; the reflection services add themselves. */
  services: readonly DescService[];
}

/** The request fields both reflection versions share. */
interface ReflectionRequest {
  host: string;
  messageRequest:
    | { case: "fileByFilename" | "fileContainingSymbol" | "allExtensionNumbersOfType" | "listServices"; value: string }
    | { case: "fileContainingExtension"; value: { containingType: string; extensionNumber: number } }
    | { case: undefined; value?: undefined };
}

type ReflectionAnswer =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "allExtensionNumbersResponse"; value: { baseTypeName: string; extensionNumber: number[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

/**
 * gRPC server reflection, `grpc.reflection.v1` and `v1alpha` (grpcurl, Postman and others speak one or the other),
 * answered from the protobuf-es descriptors embedded in the generated code.
 */
export function createReflectionServices(options: ReflectionServiceOptions): ServiceRegistration[] {
  const services = [...options.services, v1.ServerReflection, v1alpha.ServerReflection];
  const files = new Map<string, DescFile>();
  const addFile = (file: DescFile): void => {
    if (files.has(file.proto.name)) return;
    files.set(file.proto.name, file);
    file.dependencies.forEach(addFile);
  };
  for (const service of services) addFile(service.file);
  const registry = createRegistry(...files.values());
  const names = services.map((service) => service.typeName);
  const index = { registry, files, names };
  const reply = <R extends ReflectionRequest>(request: R) => ({
    validHost: request.host,
    originalRequest: request,
    messageResponse: answerRequest(request, index),
  });

  return [
    serviceRegistration(v1.ServerReflection, {
      async *serverReflectionInfo(requests) {
        for await (const request of requests) yield reply(request);
      },
    }),
    serviceRegistration(v1alpha.ServerReflection, {
      async *serverReflectionInfo(requests) {
        for await (const request of requests) yield reply(request);
      },
    }),
  ];
}

interface Index {
  registry: Registry;
  files: Map<string, DescFile>;
  names: string[];
}

function answerRequest(request: ReflectionRequest, index: Index): ReflectionAnswer {
  const { registry, files, names } = index;
  const req = request.messageRequest;
  switch (req.case) {
    case "listServices":
      return { case: "listServicesResponse", value: { service: names.map((name) => ({ name })) } };
    case "fileByFilename":
      return fileResponse(files.get(req.value), `file "${req.value}" not found`);
    case "fileContainingSymbol":
      return fileResponse(findSymbolFile(registry, req.value), `symbol "${req.value}" not found`);
    case "fileContainingExtension": {
      const message = registry.getMessage(req.value.containingType);
      const extension = message && registry.getExtensionFor(message, req.value.extensionNumber);
      const { extensionNumber, containingType } = req.value;
      return fileResponse(extension?.file, `extension ${extensionNumber} of "${containingType}" not found`);
    }
    case "allExtensionNumbersOfType": {
      if (registry.getMessage(req.value) === undefined) return notFound(`type "${req.value}" not found`);
      const numbers = [...registry].flatMap((type) =>
        type.kind === "extension" && type.extendee.typeName === req.value ? [type.number] : [],
      );
      return { case: "allExtensionNumbersResponse", value: { baseTypeName: req.value, extensionNumber: numbers } };
    }
    default:
      return { case: "errorResponse", value: { errorCode: Code.InvalidArgument, errorMessage: "empty request" } };
  }
}

/** A type name resolves to its file; a method, field or enum value name falls back to its enclosing type. */
function findSymbolFile(registry: Registry, symbol: string): DescFile | undefined {
  for (let name = symbol; name !== ""; name = name.slice(0, Math.max(0, name.lastIndexOf(".")))) {
    const type = registry.get(name);
    if (type !== undefined) return type.file;
  }
  return undefined;
}

/** The file first, then its transitive dependencies, as serialized FileDescriptorProtos. */
function fileResponse(file: DescFile | undefined, missing: string): ReflectionAnswer {
  if (file === undefined) return notFound(missing);
  const seen = new Set<DescFile>();
  const visit = (f: DescFile): void => {
    if (seen.has(f)) return;
    seen.add(f);
    f.dependencies.forEach(visit);
  };
  visit(file);
  const fileDescriptorProto = [...seen].map((f) => toBinary(FileDescriptorProtoSchema, f.proto));
  return { case: "fileDescriptorResponse", value: { fileDescriptorProto } };
}

function notFound(message: string): ReflectionAnswer {
  return { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: message } };
}
