import { type DescField, type DescMessage, ScalarType } from "@bufbuild/protobuf";
import { isWrapperDesc } from "@bufbuild/protobuf/wkt";

/**
 * Whether agl's generated codecs can take this message type (and every type it holds): proto3 throughout (no
 * prototype-held presence, no closed enums, no groups), no wrapper types (protobuf-es keeps some as the bare value),
 * and no member named so that a plain object literal would treat it specially. Other types are left to protobuf-es.
 * `accept` narrows the fields taken further.
 */
export function isPlainProto3(desc: DescMessage, accept?: (field: DescField) => boolean): boolean {
  const seen = new Set<DescMessage>();
  const check = (message: DescMessage): boolean => {
    if (seen.has(message)) return true;
    seen.add(message);
    if (message.file.edition !== 999 /* EDITION_PROTO3 */) return false;
    for (const member of message.members) if (member.localName === "__proto__" || member.localName === "$typeName") return false;
    for (const field of message.fields) {
      if (accept && !accept(field)) return false;
      const child = field.message;
      if (child === undefined) continue;
      if (field.delimitedEncoding || isWrapperDesc(child) || !check(child)) return false;
    }
    return true;
  };
  return check(desc);
}

/** A field's value where protobuf-es keeps it as JSON: `google.protobuf.Struct`, outside `google.protobuf.Value`. */
export function usesJson(field: DescField): boolean {
  return field.message?.typeName === "google.protobuf.Struct" && field.parent.typeName !== "google.protobuf.Value";
}

const stringsChecked = new WeakMap<DescMessage, boolean>();

/** Whether every string of the type, at any depth (map keys and values too), is read with its UTF-8 checked. */
export function checksEveryString(desc: DescMessage): boolean {
  let checked = stringsChecked.get(desc);
  if (checked === undefined) {
    const seen = new Set<DescMessage>();
    const check = (message: DescMessage): boolean => {
      if (seen.has(message)) return true;
      seen.add(message);
      return message.fields.every((field) => {
        const scalars = field.fieldKind === "map" ? [field.mapKey, field.scalar] : [field.scalar];
        if (scalars.includes(ScalarType.STRING) && !field.utf8Validation) return false;
        return field.message === undefined || check(field.message);
      });
    };
    checked = check(desc);
    stringsChecked.set(desc, checked);
  }
  return checked;
}
