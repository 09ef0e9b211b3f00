/**
 * Context packing: choose what goes upstream within the model's window, with exact token counts. Pure: no I/O, no
 * tokenizer of its own — every count comes from the callbacks (TokenCounter for the model), and history is counted
 * from the content tokens stored with each message, so packing a 1,000-message session tokenizes nothing but the
 * rendered retrieval block.
 *
 * Priority, each step filling what the previous left:
 *   1. the request's own messages, its tool definitions and the reply reserve (must fit, else 400
 *      context_length_exceeded);
 *   2. retrieved chunks, best first, within their budget;
 *   3. history, newest first, whole units (an assistant message with tool calls and all of its results is one unit;
 *      units that cannot be sent as they are, an unanswered call or an orphaned result, are skipped), starting at a
 *      user message, up to maxHistoryMessages;
 *      (3b. when the history does not fit and `recall` is given: part of its room for recalled older turns.)
 * Order sent: request system/developer, history oldest first, recalled turns, retrieved context, request others. A
 * recall block sent again unchanged (`RecalledBlock.before`) stays inside the history, where it was first sent.
 * What is the same from one turn of a session to the next comes first and what changes per request last, so
 * consecutive prompts share a prefix providers can cache; the per-request messages go right before the request's own
 * messages, which begin with a whole unit (planner: a request carrying tool results starts with their call), so
 * nothing is ever inserted inside a unit.
 *
 * Exactness: the chat encodings frame every message independently, so a chat's count is chatOverhead plus the sum of
 * its messages' counts; `totalTokens` is that sum for exactly the messages returned.
 */
import { gatewayError } from '../errors.js'
import type { StoredMessage } from '../types.js'
import { toolUnits } from '../messages/pairing.js'
import type { ChatMessage, Tokens } from '../types.js'

export interface RetrievalInput {
  /** Candidate chunks, best first, with their content tokens (a lower bound of what each adds to the message). */
  candidates: ReadonlyArray<{ tokens: Tokens }>
  /** Most the retrieval message may take, framing included. */
  budget: Tokens
  /** The one message carrying the selected chunks (candidate indexes, best first). Called with a non-empty list. */
  render: (selected: number[]) => ChatMessage
}

/**
 * Long-term recall (issue 5). Used only when the history does not fit whole: the newest turns get `recentShare` of
 * the history room, and `select` may fill the rest with older turns in one message, placed after the retrieval
 * message. Whatever room the block leaves unused goes back to the newest turns.
 */
export interface RecallInput {
  /** Share (0–1) of the history room kept for the newest turns. */
  recentShare: number
  /**
   * The most the block ever takes. When given, the newest turns get the history room minus the block's whole room
   * (min(maxTokens, the rest of recentShare)), whatever the block turns out to use: the kept window is then the same
   * from one request to the next (a stable prefix), at the cost of the room a small block leaves unused. Without it,
   * unused room goes back to the newest turns.
   */
  maxTokens?: Tokens
  select: (ctx: {
    /** Tokens the returned message may take, framing included. */
    room: Tokens
    /** Seqs already in the recent window (to deduplicate against). */
    recent: ReadonlySet<number>
    /** Seq of the oldest recent message included, if any: recalled turns come from before it. */
    oldestRecentSeq: number | undefined
    /** The seq after the newest stored message: where a block first sent now would stay (`RecalledBlock.before`). */
    nextSeq: number
  }) => RecalledBlock | undefined
}

export interface RecalledBlock {
  message: ChatMessage
  /** Older messages it carries. */
  messages: number
  /**
   * Their seqs, ascending. When given, the room the block leaves unused goes back to the newest turns (and `select` is
   * called once more, with the wider recent window), and `truncated` accounts for them.
   */
  seqs?: readonly number[]
  /**
   * When given, exactly what `messageTokens(message)` returns: a selector that counted it to fit the room (without
   * re-tokenizing stored turns, see recall/session-recall.ts) saves counting it twice. Else the packer counts it.
   */
  tokens?: Tokens
  /**
   * The seq of the history message the block goes before: the first kept message from this seq on that opens a user
   * turn. A block sent again unchanged stays where it was first sent (then right after the history), so the turns
   * saved since come after it and the prompt's prefix runs through the block. Absent, or no such message kept: after
   * the history.
   */
  before?: number
}

