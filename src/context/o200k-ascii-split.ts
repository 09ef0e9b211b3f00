/**
 * o200k's pre-tokenizer for text that is all ASCII, as a scan over character classes: the same pieces as
 * gpt-tokenizer's `O200K_TOKEN_SPLIT_REGEX`, without a match array and a string per piece. On 1 MB of base64 (≈ 480k
 * pieces) the regex and its matches were about a third of counting the tokens once their counts were cached.
 *
 * The pattern, alternatives in order, read for ASCII (letters are A–Z and a–z, so upper and lower never overlap and
 * backtracking inside a letter run never finds another match):
 *   1. [^\r\n\p{L}\p{N}]?[\p{Lu}…]*[\p{Ll}…]+(contraction)?  an optional prefix, uppers, at least one lower
 *   2. [^\r\n\p{L}\p{N}]?[\p{Lu}…]+[\p{Ll}…]*(contraction)?  an optional prefix, at least one upper, lowers
 *   3. \p{N}{1,3}
 *   4.  ?[^\s\p{L}\p{N}]+[\r\n/]*                             an optional space, symbols, then line breaks and slashes
 *   5. \s*[\r\n]+                                            white space up to its last line break
 *   6. \s+(?!\S)                                             white space but its last character (all of it at the end)
 *   7. \s+
 * The contraction is '(?:[sS]|[dD]|[mM]|[tT]|[lL][lL]|[vV][eE]|[rR][eE]).
 */

const UPPER = 1
const LOWER = 2
const DIGIT = 4
/** White space for JavaScript's \s: \t \n \v \f \r and space. */
const WHITE = 8
/** \r or \n. */
const BREAK = 16
/** Neither white space nor a letter nor a digit. */
const SYMBOL = 32

const CLASS = new Uint8Array(128)
for (let c = 0; c < 128; c++) {
  if (c >= 65 && c <= 90) CLASS[c] = UPPER
  else if (c >= 97 && c <= 122) CLASS[c] = LOWER
  else if (c >= 48 && c <= 57) CLASS[c] = DIGIT
  else if (c === 10 || c === 13) CLASS[c] = WHITE | BREAK
  else if ((c >= 9 && c <= 13) || c === 32) CLASS[c] = WHITE
  else CLASS[c] = SYMBOL
}

/** Whether `text` is all ASCII, so `asciiPieceEnd` applies. */
export function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false
  return true
}

/** The class of text[i], or 0 past the end. */
function cls(text: string, i: number): number {
  return i < text.length ? (CLASS[text.charCodeAt(i)] as number) : 0
}

/** End of the pre-token that starts at `i` (< text.length) in all-ASCII `text`. */
export function asciiPieceEnd(text: string, i: number): number {
  const c = cls(text, i)
  // Alternatives 1 and 2: a letter run, after an optional prefix (anything but a line break, a letter or a digit).
  const prefixed = (c & (WHITE | SYMBOL)) !== 0 && (c & BREAK) === 0
  const start = prefixed ? i + 1 : i
  if (cls(text, start) & (UPPER | LOWER)) {
    let j = start
    while (cls(text, j) === UPPER) j++
    const uppersEnd = j
    while (cls(text, j) === LOWER) j++
    // 1 needs a lower after the uppers, 2 an upper before the lowers: a letter run starting here satisfies one of them.
    if (j > uppersEnd || uppersEnd > start) return contraction(text, j)
  }
  if (c === DIGIT) {
    let j = i + 1
    while (j < i + 3 && cls(text, j) === DIGIT) j++
    return j
  }
  // 4: an optional space, then symbols, then \r, \n and '/'.
  const symbolsFrom = text.charCodeAt(i) === 32 && cls(text, i + 1) === SYMBOL ? i + 1 : i
  if (cls(text, symbolsFrom) === SYMBOL) {
    let j = symbolsFrom + 1
    while (cls(text, j) === SYMBOL) j++
    for (;;) {
      const k = text.charCodeAt(j)
      if (k === 13 || k === 10 || k === 47) j++
      else return j
    }
  }
  // White space from here on (every other class was handled above).
  let end = i
  let lastBreak = -1
  while (cls(text, end) & WHITE) {
    if (cls(text, end) & BREAK) lastBreak = end
    end++
  }
  if (lastBreak !== -1) return lastBreak + 1
  if (end === text.length || end - i === 1) return end
  return end - 1
}

/** `j` past a contraction suffix that starts at `j`, if one does. */
function contraction(text: string, j: number): number {
  if (text.charCodeAt(j) !== 39) return j
  const a = text.charCodeAt(j + 1) | 0x20
  if (a === 115 || a === 100 || a === 109 || a === 116) return j + 2
  const b = text.charCodeAt(j + 2) | 0x20
  if ((a === 108 && b === 108) || (a === 118 && b === 101) || (a === 114 && b === 101)) return j + 3
  return j
}
