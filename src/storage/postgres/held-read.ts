/**
 * One pooled connection kept checked out for the hottest read there is: the namespace version every search reads
 * before it may answer (index-records.ts `meta`, search-index.ts). On it a read is one pre-encoded Bind/Execute/Sync
 * written to the socket and the one text value of its row taken from the DataRow, through pg's `Submittable`
 * interface (what pg-cursor is built on), instead of a pool checkout, a Query, a Describe and its RowDescription, a
 * Result with its type parsers and a release.
 *
 * Why: between two rankings, which evict it from the caches, that per-query machinery ran cold and cost the replica
 * four to eight times its 27–46 µs of CPU in a tight loop (13–15 µs this way). Gateway CPU per search against LMDB's
 * in the same round (interleaved A/B, 30 rounds × 100 searches, load 6–7; docs/scaling.md, fourth round): replica A
 * 1.32× → 1.09×, replica B 1.33× → 1.11×; a build with no read at all (no read-your-writes) was at LMDB's.
 *
 * The read is the same statement on the same server, sent after the caller began, so it sees every commit the pool's
 * would (read committed: a statement sees what committed before it started). When the held connection is busy with
 * another read, still connecting, or not held at all (a pool of one), `read` returns undefined and the caller reads
 * through the pool as before, so concurrent searches never queue behind one connection.
 */
import pg from 'pg'
import type { Prepared } from './pool.js'

/** What pg hands a Submittable's handlers (pg-protocol's messages, untyped in @types/pg). */
interface DataRow {
  fields: Array<string | null>
}

/**
 * Parse (the first time on a connection), Bind with one text parameter, Execute, Sync: one write, no Describe (the
 * caller knows the row's one column is text), so the server sends BindComplete, a DataRow at most, CommandComplete
 * and ReadyForQuery.
 */
function encodeRead(statement: Prepared, param: string, parse: boolean): Buffer {
  // Its own name: the connection may have run the pool's named statement before it was held (pg tracks that one).
  const held = `${statement.name}_held`
  const name = Buffer.byteLength(held)
  const text = parse ? Buffer.byteLength(statement.text) : 0
  const value = Buffer.byteLength(param)
  // Each message: a type byte, then an Int32 length that counts itself but not the type.
  const parseLen = 4 + name + 1 + text + 1 + 2
  const bindLen = 4 + 1 + name + 1 + 2 + 2 + 4 + value + 2
  const b = Buffer.allocUnsafe((parse ? 1 + parseLen : 0) + 1 + bindLen + 10 + 5)
  let o = 0
  if (parse) {
    o = b.writeUInt8(0x50, o) // 'P'
    o = b.writeInt32BE(parseLen, o)
    o += b.write(held, o)
    o = b.writeUInt8(0, o)
    o += b.write(statement.text, o)
    o = b.writeUInt8(0, o)
    o = b.writeInt16BE(0, o) // parameter types: the server infers them
  }
  o = b.writeUInt8(0x42, o) // 'B'
  o = b.writeInt32BE(bindLen, o)
  o = b.writeUInt8(0, o) // the unnamed portal
  o += b.write(held, o)
  o = b.writeUInt8(0, o)
  o = b.writeInt16BE(0, o) // parameter formats: all text
  o = b.writeInt16BE(1, o)
  o = b.writeInt32BE(value, o)
  o += b.write(param, o)
  o = b.writeInt16BE(0, o) // result formats: all text
  o = b.writeUInt8(0x45, o) // 'E'
  o = b.writeInt32BE(9, o)
  o = b.writeUInt8(0, o)
  o = b.writeInt32BE(0, o) // every row
  o = b.writeUInt8(0x53, o) // 'S'
  b.writeInt32BE(4, o)
  return b
}

/**
 * A read as pg's client runs a custom query: `submit` when the connection is ready, the backend's messages to the
 * handlers, and `callback` (which the client wraps with its `query_timeout`) once, at ReadyForQuery or on an error.
 */
class TextRead implements pg.Submittable {
  callback: (err: Error | null, value?: string | null) => void
  readonly #message: Buffer
  /** Undefined until a DataRow comes: no row. */
  #value: string | null | undefined
  #done = false

  constructor(message: Buffer, callback: (err: Error | null, value?: string | null) => void) {
    this.#message = message
    this.callback = callback
  }

