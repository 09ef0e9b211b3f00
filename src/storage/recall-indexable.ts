/** Which of a save's messages long-term recall indexes, the same for every engine (recall-repo.ts, postgres/recall-store.ts). */
import type { RecallPrepared, StoredMessage } from './interface.js'
import { isZeroVector } from '../retrieval/zero-vector.js'
import type { Tokens } from '../types.js'

/**
 * The saved messages to index, with their vectors and line counts: not those pruned by the same save (the session's
 * limit; the same objects as in `saved`, whereas a rewind's replaced messages are others), nor those whose vector is
 * zero (no index terms: the cosine graph cannot place it).
 */
export function indexable(
  saved: readonly StoredMessage[],
  pruned: readonly Pick<StoredMessage, 'seq'>[],
  prepared: RecallPrepared,
): Array<{ m: StoredMessage; vector: Float32Array; line: Tokens }> {
  const gone = new Set<object>(pruned)
  return saved
    .map((m, i) => ({ m, vector: prepared.vectors[i] as Float32Array, line: prepared.lines[i] as Tokens }))
    .filter((d) => !gone.has(d.m) && !isZeroVector(d.vector))
}
