/**
 * Go's `strconv.Quote`, which Prometheus' and Loki's `labels.String()` use for values:
 * double quotes; `\a \b \f \n \r \t \v \\ \"`; other ASCII controls as `\xNN`; printable
 * Unicode as itself; other code points as `\uNNNN` or `\UNNNNNNNN`. "Printable" is Go's
 * `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
 */
export function quoteGo(s: string): string {
  // Fast path: printable ASCII without quote or backslash, the usual label value.
  if (/^[\x20\x21\x23-\x5b\x5d-\x7e]*$/.test(s)) return `"${s}"`;
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    switch (ch) {
      case "\x07":
        out += "\\a";
        continue;
      case "\b":
        out += "\\b";
        continue;
      case "\f":
        out += "\\f";
        continue;
      case "\n":
        out += "\\n";
        continue;
      case "\r":
        out += "\\r";
        continue;
      case "\t":
        out += "\\t";
        continue;
      case "\v":
        out += "\\v";
        continue;
      case "\\":
        out += "\\\\";
        continue;
      case '"':
        out += '\\"';
        continue;
    }
    if (cp < 0x20 || cp === 0x7f) out += `\\x${hex(cp, 2)}`;
    else if (cp < 0x80 || PRINTABLE.test(ch)) out += ch;
    else if (cp < 0x10000) out += `\\u${hex(cp, 4)}`;
    else out += `\\U${hex(cp, 8)}`;
  }
  return out + '"';
}

const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S}]$/u;

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, "0");
}
