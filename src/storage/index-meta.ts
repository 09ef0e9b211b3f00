/**
 * How a namespace's meta moves with each committed change, the same for every engine (file-repo.ts in LMDB,
 * postgres/index-records.ts): the version is bumped by every change, labels are allocated from `nextLabel` and never
 * reused, and the epoch is drawn when the namespace is created. And how a vector is kept: its float32 bytes.
 */
import { randomBytes } from 'node:crypto'
import type { IndexMeta } from './interface.js'

/** The meta after adding `adding` vectors of `dimension` from `embedderId`; their labels are `nextLabel` of `before` on. */
export function metaAfterAdd(before: IndexMeta | undefined, adding: number, dimension: number, embedderId: string): IndexMeta {
  // An emptied namespace takes the embedder of whatever is added next.
  const reuse = before !== undefined && before.count > 0
  const first = before?.nextLabel ?? 0
  const meta: IndexMeta = {
    embedderId: reuse ? before.embedderId : embedderId,
    dimension: reuse ? before.dimension : dimension,
    version: (before?.version ?? 0) + 1,
    count: (before?.count ?? 0) + adding,
    nextLabel: first + adding,
  }
  // Namespaces written before epochs existed keep having none (their loaded indexes compare it).
  const epoch = before === undefined ? newEpoch() : before.epoch
  if (epoch !== undefined) meta.epoch = epoch
  return meta
}

/** A namespace's epoch, drawn when it is created. */
export function newEpoch(): string {
  return randomBytes(6).toString('hex')
}

/**
 * Whether adding vectors of `dimension` from `embedderId` must start the namespace over: its live vectors came from
 * another embedder and cannot be searched together with them.
 */
export function startsOver(before: IndexMeta | undefined, embedderId: string, dimension: number): boolean {
  return before !== undefined && before.count > 0 && (before.embedderId !== embedderId || before.dimension !== dimension)
}

/** The meta after removing `removed` labels. */
export function metaAfterRemove(before: IndexMeta | undefined, removed: number): IndexMeta {
  return {
    embedderId: before?.embedderId ?? '',
    dimension: before?.dimension ?? 0,
    version: (before?.version ?? 0) + 1,
    count: Math.max(0, (before?.count ?? 0) - removed),
    // Labels are never reused: a label in a stale graph file can never name a newer document.
    nextLabel: before?.nextLabel ?? 0,
    ...(before?.epoch !== undefined ? { epoch: before.epoch } : {}),
  }
}

export function encodeVector(v: Float32Array): Buffer {
  return Buffer.from(v.buffer, v.byteOffset, v.byteLength)
}

/** Copy out of the engine's buffer (LMDB may reuse it, and neither promises 4-byte alignment). */
export function decodeVector(bytes: Uint8Array): Float32Array {
  const copy = new Uint8Array(bytes.byteLength)
  copy.set(bytes)
  return new Float32Array(copy.buffer)
}
