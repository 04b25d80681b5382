/**
 * Entry names as a receiver may show them. A ZIP name is the sender's bytes: UTF-8 when the entry
 * says so (general-purpose flag bit 11), else IBM code page 437, the format's original encoding.
 * What is shown is never a path (a name like `../../.bashrc` must not steer where a file is saved)
 * and holds no control or bidirectional formatting characters, which could hide the real extension
 * (`invoice\u202Efdp.exe` displays as `invoiceexe.pdf`).
 */

/** Code page 437's upper half, 0x80–0xFF; the lower half is ASCII. */
const CP437_HIGH =
  'ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»░▒▓│┤╡╢╖╕╣║╗╝╜╛┐└┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u00a0';

// Invalid UTF-8 becomes U+FFFD: a garbled name is still a name to show, not a reason to refuse the bundle.
const utf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/** The name's bytes as text: UTF-8 when `isUtf8` (flag bit 11), else code page 437. */
export function decodeZipName(bytes: Uint8Array, isUtf8: boolean): string {
  if (isUtf8) return utf8.decode(bytes);
  const chars: string[] = new Array<string>(bytes.length);
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    chars[i] = b < 0x80 ? String.fromCharCode(b) : CP437_HIGH[b - 0x80]!;
  }
  return chars.join('');
}

/**
 * What shows as nothing: C0/C1 controls, format characters (bidi marks, embeddings, overrides and
 * isolates, zero-width spaces and joiners, the soft hyphen, BOM), line and paragraph separators,
 * and the blank fillers (Hangul, halfwidth Hangul, Braille blank).
 */
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\u115F\u1160\u3164\uFFA0\u2800]/gu;
/** Runs of whitespace: one space shows them (a run of spaces can push an extension out of view). */
const SPACES = /\s+/gu;

/** What {@link displayName} gives a path with no usable last segment. */
export const UNNAMED = 'unnamed';

/**
 * The last segment of `path` (separators `/` and `\`, empty, `.` and `..` segments skipped), with
 * invisible characters removed and whitespace runs shown as one space; {@link UNNAMED} when nothing
 * is left. The entry's `path` keeps the sender's bytes as they are.
 */
export function displayName(path: string): string {
  // Walked backwards segment by segment rather than split: a name of 65 535 separators would
  // otherwise become as many empty strings.
  let end = path.length;
  while (end > 0) {
    let start = end;
    while (start > 0 && path[start - 1] !== '/' && path[start - 1] !== '\\') start--;
    const segment = path.slice(start, end);
    if (segment !== '' && segment !== '.' && segment !== '..') {
      const clean = segment.replace(HIDDEN, '').replace(SPACES, ' ').trim();
      if (clean !== '' && clean !== '.' && clean !== '..') return clean;
    }
    end = start - 1;
  }
  return UNNAMED;
}
