/**
 * Pulls an upstream body's chunks one `await` at a time, as `for await` does (same `read()`s, same end and error
 * semantics, a close before the end is an ERR_STREAM_PREMATURE_CLOSE), but can be let go of before the end.
 *
 * Why not `for await`: leaving that loop early destroys a stream that has not emitted 'end' yet with a new AbortError,
 * whose stack node then formats. A relayed stream is left early on every success, at `[DONE]`, a few microseconds before
 * its 'end' (which came in the same packet): profiled on the plain relay (bench/relay.ts, serial streams), that error
 * was 6 % of the gateway's time per stream. Waiting for 'end' inside the loop instead costs a second write per stream
 * (the events and `[DONE]` no longer leave together). `release()` lets go without either.
 */
import type { Readable } from 'node:stream'

export class ChunkReader {
  readonly #body: Readable
  #wake: (() => void) | undefined
  #error: Error | undefined
  #ended = false

  constructor(body: Readable) {
    this.#body = body
    body.on('readable', this.#notify)
    body.once('end', () => {
      this.#ended = true
      this.#notify()
    })
    // Stays attached after release(): a late error (the destroy below) must not go unhandled.
    body.on('error', (err: Error) => {
      this.#error ??= err
      this.#notify()
    })
    body.once('close', () => {
      if (!this.#ended && this.#error === undefined) {
        this.#error = Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })
      }
      this.#notify()
    })
  }

  /** The next chunk (whatever is buffered, as `read()` gives it); null at the end. Throws the stream's error. */
  async next(): Promise<Buffer | null> {
    for (;;) {
      const chunk = this.#body.destroyed ? null : (this.#body.read() as Buffer | null)
      if (chunk !== null) return chunk
      if (this.#error !== undefined) throw this.#error
      if (this.#ended) return null
      await new Promise<void>((resolve) => (this.#wake = resolve))
    }
  }

  /**
   * Done before the end was read. What is still buffered is read and dropped, which lets a body whose end has arrived
   * emit 'end' (and free its connection for reuse); one that has not ended by the next turn of the event loop is
   * destroyed, as leaving `for await` would have.
   */
  release(): void {
    if (this.#ended || this.#body.destroyed) return
    while (this.#body.read() !== null) {
      // Dropped: nothing after the point of release is used.
    }
    setImmediate(() => {
      if (!this.#ended) this.#body.destroy()
    })
  }

  readonly #notify = (): void => {
    const wake = this.#wake
    this.#wake = undefined
    wake?.()
  }
}
