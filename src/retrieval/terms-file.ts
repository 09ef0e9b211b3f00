/**
 * A namespace's BM25 documents as a file beside its graph (`<graph>.terms`): each live document's label, ref and
 * analyzed terms (ids into the file's vocabulary). Like the graph it is a cache of the store: loading a namespace
 * reads it instead of reading every chunk's text from the store and analyzing it again, which was ≈ 80 % of a load
 * (a 100k-chunk tenant: 6.5 of 8.1 s of CPU, 4.4 s of it the analyzer; docs/benchmarks.md). It is used only when its
 * header names the namespace state being loaded (version, epoch, live documents) and the analysis in use (an upgrade
 * that analyzes differently does not read terms made the old way); anything else (missing, stale, short, unreadable)
 * and the caller reads the store as before.
 *
 * Layout: "RGT1", the header's byte length (uint32 LE), the header (JSON), the vocabulary (terms joined by NUL: terms
 * are letters and digits), the refs' distinct strings (JSON), zero padding to 8 bytes, then labels (float64), the
 * refs' parts (float64), each document's end in the codes (uint32), the codes (uint32), each ref's length (uint8) and
 * its parts' kinds (uint8), little-endian as the typed arrays are on every platform Node runs on here. The vocabulary
 * is not checked for repeats here: a fresh index hands out ids in order, and the load stops at the first term that
 * does not get its own (search-index.ts).
 * Written to a temporary name and renamed into place, so a reader never sees half a file.
 */
import { open, readFile, rename, rm } from 'node:fs/promises'
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
  /** The analysis that made the terms (analyzer.ts ANALYZER_ID, and whether they are folded). */
  analyzer: string
}

