/**
 * Reads protobuf varints and skips fields. It checks nothing: its callers read bytes found
 * well-formed first (`countPushMessages`), or bound each field by its message's end and
 * check the position at the end (a varint read past the end leaves it there).
 */
export class WireReader {
  at = 0;
  /** The halves of the last {@link varint64}: `lo` unsigned, `hi` signed. */
  lo = 0;
  hi = 0;

  constructor(readonly buf: Buffer) {}

  varint32(): number {
    let b = this.buf[this.at++]!;
    if (b < 0x80) return b;
    let value = b & 0x7f;
    let shift = 7;
    do {
      b = this.buf[this.at++]!;
      if (shift < 32) value += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b >= 0x80);
    return value % 4294967296;
  }

  /** A length prefix: answers where the field it starts ends. */
  lengthEnd(): number {
    const length = this.varint32();
    return this.at + length;
  }

  varint64(): void {
    let lo = 0;
    let hi = 0;
    let shift = 0;
    let b: number;
    do {
      b = this.buf[this.at++]!;
      const bits = b & 0x7f;
      if (shift < 28) lo |= bits << shift;
      else if (shift === 28) {
        lo |= (bits & 0x0f) << 28;
        hi |= bits >> 4;
      } else if (shift < 64) hi |= bits << (shift - 32);
      shift += 7;
    } while (b >= 0x80);
    this.lo = lo >>> 0;
    this.hi = hi | 0;
  }

  skip(tag: number): void {
    switch (tag & 7) {
      case 0:
        while (this.buf[this.at++]! >= 0x80);
        break;
      case 1:
        this.at += 8;
        break;
      case 2:
        this.at = this.lengthEnd();
        break;
      default:
        this.at += 4;
    }
  }
}
