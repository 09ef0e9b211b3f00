/**
 * Structured text → chunks of about `chunkTokens` tokens (o200k), for retrieval.
 *
 * Units are sentences and lines inside paragraphs (a sentence longer than a quarter chunk is cut at word boundaries).
 * Units are packed greedily. A heading always starts a new chunk (the heading line opens it and its heading path goes
 * with every chunk under it); a paragraph boundary ends the chunk when it is at least half full, so short paragraphs
 * share a chunk but a chunk rarely straddles two long ones. When a chunk must break inside a paragraph, the next one
 * repeats its last sentences, up to `overlapTokens`, so a fact split across the break is whole in one of them.
 * Defaults for the sizes are chosen with bench/rag-eval.ts.
 */
import { gatewayError } from '../errors.js'
import type { Tokens } from '../types.js'
import type { Block } from './text-builder.js'
import { countO200k, countO200kIngest } from '../context/token-count.js'
import { countAcrossCuts } from './cut-count.js'

export interface Chunk {
  /** 0-based position in the file. */
  index: number
  text: string
  /** Exact o200k token count of `text`. */
  tokens: Tokens
  /** Character range of `text` in the extracted text. */
  start: number
  end: number
  /** Titles of the enclosing headings, outermost first. */
  headingPath: string[]
}

export interface ChunkOptions {
  chunkTokens: Tokens
  overlapTokens: Tokens
  /** More chunks than this → 413 `payload_too_large`. */
  maxChunks: number
  /** Token counter; exact o200k by default (`countO200kIngest`). */
  countTokens?: (text: string) => Tokens
  /** A paragraph break ends a chunk filled to at least this share of `chunkTokens`. Default 0.5. */
  minFill?: number
}

/** Exact o200k count (see token-count.ts); re-exported here, where its callers have always found it. */
export { countO200k }

interface Unit {
  start: number
  end: number
  /**
   * Where the unit's share of the surrounding whitespace begins and ends: spaces before it are its own, line breaks
   * after it too — the way the o200k pre-tokenizer groups them (" word", ".\n\n").
   */
  lead: number
  tail: number
  /** Tokens of text[lead, tail): the unit as it is tokenized inside a chunk. */
  tokens: Tokens
  /** Starts where unbroken text was cut, mid-word: not a pre-tokenizer boundary, so sums across it are not exact. */
  cut: boolean
  para: number
  heading: boolean
  path: string[]
}

// A sentence ends at . ! ? (or CJK ones) plus closing quotes/brackets, before whitespace; a line break always ends a unit.
const BOUNDARY = /[.!?。！？][)"'”’\]]*(?=\s)|\n/g

