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
import { countO200k } from '../context/token-count.js'

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
  /** Token counter; o200k by default. */
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
  const count = opts.countTokens ?? countO200k
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
    if (units.length === 1 || units.some((u, i) => i > 0 && u.cut)) tokens = count(body)
    else {
      tokens = withoutLead(first) + withoutTail(last)
      for (let i = 1; i < units.length - 1; i++) tokens += (units[i] as Unit).tokens
    }
    chunks.push({ index: chunks.length, text: body, tokens, start: first.start, end: last.end, headingPath: [...last.path] })
  }

  /** The unit's count without the spaces before it: only its first word tokenizes differently. */
  const withoutLead = (u: Unit): Tokens => {
    if (u.lead === u.start) return u.tokens
    const p = text.indexOf(' ', u.start)
    if (p === -1 || p >= u.end) return count(text.slice(u.start, u.tail))
    return u.tokens - count(text.slice(u.lead, p)) + count(text.slice(u.start, p))
  }
  /** The unit's count (with its spaces before) without the line breaks after it: only its last word differs. */
  const withoutTail = (u: Unit): Tokens => {
    if (u.tail === u.end) return u.tokens
    const q = text.lastIndexOf(' ', u.end - 1)
    if (q <= u.start) return count(text.slice(u.lead, u.end))
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

  const units = collectUnits(text, doc.blocks, pieceTokens, count)
  for (const u of units) add(u)
  if (cur.length > 0) emit(cur)
  return chunks
}

/** Headings, sentences and lines in document order, each with its heading path and token count. */
function collectUnits(text: string, blocks: readonly Block[], pieceTokens: Tokens, count: (s: string) => Tokens): Unit[] {
  const units: Unit[] = []
  const unit = (start: number, end: number, para: number, heading: boolean, path: string[]): void => {
    const prev = units[units.length - 1]
    const cut = prev !== undefined && prev.end === start && !isSpace(text.charCodeAt(start - 1))
    units.push({ start, end, lead: start, tail: end, tokens: 0, cut, para, heading, path })
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
      unit(b.start, b.end, para, true, path)
      continue
    }
    for (const [s, e] of sentences(text, b.start, b.end)) {
      // A rough size first (4 characters a token); only very long sentences are counted before being cut.
      if (e - s <= pieceTokens * 8) unit(s, e, para, false, path)
      else {
        const tokens = count(text.slice(s, e))
        if (tokens <= pieceTokens * 2) unit(s, e, para, false, path)
        else for (const [ps, pe] of pieces(text, s, e, tokens, pieceTokens)) unit(ps, pe, para, false, path)
      }
    }
  }
  // Share out the whitespace between neighbours: up to and including the last line break goes to the unit before.
  for (let i = 0; i < units.length; i++) {
    const u = units[i] as Unit
    const next = units[i + 1]
    if (next !== undefined) {
      const gap = text.slice(u.end, next.start)
      const nl = gap.lastIndexOf('\n')
      u.tail = u.end + nl + 1
      next.lead = u.tail
    }
    u.tokens = count(text.slice(u.lead, u.tail))
  }
  return units
}

/** Sentence and line ranges in text[from, to), trimmed, empty ones dropped. */
function sentences(text: string, from: number, to: number): Array<[number, number]> {
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
      const space = text.lastIndexOf(' ', e)
      if (space > s + charsPerPiece / 2) e = space
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

function isSpace(c: number): boolean {
  return c === 32 || c === 10 || c === 9 || c === 13 || c === 12 || c === 0xa0
}