interface Header extends TermsState {
  vocabBytes: number
  /** The refs' distinct strings, as JSON (few: a tenant's file ids). */
  stringsBytes: number
  /** All refs' elements together. */
  refParts: number
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

/**
 * Refs as numbers: each ref's length, then each element as a number (a string's is its index in `strings`, told apart
 * by `kinds`). JSON for 100k refs took longer to parse than the rest of a file together.
 */
function encodeRefs(refs: readonly DocRef[]): { lens: Uint8Array; kinds: Uint8Array; values: Float64Array; strings: string[] } {
  let parts = 0
  for (const r of refs) parts += r.length
  const lens = new Uint8Array(refs.length)
  const kinds = new Uint8Array(parts)
  const values = new Float64Array(parts)
  const strings: string[] = []
  const index = new Map<string, number>()
  let p = 0
  for (let i = 0; i < refs.length; i++) {
    const r = refs[i] as DocRef
    if (r.length > 255) throw new RangeError('a ref of more than 255 parts')
    lens[i] = r.length
    for (const v of r) {
      if (typeof v === 'number') values[p++] = v
      else {
        let at = index.get(v)
        if (at === undefined) index.set(v, (at = strings.push(v) - 1))
        kinds[p] = 1
        values[p++] = at
      }
    }
  }
  return { lens, kinds, values, strings }
}

const bytesOf = (a: Float64Array | Uint32Array | Uint8Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength)

/** The file's bytes for `snap` in `state`, in pieces (written with one writev: the arrays are not copied again). */
export function encodeTermsParts(state: TermsState, snap: TermsSnapshot): Buffer[] {
  const vocab = Buffer.from(snap.vocab.join('\u0000'))
  const refs = encodeRefs(snap.refs)
  const strings = Buffer.from(JSON.stringify(refs.strings))
  const header = Buffer.from(
    JSON.stringify({
      version: state.version,
      epoch: state.epoch ?? null,
      count: state.count,
      analyzer: state.analyzer,
      vocabBytes: vocab.length,
      stringsBytes: strings.length,
      refParts: refs.values.length,
      codes: snap.codes.length,
    } satisfies Omit<Header, 'epoch'> & { epoch: string | null }),
  )
  const head = Buffer.alloc(8)
  head.write(MAGIC, 0, 'latin1')
  head.writeUInt32LE(header.length, 4)
  const text = 8 + header.length + vocab.length + strings.length
  // Then the 8-byte arrays first, each typed array at an offset its element size divides.
  return [
    head,
    header,
    vocab,
    strings,
    Buffer.alloc(align8(text) - text),
    bytesOf(snap.labels),
    bytesOf(refs.values),
    bytesOf(snap.ends),
    bytesOf(snap.codes),
    bytesOf(refs.lens),
    bytesOf(refs.kinds),
  ]
}

/** The file's bytes for `snap` in `state`. */
export function encodeTerms(state: TermsState, snap: TermsSnapshot): Buffer {
  return Buffer.concat(encodeTermsParts(state, snap))
}

/**
 * A file read back: document i's label, codes and (made when asked) ref. What is checked per document (codes within
 * the vocabulary, a ref's strings present) is left to the load, which walks the documents in slices anyway.
 */
export interface TermsRead {
  vocab: readonly string[]
  labels: Float64Array
  ends: Uint32Array
  codes: Uint32Array
  /** Document i's ref, or undefined when the file does not hold one. */
  ref(i: number): DocRef | undefined
}

/** `bytes` read back, if they are a whole file of `expect`'s state; else undefined. */
export function decodeTerms(bytes: Buffer, expect: TermsState): TermsRead | undefined {
  if (bytes.length < 8 || bytes.toString('latin1', 0, 4) !== MAGIC) return undefined
  const headerBytes = bytes.readUInt32LE(4)
  let header: Header
  let strings: unknown
  try {
    header = JSON.parse(bytes.toString('utf8', 8, 8 + headerBytes)) as Header
    if (
      header.version !== expect.version ||
      (header.epoch ?? undefined) !== expect.epoch ||
      header.count !== expect.count ||
      header.analyzer !== expect.analyzer
    )
      return undefined
    strings = JSON.parse(bytes.toString('utf8', 8 + headerBytes + header.vocabBytes, 8 + headerBytes + header.vocabBytes + header.stringsBytes))
  } catch {
    return undefined
  }
  if (!Array.isArray(strings)) return undefined
  const docs = header.count
  const vocabAt = 8 + headerBytes
  const start = align8(vocabAt + header.vocabBytes + header.stringsBytes)
  if (bytes.length !== start + docs * 12 + header.refParts * 8 + header.codes * 4 + docs + header.refParts) return undefined
  // Views on the file's own memory when it is 8-byte aligned (readFile's buffer of a file this size is), else on a copy.
  const mem = bytes.byteOffset % 8 === 0 ? bytes : new Uint8Array(bytes)
  let o = mem.byteOffset + start
  const take = <T>(Typed: { new (b: ArrayBufferLike, at: number, n: number): T; BYTES_PER_ELEMENT: number }, n: number): T => {
    const view = new Typed(mem.buffer, o, n)
    o += n * Typed.BYTES_PER_ELEMENT
    return view
  }
  const labels = take(Float64Array, docs)
  const values = take(Float64Array, header.refParts)
  const ends = take(Uint32Array, docs)
  const codes = take(Uint32Array, header.codes)
  const lens = take(Uint8Array, docs)
  const kinds = take(Uint8Array, header.refParts)
  const vocabText = bytes.toString('utf8', vocabAt, vocabAt + header.vocabBytes)
  const vocab = vocabText === '' ? [] : vocabText.split('\u0000')
  if (docs > 0 && ends[docs - 1] !== codes.length) return undefined
  let parts = 0
  for (let i = 0; i < docs; i++) parts += lens[i] as number
  if (parts !== header.refParts) return undefined
  // Where each document's ref starts in `values`: refs are made one at a time as the load reaches them (`ref`).
  const refStart = new Uint32Array(docs)
  for (let i = 1; i < docs; i++) refStart[i] = (refStart[i - 1] as number) + (lens[i - 1] as number)
  const names = strings
  return {
    vocab,
    labels,
    ends,
    codes,
    ref: (i) => {
      const r: Array<string | number> = new Array<string | number>(lens[i] as number)
      for (let j = 0, p = refStart[i] as number; j < r.length; j++, p++) {
        const v = values[p] as number
        if (kinds[p] === 0) r[j] = v
        else if (typeof names[v] === 'string') r[j] = names[v] as string
        else return undefined
      }
      return r
    },
  }
}

/** Write `snap` atomically (a temporary name per process, then rename). */
export async function saveTerms(file: string, state: TermsState, snap: TermsSnapshot): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`
  try {
    const out = await open(tmp, 'w')
    try {
      // writev may write less than asked: the rest goes in further calls.
      let parts = encodeTermsParts(state, snap).filter((b) => b.length > 0)
      while (parts.length > 0) {
        let { bytesWritten } = await out.writev(parts)
        const rest: Buffer[] = []
        for (const b of parts) {
          if (bytesWritten >= b.length) bytesWritten -= b.length
          else {
            rest.push(b.subarray(bytesWritten))
            bytesWritten = 0
          }
        }
        parts = rest
      }
    } finally {
      await out.close()
    }
    await rename(tmp, file)
  } finally {
    await rm(tmp, { force: true })
  }
}

/** The file's documents if it holds `expect`'s state; undefined when missing, stale or unreadable. */
export async function loadTerms(file: string, expect: TermsState): Promise<TermsRead | undefined> {
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