export interface PackInput {
  /** Usable window (after the vendor margin and learned correction). */
  window: Tokens
  /** Room kept for the reply: max_completion_tokens, max_tokens or the configured default. */
  reserve: Tokens
  /** What else the request adds to the prompt besides messages: its tool definitions and response schema. Default 0. */
  extraTokens?: Tokens
  /** The request's system messages: always kept, first. */
  requestSystem: readonly ChatMessage[]
  /** The request's other messages: always kept, last. */
  requestOther: readonly ChatMessage[]
  /** Session history, oldest first. */
  history: readonly StoredMessage[]
  /**
   * Messages older than `history` that exist but were not read (the read was limited to the newest ones): they are
   * left out unless recalled, so `truncated` is true and recall is consulted. Default 0.
   */
  olderMessages?: number
  maxHistoryMessages: number
  /**
   * When the history does not fit whole, its kept window starts at a seq that is a multiple of this step (messages;
   * a power of two at most half the kept messages), so the start moves in steps, not one turn per request, and
   * consecutive prompts of a session share their prefix until it jumps. Default 1 (no steps).
   */
  historyStep?: number
  retrieval?: RetrievalInput
  recall?: RecallInput
  messageTokens: (m: ChatMessage) => Tokens
  /** From the stored content count: no re-tokenizing. */
  historyMessageTokens: (m: StoredMessage) => Tokens
  chatOverhead: Tokens
}

export interface PackResult {
  /** Request system, history oldest first, recalled turns (if any), retrieved context (if any), request others. */
  messages: ChatMessage[]
  /** Exact count of `messages`: chatOverhead + extraTokens + Σ message tokens. */
  totalTokens: Tokens
  /** Each message's tokens, aligned with `messages` (for the stable-prefix report). */
  messageTokens: Tokens[]
  /** Messages at the start of `messages` that are the request's system/developer messages and history: the part that
   * stays the same from one request of a session to the next. */
  stableMessages: number
  includedHistory: number
  includedChunks: number
  /** Candidate indexes of the chunks in the retrieval message, best first. */
  selectedChunks: number[]
  /** Older messages carried by the recall block (0 without one). */
  recalledMessages: number
  /** Something available (history or chunks) was left out for the budget. */
  truncated: boolean
}

/**
 * The request's own messages (`requestTokens`, tool definitions and response schema included: `extraTokens` of them) and the reply's
 * reserve must fit the window: else 400 context_length_exceeded, before anything else is packed or sent.
 */
export function checkRequestFits(window: Tokens, reserve: Tokens, requestTokens: Tokens, extraTokens: Tokens): void {
  if (requestTokens + reserve <= window) return
  const tools = extraTokens > 0 ? ` (${extraTokens} of them the tool definitions and response schema)` : ''
  throw gatewayError('context_length_exceeded', {
    param: 'messages',
    message:
      `This model's context window allows ${window} tokens, but the request's messages take ${requestTokens}` +
      `${tools} and ${reserve} are reserved for the reply (max_completion_tokens or max_tokens): ` +
      `${requestTokens + reserve} in total. Shorten the messages or lower max_completion_tokens.`,
  })
}

/** Re-selections of the recall block after the newest turns take back room it left unused. */
const RECALL_ROUNDS = 3