export function chunkText(doc: { text: string; blocks: readonly Block[] }, opts: ChunkOptions): Chunk[] {
  const count = opts.countTokens ?? countO200kIngest
  const { chunkTokens, overlapTokens } = opts
  if (!(chunkTokens >= 1) || !(overlapTokens >= 0) || overlapTokens >= chunkTokens)
    throw new RangeError(`chunkText: need 0 ≤ overlapTokens (${overlapTokens}) < chunkTokens (${chunkTokens})`)
  const minFill = (opts.minFill ?? 0.5) * chunkTokens
  const pieceTokens = Math.max(8, Math.floor(chunkTokens / 4))
  const text = doc.text

  const chunks: Chunk[] = []
  const emit = (units: readonly Unit[]): void => {
    const first = units[0] as Unit
    const last = units[units.length - 1] as Unit
    const body = text.slice(first.start, last.end)
    if (chunks.length >= opts.maxChunks)
      throw gatewayError('payload_too_large', {
        param: 'file',
        message: `The file makes more than ${opts.maxChunks} chunks of ${chunkTokens} tokens`,
      })
    // Each unit was counted once with its share of whitespace, split at pre-tokenizer boundaries, so a chunk's count
    // is the sum over its units, corrected at the two trimmed ends by recounting one word each: the text is tokenized
    // about once, not once per unit plus once per chunk and per overlap (tokenizing was 38% of ingestion CPU before).
    // Equal to counting the chunk's text (checked on every SQuAD chunk and in the tests).
    let tokens: Tokens
    if (units.some((u, i) => i > 0 && u.cut)) tokens = acrossCuts(units) ?? count(body)
    else if (units.length === 1) tokens = first.lead === first.start ? withoutTail(first) : count(body)
    else {
      tokens = withoutLead(first) + withoutTail(last)
      for (let i = 1; i < units.length - 1; i++) tokens += (units[i] as Unit).tokens
    }
    chunks.push({ index: chunks.length, text: body, tokens, start: first.start, end: last.end, headingPath: [...last.path] })
  }

  /** A chunk of units cut from one unbroken run (cut-count.ts), when it is nothing else: no white space at its ends. */
  const acrossCuts = (units: readonly Unit[]): Tokens | undefined => {
    const first = units[0] as Unit
    const last = units[units.length - 1] as Unit
    if (first.lead !== first.start || last.tail !== last.end || units.some((u, i) => i > 0 && !u.cut)) return undefined
    return countAcrossCuts(text, units, count)
  }

  /** The unit's count without the spaces before it: only its first word tokenizes differently. */
  const withoutLead = (u: Unit): Tokens => {
    if (u.lead === u.start) return u.tokens
    const p = spaceAfter(text, u.start, u.end)
    if (p === -1) return count(text.slice(u.start, u.tail))
    return u.tokens - count(text.slice(u.lead, p)) + count(text.slice(u.start, p))
  }
  /** The unit's count (with its spaces before) without the line breaks after it: only its last word differs. */
  const withoutTail = (u: Unit): Tokens => {
    if (u.tail === u.end) return u.tokens
    // A letter or digit before white space ends its pre-token there whatever follows, so the white space's tokens are
    // its own: one line break to count instead of the whole unit again (a line of base64 has no space to cut at).
    if (isAsciiAlnum(text.charCodeAt(u.end - 1)) && isSpace(text.charCodeAt(u.end))) return u.tokens - count(text.slice(u.end, u.tail))
    const q = spaceBefore(text, u.end - 1, u.start)
    if (q === -1) return count(text.slice(u.lead, u.end))
    return u.tokens - count(text.slice(q, u.tail)) + count(text.slice(q, u.end))
  }

  let cur: Unit[] = []
  let curTokens = 0
  const add = (u: Unit): void => {
    const last = cur[cur.length - 1]
    if (last !== undefined) {
      const onlyHeadings = cur.every((x) => x.heading)
      const newSection = u.heading && !onlyHeadings
      const full = curTokens + u.tokens > chunkTokens
      const paraBreak = u.para !== last.para && curTokens >= minFill
      if (newSection || full || paraBreak) {
        emit(cur)
        // Overlap only inside a paragraph that continues: across a boundary the next chunk starts clean.
        const carried: Unit[] = []
        let carriedTokens = 0
        if (!newSection && !paraBreak && u.para === last.para) {
          for (let i = cur.length - 1; i >= 0; i--) {
            const c = cur[i] as Unit
            if (c.para !== u.para || carriedTokens + c.tokens > overlapTokens) break
            if (carriedTokens + c.tokens + u.tokens > chunkTokens) break
            carried.unshift(c)
            carriedTokens += c.tokens
          }
        }
        cur = carried
        curTokens = carriedTokens
      }
    }
    cur.push(u)
    curTokens += u.tokens
  }

  // Units are packed as they are found, so a file past `maxChunks` is refused after counting that many chunks' worth
  // of text, not all of it (a 15 MB file of base64 is ~50,000 chunks: refused after a fifth of the work).
  collectUnits(text, doc.blocks, pieceTokens, count, add)
  if (cur.length > 0) emit(cur)
  return chunks
}

/** Headings, sentences and lines in document order, each with its heading path and token count, passed to `onUnit`. */
function collectUnits(
  text: string,
  blocks: readonly Block[],
  pieceTokens: Tokens,
  count: (s: string) => Tokens,
  onUnit: (u: Unit) => void,
): void {
  // The whitespace between neighbours is shared out (up to and including the last line break goes to the unit
  // before), so a unit is counted and passed on once the next one is known.
  let pending: Unit | undefined
  const unit = (start: number, end: number, para: number, heading: boolean, path: string[]): void => {
    const prev = pending
    // A line that starts with '/' right after a line break: o200k's symbol pre-token (" ?[^\s\p{L}\p{N}]+[\r\n/]*")
    // runs on over the break into it ("/\n/" is one), so that boundary is no pre-token boundary either.
    const slashAfterBreak = text.charCodeAt(start) === 47 && (text.charCodeAt(start - 1) === 10 || text.charCodeAt(start - 1) === 13)
    const cut = prev !== undefined && ((prev.end === start && !isSpace(text.charCodeAt(start - 1))) || slashAfterBreak)
    const u: Unit = { start, end, lead: start, tail: end, tokens: 0, cut, para, heading, path }
    if (prev !== undefined) {
      let nl = start - 1
      while (nl >= prev.end && text.charCodeAt(nl) !== 10) nl--
      prev.tail = nl >= prev.end ? nl + 1 : prev.end
      u.lead = prev.tail
      finish(prev)
    }
    pending = u
  }
  const finish = (u: Unit): void => {
    u.tokens = count(text.slice(u.lead, u.tail))
    onUnit(u)
  }
  const cutLong = (s: number, e: number): Array<[number, number]> => {
    const tokens = countOrEstimate(text, s, e, count)
    return tokens <= pieceTokens * 2 ? [[s, e]] : pieces(text, s, e, tokens, pieceTokens)
  }
  const stack: Array<{ level: number; title: string }> = []
  let path: string[] = []
  let para = 0
  for (const b of blocks) {
    para++
    if (b.kind === 'heading') {
      while (stack.length > 0 && (stack[stack.length - 1] as { level: number }).level >= b.level) stack.pop()
      stack.push({ level: b.level, title: b.title })
      path = stack.map((h) => h.title)
      // A heading is one unit unless it is as long as a paragraph (one line of megabytes): then it is cut like one.
      if (b.end - b.start <= pieceTokens * 8) unit(b.start, b.end, para, true, path)
      else for (const [ps, pe] of cutLong(b.start, b.end)) unit(ps, pe, para, true, path)
      continue
    }
    for (const [s, e] of sentences(text, b.start, b.end)) {
      // A rough size first (4 characters a token); only very long sentences are counted before being cut.
      if (e - s <= pieceTokens * 8) unit(s, e, para, false, path)
      else for (const [ps, pe] of cutLong(s, e)) unit(ps, pe, para, false, path)
    }
  }
  if (pending !== undefined) finish(pending)
}

