/**
 * A protobuf binary writer kept for the life of the process: one buffer, grown when a message needs more and cut back
 * after a large one, into which each message is written and then copied out once. protobuf-es's `toBinary` makes a new
 * `BinaryWriter` a message, whose 128-byte buffer doubles as it fills; a 1 KB span costs 4–5 typed-array allocations
 * before the copy. Strings are written straight into the buffer (short ASCII ones by a loop, the rest by Node's UTF-8
 * writer) rather than encoded into a buffer of their own first.
 *
 * Every value is written as protobuf-es writes it, byte for byte; the caller (generated-encoder.ts) checks values
 * before writing them and leaves anything unusual to protobuf-es.
 */
export class ReusedWriter {
  private bytes!: Uint8Array;
  private text!: Buffer;
  private view!: DataView;
  private pos = 0;

  constructor(private readonly initialSize = 64 * 1024) {
    this.allocate(initialSize);
  }

  /** The bytes written since the last call, as a copy of their own; the writer is empty again afterwards. */
  finish(): Uint8Array {
    const result = this.bytes.slice(0, this.pos);
    this.reset();
    return result;
  }

  /** Drops what was written; a buffer grown past 16 times its first size is given back. */
  reset(): void {
    this.pos = 0;
    if (this.bytes.length > 16 * this.initialSize) this.allocate(this.initialSize);
  }

  private allocate(size: number): void {
    const bytes = new Uint8Array(size);
    if (this.pos > 0) bytes.set(this.bytes.subarray(0, this.pos));
    this.bytes = bytes;
    this.text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  private ensure(room: number): void {
    const needed = this.pos + room;
    if (needed <= this.bytes.length) return;
    let size = this.bytes.length * 2;
    while (size < needed) size *= 2;
    this.allocate(size);
  }

  /** Makes room for `size` bytes and moves past them; returns where they start. */
  private take(size: number): number {
    this.ensure(size);
    const at = this.pos;
    this.pos += size;
    return at;
  }

  /** A varint of an unsigned 32-bit value (tags, lengths, uint32, enums and int32 that are not negative). */
  uint32(value: number): void {
    this.ensure(5);
    this.pos = putVarint32(this.bytes, this.pos, value);
  }

  /** An int32 or enum: a negative one takes ten bytes, sign-extended to 64 bits. */
  int32(value: number): void {
    if (value >= 0) {
      this.uint32(value);
      return;
    }
    this.ensure(10);
    const bytes = this.bytes;
    let pos = this.pos;
    for (let i = 0; i < 9; i++) {
      bytes[pos++] = (value & 0x7f) | 0x80;
      value >>= 7;
    }
    bytes[pos++] = 1;
    this.pos = pos;
  }

  sint32(value: number): void {
    this.uint32(((value << 1) ^ (value >> 31)) >>> 0);
  }

  /** A varint of a 64-bit value already in its unsigned two's-complement form. */
  private varint64(value: bigint): void {
    if (value < 0x80000000n) {
      this.uint32(Number(value));
      return;
    }
    this.ensure(10);
    const bytes = this.bytes;
    let pos = this.pos;
    while (value > 0x7fn) {
      bytes[pos++] = Number(value & 0x7fn) | 0x80;
      value >>= 7n;
    }
    bytes[pos++] = Number(value);
    this.pos = pos;
  }

  int64(value: bigint): void {
    this.varint64(BigInt.asUintN(64, value));
  }

  uint64(value: bigint): void {
    this.varint64(value);
  }

  /**
   * A sint64 (token ids, hundreds a span). Values within ±2^30 take the 32-bit zigzag after one conversion to a
   * number (the conversion is most of the cost: ~20 ns, against ~2 for a comparison of bigints). The range check is
   * made here rather than by the caller, after the common case. False, nothing written, for a value that is not a
   * bigint in range.
   */
  sint64(value: unknown): boolean {
    if (typeof value !== "bigint") return false;
    // Exact below 2^53, so within ±2^30 exactly when the bigint is.
    const small = Number(value);
    if (small >= -0x40000000 && small < 0x40000000) this.sint32(small);
    else if (value >= -0x8000000000000000n && value <= 0x7fffffffffffffffn)
      this.varint64(BigInt.asUintN(64, (value << 1n) ^ (value >> 63n)));
    else return false;
    return true;
  }

  bool(value: boolean): void {
    this.bytes[this.take(1)] = value ? 1 : 0;
  }

  double(value: number): void {
    this.view.setFloat64(this.take(8), value, true);
  }

  float(value: number): void {
    this.view.setFloat32(this.take(4), value, true);
  }

  fixed32(value: number): void {
    this.view.setUint32(this.take(4), value, true);
  }

  sfixed32(value: number): void {
    this.view.setInt32(this.take(4), value, true);
  }

  fixed64(value: bigint): void {
    this.view.setBigUint64(this.take(8), value, true);
  }

  sfixed64(value: bigint): void {
    this.view.setBigInt64(this.take(8), value, true);
  }

  /** Length-prefixed bytes. */
  bytesField(value: Uint8Array): void {
    this.uint32(value.byteLength);
    this.raw(value);
  }

  raw(value: Uint8Array): void {
    this.ensure(value.byteLength);
    this.bytes.set(value, this.pos);
    this.pos += value.byteLength;
  }

  /** A length-prefixed string in UTF-8 (lone surrogates as U+FFFD, as protobuf-es's encoders write them). */
  string(value: string): void {
    const length = value.length;
    if (length < 128) {
      // At most 3 bytes a UTF-16 unit; the length is fixed once the string is written.
      const start = this.begin();
      this.ensure(3 * length);
      const bytes = this.bytes;
      let pos = this.pos;
      let i = 0;
      for (; i < length; i++) {
        const unit = value.charCodeAt(i);
        if (unit >= 0x80) break;
        bytes[pos++] = unit;
      }
      this.pos = i === length ? pos : this.pos + this.text.write(value, this.pos);
      this.end(start);
      return;
    }
    const byteLength = Buffer.byteLength(value);
    this.uint32(byteLength);
    this.ensure(byteLength);
    this.pos += this.text.write(value, this.pos);
  }

  /** Opens a length-delimited part: one byte is kept for its length, enough below 128 bytes. */
  begin(): number {
    return this.take(1);
  }

  /** Closes the part {@link begin} opened, moving its content along when its length needs more than one byte. */
  end(start: number): void {
    const length = this.pos - start - 1;
    if (length < 0x80) {
      this.bytes[start] = length;
      return;
    }
    let extra = 1;
    while (extra < 4 && length >>> (7 * (extra + 1)) !== 0) extra++;
    this.ensure(extra);
    const bytes = this.bytes;
    bytes.copyWithin(start + 1 + extra, start + 1, this.pos);
    putVarint32(bytes, start, length);
    this.pos += extra;
  }
}

/** Writes an unsigned 32-bit varint at `pos` (room made by the caller); returns the position after it. */
function putVarint32(bytes: Uint8Array, pos: number, value: number): number {
  while (value > 0x7f) {
    bytes[pos++] = (value & 0x7f) | 0x80;
    value >>>= 7;
  }
  bytes[pos++] = value;
  return pos;
}