export function pack(input: PackInput): PackResult {
  const { window, reserve, messageTokens } = input
  const extra = input.extraTokens ?? 0
  const requestTokens =
    input.chatOverhead + extra + sum(input.requestSystem, messageTokens) + sum(input.requestOther, messageTokens)
  checkRequestFits(window, reserve, requestTokens, extra)
  let room = window - reserve - requestTokens
  let truncated = false

  const chunks = input.retrieval === undefined ? undefined : selectChunks(input.retrieval, room, messageTokens)
  room -= chunks?.tokens ?? 0
  truncated ||= (chunks?.selected.length ?? 0) < (input.retrieval?.candidates.length ?? 0)

  const limit = Math.max(0, Math.floor(input.maxHistoryMessages))
  const history = input.history
  const older = Math.max(0, input.olderMessages ?? 0)
  const units = toolUnits(history)
  const step = Math.max(1, Math.floor(input.historyStep ?? 1))
  const newest = (r: Tokens): Recent => newestFirst(history, units, r, limit, step, older > 0, input.historyMessageTokens)
  let recent = newest(room)
  let recalled: (RecalledBlock & { tokens: Tokens }) | undefined
  if (recent.cut || older > 0) {
    truncated = true
    if (input.recall !== undefined) {
      const share = Math.min(1, Math.max(0, input.recall.recentShare))
      const cap = input.recall.maxTokens
      const split = newest(cap === undefined ? Math.floor(room * share) : room - Math.min(cap, room - Math.floor(room * share)))
      recalled = selectRecall(input.recall, history, split, room - split.tokens, messageTokens)
      // Nothing recalled: without a fixed block room the newest turns keep the whole room rather than leave it empty;
      // with one (`maxTokens`) they keep the same window either way, so the prompt's prefix does not flip between two
      // windows with the query.
      if (recalled !== undefined || cap !== undefined) recent = split
      if (recalled?.seqs !== undefined) {
        // Without a fixed block room, the block may leave part of its room unused (few matches, or its own cap): the
        // newest turns take it back, and the block is selected again without the turns they now cover, so nothing is
        // sent twice. Its room can only grow (wider.tokens ≤ room − first block), so it keeps at least what it had.
        // A few rounds: each re-selection may free a little more (turns now recent leave the block).
        for (let round = 0; cap === undefined && round < RECALL_ROUNDS && room - recent.tokens - recalled.tokens > 0; round++) {
          const wider = newest(room - recalled.tokens)
          if (wider.start >= recent.start) break
          const again = selectRecall(input.recall, history, wider, room - wider.tokens, messageTokens)
          if (again === undefined) break
          recent = wider
          recalled = again
        }
        // Honest truncation: still true while any history message is neither recent nor recalled.
        const first = history[0]?.seq ?? Infinity
        const seqs = recalled.seqs ?? []
        const recalledInHistory = seqs.filter((s) => s >= first).length
        const leftOut = history.length - recent.count - recalledInHistory + older - (seqs.length - recalledInHistory)
        truncated = leftOut > 0 || (chunks?.selected.length ?? 0) < (input.retrieval?.candidates.length ?? 0)
      }
    }
  }

  const messages: ChatMessage[] = [...input.requestSystem]
  const tokens: Tokens[] = input.requestSystem.map(messageTokens)
  const before = recalled?.before
  // Inside the history only at a unit that opens a user turn: never between a call and its results.
  const opensTurn = before === undefined ? undefined : new Set(units.filter((u) => u.complete && opensWithUser(history, u)).map((u) => u.start))
  let placed = false
  for (const i of recent.indexes) {
    const h = history[i] as StoredMessage
    if (recalled !== undefined && !placed && before !== undefined && h.seq >= before && opensTurn?.has(i) === true) {
      messages.push(recalled.message)
      tokens.push(recalled.tokens)
      placed = true
    }
    messages.push(h.message)
    tokens.push(input.historyMessageTokens(h))
  }
  // A block placed inside the history is part of what stays the same while it is sent again.
  const stableMessages = messages.length
  if (recalled !== undefined && !placed) {
    messages.push(recalled.message)
    tokens.push(recalled.tokens)
  }
  if (chunks !== undefined) {
    messages.push(chunks.message)
    tokens.push(chunks.tokens)
  }
  for (const m of input.requestOther) {
    messages.push(m)
    tokens.push(messageTokens(m))
  }

  return {
    messages,
    messageTokens: tokens,
    stableMessages,
    totalTokens: requestTokens + (chunks?.tokens ?? 0) + (recalled?.tokens ?? 0) + recent.tokens,
    includedHistory: recent.count,
    includedChunks: chunks?.selected.length ?? 0,
    selectedChunks: chunks?.selected ?? [],
    recalledMessages: recalled?.messages ?? 0,
    truncated,
  }
}

/**
 * Best-first greedy selection by content tokens (a lower bound of the rendered size), then an exact count of the
 * rendered message; while it is over budget, the lowest-ranked chunks covering the overshoot are dropped. A chunk too
 * large for what is left is skipped, so a smaller, lower-ranked one can still use the room.
 */
function selectChunks(
  r: RetrievalInput,
  room: Tokens,
  messageTokens: (m: ChatMessage) => Tokens,
): { message: ChatMessage; tokens: Tokens; selected: number[] } | undefined {
  const budget = Math.min(r.budget, room)
  const selected: number[] = []
  let estimate = 0
  for (const [i, c] of r.candidates.entries()) {
    if (estimate + c.tokens <= budget) {
      selected.push(i)
      estimate += c.tokens
    }
  }
  while (selected.length > 0) {
    const message = r.render(selected)
    const tokens = messageTokens(message)
    if (tokens <= budget) return { message, tokens, selected }
    let over = tokens - budget
    do {
      over -= r.candidates[selected.pop() ?? 0]?.tokens ?? 0
    } while (over > 0 && selected.length > 0)
  }
  return undefined
}

