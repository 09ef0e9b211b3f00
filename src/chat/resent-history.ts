/**
 * Clients that resend their whole history (LangChain, Open WebUI, LibreChat, the Vercel AI SDK's tool loop) in a
 * session: which of the request's messages the session already holds, so they are sent and saved once.
 *
 * The request's messages r (after its leading system/developer ones) are aligned with the stored session s by
 * position and content (messages/canonical.ts): the longest run r[0..j) equal to s[p..p+j).
 *  - p + j = n (the run reaches the session's newest message): the client resent the tail of what is stored and the
 *    rest of its request is new. This is also the plain case, j = 0: nothing resent.
 *  - p + j < n with j ≥ 2: the client went back — edited a turn (r[j] differs from s[p+j]) or regenerates the reply
 *    to its last message (r ends inside the stored conversation). The conversation continues from there: the prompt
 *    is s[0..p+j) then r[j..], and the save replaces the stored messages from p+j on.
 * A single repeated message ("yes", "continue") is never taken for a rewind: a new message may equal an old one,
 * which is why matching is by position and runs of at least two, never by a bare content hash.
 * The request keeps at least its last message as new: a request is never answered without one of its own messages.
 */
import { canonicalKey } from '../messages/canonical.js'
import type { StoredMessage } from '../types.js'
import type { ChatMessage } from '../types.js'

export interface Alignment {
  /** Stored messages (a prefix of the list aligned against) that are this request's history. */
  history: number
  /** Leading request messages that the session already holds (they are history, not new). */
  recognized: number
  /** Seq from which the stored session is replaced by this exchange (a rewind), else undefined. */
  replaceFrom: number | undefined
}

/** The shortest run taken for a rewind (see above). */
const MIN_REWIND = 2

export function alignResent(stored: readonly StoredMessage[], request: readonly ChatMessage[]): Alignment {
  const n = stored.length
  const plain: Alignment = { history: n, recognized: 0, replaceFrom: undefined }
  if (n === 0 || request.length === 0) return plain
  const keys = request.map(canonicalKey)
  const first = keys[0]
  let tail = 0
  let tailAt = n
  let rewind = 0
  let rewindAt = n
  for (let p = 0; p < n; p++) {
    if (canonicalKey((stored[p] as StoredMessage).message) !== first) continue
    let j = 1
    while (j < keys.length && p + j < n && canonicalKey((stored[p + j] as StoredMessage).message) === keys[j]) j++
    if (p + j === n) {
      if (j > tail) [tail, tailAt] = [j, p]
    } else if (j >= MIN_REWIND && j >= rewind) {
      ;[rewind, rewindAt] = [j, p]
    }
  }
  if (rewind > tail) {
    const recognized = Math.min(rewind, request.length - 1)
    const at = rewindAt + recognized
    return { history: at, recognized, replaceFrom: (stored[at] as StoredMessage).seq }
  }
  if (tail === 0) return plain
  if (tail < request.length) return { history: n, recognized: tail, replaceFrom: undefined }
  // The request is all stored already (it ends with the session's newest message): its last message is taken as new
  // again, replacing the stored one, so the request still has a message of its own.
  const at = tailAt + tail - 1
  return { history: at, recognized: tail - 1, replaceFrom: (stored[at] as StoredMessage).seq }
}