/** Longer sentences are not counted whole before being cut: their size in tokens is estimated from this many characters. */
const ESTIMATE_SAMPLE = 65_536

/**
 * Tokens of text[s, e), or for a "sentence" longer than ESTIMATE_SAMPLE (no real one is; a file of base64 on one line
 * is) an estimate from its first ESTIMATE_SAMPLE characters: it only sets the size of the pieces it is cut into,
 * each of which is counted exactly, and counting it whole cost as much as counting every piece again.
 */
function countOrEstimate(text: string, s: number, e: number, count: (s: string) => Tokens): Tokens {
  if (e - s <= ESTIMATE_SAMPLE) return count(text.slice(s, e))
  let end = s + ESTIMATE_SAMPLE
  const c = text.charCodeAt(end - 1)
  if (c >= 0xd800 && c <= 0xdbff) end++
  return Math.ceil((count(text.slice(s, end)) * (e - s)) / (end - s))
}

/** Sentence and line ranges in text[from, to), trimmed, empty ones dropped (also how knowledge/focus.ts cuts an excerpt). */
export function sentences(text: string, from: number, to: number): Array<[number, number]> {
  const out: Array<[number, number]> = []
  const push = (s: number, e: number): void => {
    while (s < e && isSpace(text.charCodeAt(s))) s++
    while (e > s && isSpace(text.charCodeAt(e - 1))) e--
    if (e > s) out.push([s, e])
  }
  BOUNDARY.lastIndex = from
  let start = from
  for (;;) {
    const m = BOUNDARY.exec(text)
    if (m === null || m.index >= to) break
    const end = m[0] === '\n' ? m.index : m.index + m[0].length
    push(start, Math.min(end, to))
    start = m.index + m[0].length
    BOUNDARY.lastIndex = start
  }
  push(start, to)
  return out
}

/** Cut a long sentence into pieces of about `target` tokens at whitespace (or anywhere, for unbroken text). */
function pieces(
  text: string,
  from: number,
  to: number,
  tokens: Tokens,
  target: Tokens,
): Array<[number, number]> {
  const out: Array<[number, number]> = []
  const charsPerPiece = Math.max(1, Math.floor(((to - from) * target) / tokens))
  let s = from
  while (s < to) {
    let e = Math.min(to, s + charsPerPiece)
    if (e < to) {
      const space = spaceBefore(text, e, Math.floor(s + charsPerPiece / 2))
      if (space !== -1) e = space
    }
    // Never split a UTF-16 surrogate pair.
    const c = text.charCodeAt(e - 1)
    if (e < to && c >= 0xd800 && c <= 0xdbff) e++
    let ps = s
    while (ps < e && isSpace(text.charCodeAt(ps))) ps++
    if (e > ps) out.push([ps, e])
    s = e
  }
  return out
}

// The two searches below stop at the unit's or piece's own bounds. `indexOf(' ')`/`lastIndexOf(' ')` ran on to the
// text's ends, so text without spaces cost a scan of the whole file per chunk: quadratic (1 MB on one line, 13 s).

/** The first space in text[from, to), or -1. */
function spaceAfter(text: string, from: number, to: number): number {
  for (let i = from; i < to; i++) if (text.charCodeAt(i) === 32) return i
  return -1
}

/** The last space in text(after, from], or -1. */
function spaceBefore(text: string, from: number, after: number): number {
  for (let i = from; i > after; i--) if (text.charCodeAt(i) === 32) return i
  return -1
}

function isAsciiAlnum(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
}

function isSpace(c: number): boolean {
  return c === 32 || c === 10 || c === 9 || c === 13 || c === 12 || c === 0xa0
}