interface Recent {
  /** History indexes included, ascending. */
  indexes: number[]
  /** Index in history of the oldest included message (history.length when none). */
  start: number
  count: number
  tokens: Tokens
  /** Older messages were left out for the room or the count limit. */
  cut: boolean
}

/** The history cut into units (messages/pairing.ts); `complete`: can be sent as it is. */
type Unit = ReturnType<typeof toolUnits>[number]

/** Where a kept window may begin. */
function opensWithUser(history: readonly StoredMessage[], u: Unit): boolean {
  return history[u.start]?.role === 'user'
}

/**
 * The newest whole units that fit `room` and `limit`, then trimmed to open with a user message. Units that cannot be
 * sent (an assistant's calls the client never answered, a result whose call was pruned) are passed over, never sent:
 * OpenAI answers such a prompt with 400 and other providers misread it. The trim keeps turns whole: a suffix can
 * only cut a user turn by starting at its reply, which is dropped (the budget freed by a dropped reply is not reused
 * for older turns, which would leave a gap). It also covers replies whose question is not stored (pruned, or a
 * conversation that opened with a greeting): sent first they would answer nothing, and some providers reject a
 * conversation whose first non-system turn is the assistant's.
 */
function newestFirst(
  history: readonly StoredMessage[],
  units: readonly Unit[],
  room: Tokens,
  limit: number,
  step: number,
  /** Older messages exist that were not even read: the window is cut whatever fits. */
  olderUnread: boolean,
  tokensOf: (m: StoredMessage) => Tokens,
): Recent {
  const kept: Array<{ u: Unit; tokens: Tokens }> = []
  let tokens = 0
  let count = 0
  let cut = false
  let k = units.length - 1
  for (; k >= 0; k--) {
    const u = units[k] as Unit
    if (!u.complete) continue
    let t = 0
    for (let i = u.start; i < u.end; i++) t += tokensOf(history[i] as StoredMessage)
    if (count + (u.end - u.start) > limit || tokens + t > room) {
      // A loss only if something sendable was left: units before any user message would be trimmed anyway.
      for (let i = 0; i <= k && !cut; i++) cut = opensWithUser(history, units[i] as Unit)
      break
    }
    kept.push({ u, tokens: t })
    tokens += t
    count += u.end - u.start
  }
  const drop = (): void => {
    const dropped = kept.pop() as { u: Unit; tokens: Tokens }
    tokens -= dropped.tokens
    count -= dropped.u.end - dropped.u.start
  }
  if ((cut || olderUnread) && step > 1) {
    // Start at a step boundary: the window is a function of the stored session alone, stable while the room varies
    // within a step. Powers of two nest, so a smaller step (a tight room) still shares boundaries with larger ones.
    let s = 1
    while (s * 2 <= Math.min(step, count / 2)) s *= 2
    const oldest = kept.at(-1)
    const boundary = oldest === undefined ? 0 : Math.ceil((history[oldest.u.start] as StoredMessage).seq / s) * s
    while (kept.length > 0 && (history[(kept.at(-1) as { u: Unit }).u.start] as StoredMessage).seq < boundary) drop()
  }
  // Open with a user message.
  while (kept.length > 0 && !opensWithUser(history, (kept.at(-1) as { u: Unit }).u)) drop()
  const indexes: number[] = []
  for (let j = kept.length - 1; j >= 0; j--) {
    const u = (kept[j] as { u: Unit }).u
    for (let i = u.start; i < u.end; i++) indexes.push(i)
  }
  return { indexes, start: indexes[0] ?? history.length, count, tokens, cut }
}

function selectRecall(
  recall: RecallInput,
  history: readonly StoredMessage[],
  recent: Recent,
  room: Tokens,
  messageTokens: (m: ChatMessage) => Tokens,
): (RecalledBlock & { tokens: Tokens }) | undefined {
  if (room <= 0) return undefined
  const seqs = new Set<number>()
  for (const i of recent.indexes) seqs.add((history[i] as StoredMessage).seq)
  const picked = recall.select({ room, recent: seqs, oldestRecentSeq: history[recent.start]?.seq, nextSeq: (history.at(-1)?.seq ?? -1) + 1 })
  if (picked === undefined || picked.messages <= 0) return undefined
  const tokens = picked.tokens ?? messageTokens(picked.message)
  return tokens <= room ? { ...picked, tokens } : undefined
}

function sum<T>(items: readonly T[], tokensOf: (m: T) => Tokens): Tokens {
  let total = 0
  for (const m of items) total += tokensOf(m)
  return total
}
