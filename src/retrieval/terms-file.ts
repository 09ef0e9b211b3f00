/**
 * A namespace's BM25 documents as a file beside its graph (`<graph>.terms`): each live document's label, ref and
 * analyzed terms (ids into the file's vocabulary). Like the graph it is a cache of the store: loading a namespace
 * reads it instead of reading every chunk's text from the store and analyzing it again, which was ≈ 80 % of a load
 * (a 100k-chunk tenant: 6.5 of 8.1 s of CPU, 4.4 s of it the analyzer; docs/benchmarks.md). It is used only when its
 * header names the namespace state being loaded (version, epoch, live documents); anything else (missing, stale,
 * short, unreadable) and the caller reads the store as before.
 *
 * Layout: "RGT1", the header's byte length (uint32 LE), the header (JSON), the vocabulary (terms joined by NUL: terms
 * are letters and digits), the refs (JSON), zero padding to 8 bytes, then labels (float64), each document's end in
 * the codes (uint32) and the codes (uint32), little-endian as the typed arrays are on every platform Node runs on here.
 * Written to a temporary name and renamed into place, so a reader never sees half a file.
 */
import { readFile, rename, rm, writeFile } from 'node:fs/promises'
import { rmSync } from 'node:fs'

/** A document's reference (search-index.ts DocRef). */
type DocRef = ReadonlyArray<string | number>

const MAGIC = 'RGT1'

/** The namespace state a file holds. */
export interface TermsState {
  version: number
  epoch: string | undefined
  /** Live documents. */
  count: number
}

interface Header extends TermsState {
  vocabBytes: number
  refsBytes: number
  codes: number
}

/** What a file holds: document i has label `labels[i]`, ref `refs[i]` and codes `codes[ends[i - 1] ?? 0 .. ends[i]]`. */
export interface TermsSnapshot {
  /** Term by id. */
  vocab: readonly string[]
  labels: Float64Array
  refs: readonly DocRef[]
  ends: Uint32Array
  codes: Uint32Array
}

export function termsFile(graphFile: string): string {
  return `${graphFile}.terms`
}

const align8 = (n: number): number => (n + 7) & ~7

/** The file's bytes for `snap` in `state`. */
export function encodeTerms(state: TermsState, snap: TermsSnapshot): Buffer {
  const vocab = Buffer.from(snap.vocab.join('\u0000'))
  const refs = Buffer.from(JSON.stringify(snap.refs))
  const header = Buffer.from(
    JSON.stringify({ version: state.version, epoch: state.epoch ?? null, count: state.count, vocabBytes: vocab.length, refsBytes: refs.length, codes: snap.codes.length }),
  )
  const start = align8(8 + header.length + vocab.length + refs.length)
  const docs = snap.labels.length
  const out = Buffer.alloc(start + docs * 8 + docs * 4 + snap.codes.length * 4)
  out.write(MAGIC, 0, 'latin1')
  out.writeUInt32LE(header.length, 4)
  let o = 8
  o += header.copy(out, o)
  o += vocab.copy(out, o)
  refs.copy(out, o)
  o = start
  o += Buffer.from(snap.labels.buffer, snap.labels.byteOffset, docs * 8).copy(out, o)
  o += Buffer.from(snap.ends.buffer, snap.ends.byteOffset, docs * 4).copy(out, o)
  Buffer.from(snap.codes.buffer, snap.codes.byteOffset, snap.codes.length * 4).copy(out, o)
  return out
}

/** `bytes` read back, if they are a whole file of `expect`'s state; else undefined. */
export function decodeTerms(bytes: Buffer, expect: TermsState): TermsSnapshot | undefined {
  if (bytes.length < 8 || bytes.toString('latin1', 0, 4) !== MAGIC) return undefined
  const headerBytes = bytes.readUInt32LE(4)
  let header: Header
  try {
    header = JSON.parse(bytes.toString('utf8', 8, 8 + headerBytes)) as Header
  } catch {
    return undefined
  }
  if (header.version !== expect.version || (header.epoch ?? undefined) !== expect.epoch || header.count !== expect.count) return undefined
  const docs = header.count
  let o = 8 + headerBytes
  const vocabText = bytes.toString('utf8', o, o + header.vocabBytes)
  o += header.vocabBytes
  const refsText = bytes.toString('utf8', o, o + header.refsBytes)
  const start = align8(o + header.refsBytes)
  if (bytes.length !== start + docs * 12 + header.codes * 4) return undefined
  // Copied out: the file's buffer need not be aligned for the typed arrays, and the copies own their memory.
  const copy = (from: number, length: number): ArrayBuffer => bytes.buffer.slice(bytes.byteOffset + from, bytes.byteOffset + from + length) as ArrayBuffer
  const labels = new Float64Array(copy(start, docs * 8))
  const ends = new Uint32Array(copy(start + docs * 8, docs * 4))
  const codes = new Uint32Array(copy(start + docs * 12, header.codes * 4))
  let refs: DocRef[]
  try {
    refs = JSON.parse(refsText) as DocRef[]
  } catch {
    return undefined
  }
  const vocab = vocabText === '' ? [] : vocabText.split('\u0000')
  // Distinct, or the ids a fresh index hands out in order would not be the file's.
  if (new Set(vocab).size !== vocab.length) return undefined
  if (refs.length !== docs || (docs > 0 && ends[docs - 1] !== codes.length)) return undefined
  for (let i = 0; i < codes.length; i++) if ((codes[i] as number) >= vocab.length) return undefined
  return { vocab, labels, refs, ends, codes }
}

/** Write `snap` atomically (a temporary name per process, then rename). */
export async function saveTerms(file: string, state: TermsState, snap: TermsSnapshot): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`
  try {
    await writeFile(tmp, encodeTerms(state, snap))
    await rename(tmp, file)
  } finally {
    await rm(tmp, { force: true })
  }
}

/** The file's documents if it holds `expect`'s state; undefined when missing, stale or unreadable. */
export async function loadTerms(file: string, expect: TermsState): Promise<TermsSnapshot | undefined> {
  let bytes: Buffer
  try {
    bytes = await readFile(file)
  } catch {
    // Missing or unreadable: the caller reads the store, which is the source of truth.
    return undefined
  }
  return decodeTerms(bytes, expect)
}

export function removeTerms(file: string): void {
  rmSync(file, { force: true })
}
