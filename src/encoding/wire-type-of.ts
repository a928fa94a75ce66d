import { ScalarType } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";

/** The wire type a scalar field of this type is written with (packed lists aside). */
export function wireTypeOf(scalar: ScalarType): WireType {
  switch (scalar) {
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return WireType.Bit64;
    case ScalarType.FLOAT:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return WireType.Bit32;
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return WireType.LengthDelimited;
    default:
      return WireType.Varint;
  }
}
