/**
 * The text of a stream event that carries nothing but a piece of choice 0's content, read without `JSON.parse`.
 *
 * Most events of a streamed reply are exactly that (`{"id":…,"choices":[{"index":0,"delta":{"content":"…"},…}]}`),
 * and parsing each one whole to capture the reply for memory was the relay's largest cost per stream (docs/
 * benchmarks.md, "Request path profile": the SSE parser with its per-event parse, 144 µs of 1,236 µs a stream).
 * This reads the one string it needs by position; any event it cannot vouch for comes back `undefined` and the caller
 * parses it as before, so the fast path can only be narrower than the parse, never different.
 *
 * Why position-based matching is safe on JSON text: inside a JSON string every `"` is escaped (`\"`), so a key
 * followed by its colon (`usage":`, `error":`) and the structural prefix below can only occur as structure, never
 * inside some string's text. What is vouched for:
 * - the structure `"choices":[{"index":0,"delta":{` occurs once, and the delta holds `content` (a string), optionally
 *   after `"role":"assistant"`, and nothing else;
 * - no other delta follows (a second choice), and no key ending in `usage` or `error` occurs anywhere (the usage
 *   chunk, OpenRouter's mid-stream error), nor the string `"error"` (a choice that finishes with `error`, OpenRouter's
 *   report of a failure while generating, which may come without an error object), so the event needs nothing but its
 *   text captured.
 * Not vouched for: that the rest of the event is valid JSON. Such an event is relayed as it came (the client's parser
 * judges it) where a full parse would have ended the stream with `upstream_invalid_response`.
 */

const HEAD = '"choices":[{"index":0,"delta":{'
const ROLE = '"role":"assistant",'
const CONTENT = '"content":"'
const FINISH = '"finish_reason":"'
const BACKSLASH = 0x5c
const CLOSE_BRACE = 0x7d
const COLON = 0x3a
const QUOTE = 0x22
const LOWER_E = 0x65
/** Where `delta` sits in HEAD: HEAD is found through it (see `headAt`). */
const DELTA_IN_HEAD = HEAD.indexOf('delta')

export interface ContentDelta {
  /** The content piece, decoded. */
  readonly text: string
  /** The same piece as JSON text (a string literal with its quotes), ready to be written into another event. */
  readonly json: string
  /** The event's `finish_reason` when it is a string (it has no escapes: read as it is written), else null. */
  readonly finishReason: string | null
}

/** See the module comment; `undefined` means "parse this event". */
export function contentDelta(data: string): ContentDelta | undefined {
  const head = headAt(data, 0)
  if (head === -1) return undefined
  let at = head + HEAD.length
  if (data.startsWith(ROLE, at)) at += ROLE.length
  if (!data.startsWith(CONTENT, at)) return undefined
  const open = at + CONTENT.length - 1
  const close = closingQuote(data, open + 1)
  if (close === -1 || data.charCodeAt(close + 1) !== CLOSE_BRACE) return undefined
  if (data.indexOf('"delta"', close) !== -1 || headAt(data, close) !== -1) return undefined
  if (data.indexOf('usage":') !== -1 || hasError(data)) return undefined
  const json = data.slice(open, close + 1)
  const backslash = data.indexOf('\\', open)
  const escaped = backslash !== -1 && backslash < close
  let text: string
  try {
    text = escaped ? (JSON.parse(json) as string) : json.slice(1, -1)
  } catch {
    // An invalid escape: the full parse reports it.
    return undefined
  }
  // `"finish_reason":"` (a string value) and not `native_finish_reason`, which the leading quote rules out.
  const finish = data.indexOf(FINISH, close)
  let finishReason: string | null = null
  if (finish !== -1) {
    const from = finish + FINISH.length
    const end = data.indexOf('"', from)
    const backslash = data.indexOf('\\', from)
    // An escaped finish reason (none is) is left to the parse.
    if (end === -1 || (backslash !== -1 && backslash < end)) return undefined
    finishReason = data.slice(from, end)
  }
  return { text, json, finishReason }
}

/**
 * The event carries choice 0's delta (any: text, tool calls, a finish other than `error`) and no key ending in `usage`
 * or `error`: on a relay that captures nothing, it is relayed as it came. The same position-based reading as
 * `contentDelta` (see the module comment), with the same thing not vouched for: that the rest of the event is valid JSON.
 */
export function choiceDeltaOnly(data: string): boolean {
  return headAt(data, 0) !== -1 && data.indexOf('usage":') === -1 && !hasError(data)
}

/*
 * How the scans are made: V8's `indexOf` for a pattern of 7 characters or more sets up a Boyer-Moore-Horspool table on
 * every call, and one starting with a character as common as `"` or `e` stops at every one of them; `lastIndexOf` steps
 * back one character at a time. Measured on the mock's events (Node 20, min of 9 × 200,000): HEAD 177 ns, `error":`
 * 164 ns, the backward search for a backslash 215 ns, of contentDelta's 761 ns; through `delta`, `rror":` and a
 * forward search instead: see docs/benchmarks.md, "Relay and Responses CPU, 2026-11-27". The error scan has looked for
 * `rror"` since (to find a finish with `error` too), not measured again: the same first character and the same kind of
 * search (under 7 characters), and the extra matches (`"error"`, a string ending in `rror`) are one or two an event
 * at most, in the events that have them.
 */

/** Where HEAD first occurs at or after `from`, or -1: found through its `delta`, a rarer word than its opening quote. */
function headAt(data: string, from: number): number {
  for (let d = data.indexOf('delta', from + DELTA_IN_HEAD); d !== -1; d = data.indexOf('delta', d + 1)) {
    if (data.startsWith(HEAD, d - DELTA_IN_HEAD)) return d - DELTA_IN_HEAD
  }
  return -1
}

/**
 * A key ending in `error` occurs (`error":`), or the string `"error"` (a finish reason: `"finish_reason":"error"`),
 * both found through `rror"` (`r` is rarer than `e` in these events): one scan, as long as the key's alone was, whose
 * pattern only ever occurs in an event that has one of the two or a string ending in `rror`.
 */
function hasError(data: string): boolean {
  for (let i = data.indexOf('rror"'); i !== -1; i = data.indexOf('rror"', i + 1)) {
    if (data.charCodeAt(i - 1) !== LOWER_E) continue
    if (data.charCodeAt(i + 5) === COLON || data.charCodeAt(i - 2) === QUOTE) return true
  }
  return false
}

/** The index of the `"` closing the string whose text starts at `from`, or -1. */
function closingQuote(data: string, from: number): number {
  for (let q = data.indexOf('"', from); q !== -1; q = data.indexOf('"', q + 1)) {
    let slashes = 0
    while (data.charCodeAt(q - 1 - slashes) === BACKSLASH) slashes++
    if (slashes % 2 === 0) return q
  }
  return -1
}