  submit(connection: pg.Connection): void {
    // The stream pg's own Query corks and writes through; one buffer needs no cork.
    connection.stream.write(this.#message)
  }

  handleDataRow(msg: DataRow): void {
    this.#value = msg.fields[0] ?? null
  }

  handleReadyForQuery(): void {
    this.#finish(null, this.#value)
  }

  handleError(err: Error): void {
    this.#finish(err)
  }

  // Messages this read does not ask for or take nothing from; pg calls whichever the backend sends.
  handleRowDescription(): void {}
  handleCommandComplete(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyInResponse(): void {}
  handleCopyData(): void {}

  #finish(err: Error | null, value?: string | null): void {
    // pg may report an error after another (a timeout, then the connection's end): the caller hears the first.
    if (this.#done) return
    this.#done = true
    this.callback(err, value)
  }
}

export class HeldRead {
  readonly #pool: pg.Pool
  /** Whether holding a connection is allowed at all: not with a pool of one, which everything else needs. */
  readonly #enabled: boolean
  #client: pg.PoolClient | undefined
  /** Statement names parsed on `#client`. */
  #parsed = new Set<string>()
  #connecting = false
  #busy = false
  #closed = false

  constructor(pool: pg.Pool, poolSize: number) {
    this.#pool = pool
    this.#enabled = poolSize >= 2
  }

  /**
   * The text of the first column of the first row `statement` returns for `param` (null for SQL NULL, undefined for
   * no row), read on the held connection; or undefined at once when that connection is not free now, for the caller
   * to read through the pool. Rejects with pg's error (the caller classifies it).
   */
  read(statement: Prepared, param: string): Promise<string | null | undefined> | undefined {
    const client = this.#client
    if (client === undefined || this.#busy) {
      if (client === undefined) this.#hold()
      return undefined
    }
    this.#busy = true
    const parse = !this.#parsed.has(statement.name)
    if (parse) this.#parsed.add(statement.name)
    return new Promise((resolve, reject) => {
      const done = (err: Error | null, value?: string | null): void => {
        // A read on a connection already let go is not the held one's.
        if (this.#client === client) this.#busy = false
        if (err === null) {
          resolve(value)
          return
        }
        // Any failure lets the connection go (given back to the pool as broken) and another is held on the next
        // read: after the client's read timeout or a dropped socket it may be mid-reply, and after an ErrorResponse
        // this read cannot tell whether its Parse was what failed (pg reports ParseComplete only to a named query).
        // Failures are rare; a fresh connection is the one state known to be right.
        this.#drop(client, err)
        reject(err)
      }
      client.query(new TextRead(encodeRead(statement, param, parse), done))
    })
  }

  /** Give the held connection back (before the pool ends). */
  close(): void {
    this.#closed = true
    const client = this.#client
    if (client !== undefined) this.#release(client)
  }

  #hold(): void {
    if (!this.#enabled || this.#connecting || this.#closed) return
    this.#connecting = true
    this.#pool.connect().then(
      (client) => {
        this.#connecting = false
        if (this.#closed) {
          client.release()
          return
        }
        // A held connection that drops emits 'error' on its client (pg-pool listens only on idle ones): unheard,
        // an uncaught exception. The read in flight fails by itself; this lets the connection go.
        client.on('error', this.#onError)
        client.on('end', this.#onEnd)
        this.#client = client
        this.#parsed = new Set()
      },
      () => {
        // Not reachable now: reads go through the pool (which reports it), and the next one tries again.
        this.#connecting = false
      },
    )
  }

  readonly #onError = (err: Error): void => {
    if (this.#client !== undefined) this.#drop(this.#client, err)
  }

  readonly #onEnd = (): void => {
    if (this.#client !== undefined) this.#drop(this.#client, new Error('Connection ended'))
  }

  #drop(client: pg.PoolClient, err: Error): void {
    if (this.#client !== client) return
    this.#release(client, err)
  }

  #release(client: pg.PoolClient, err?: Error): void {
    this.#client = undefined
    this.#busy = false
    client.off('error', this.#onError)
    client.off('end', this.#onEnd)
    // The pool listens for errors again on what it gets back; one released as broken is ended and forgotten.
    client.release(err)
  }
}
