import type { BinaryReader } from "@bufbuild/protobuf/wire";

/**
 * Reads the string key of a map entry (a span's attribute names, a Struct's field names), giving back the same string
 * each time the same short ASCII key comes again. The same few dozen names come in every span and every worker row:
 * read as new strings, each is built from an array of its character codes (protobuf-es's reader), then hashed and
 * looked up in V8's string table when the decoder stores a property under it. A known key is one hash of its bytes
 * and one comparison, and it is stored under at once (it is internalized already).
 *
 * The table is small whatever the keys are: each hash has two slots, and a key found in neither is read as before and
 * takes the first, the key it displaces moving to the second. Keys longer than `maxLength` bytes or not ASCII are read
 * as before.
 */
export function readMapKey(r: BinaryReader, bytes: Uint8Array, strict: boolean): string {
  const start = r.pos;
  const length = r.uint32();
  const begin = r.pos;
  const end = begin + length;
  if (length > maxLength || end > bytes.length) return readAgain(r, start, strict);
  let hash = length;
  for (let i = begin; i < end; i++) {
    const byte = bytes[i] as number;
    if (byte > 0x7f) return readAgain(r, start, strict);
    hash = Math.imul(hash ^ byte, 0x01000193);
  }
  const slot = ((hash ^ (hash >>> 15)) & (sets - 1)) << 1;
  const first = table[slot] as string;
  if (first.length === length && sameAscii(first, bytes, begin)) {
    r.pos = end;
    return first;
  }
  const second = table[slot + 1] as string;
  if (second.length === length && sameAscii(second, bytes, begin)) {
    r.pos = end;
    return second;
  }
  const key = readAgain(r, start, strict);
  table[slot + 1] = first;
  // A property name is internalized: the string table's own copy is what the next decoders store under.
  table[slot] = Object.keys({ [key]: 0 })[0] as string;
  return key;
}

const maxLength = 64;
const sets = 1024;
// Empty slots hold a string no key matches (every key is shorter), so a lookup needs no check for a hole.
const table: string[] = new Array<string>(sets * 2).fill("\0".repeat(maxLength + 1));

function readAgain(r: BinaryReader, start: number, strict: boolean): string {
  r.pos = start;
  return r.string(strict);
}

function sameAscii(text: string, bytes: Uint8Array, begin: number): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) !== bytes[begin + i]) return false;
  return true;
}
