/**
 * Answering a request before its body was read (413, 401, 429, …) so that the client sees the answer.
 *
 * Closing a socket with unread request bytes in its receive buffer makes the kernel send a TCP reset instead of a
 * FIN, and a client still writing its body then fails with EPIPE / ECONNRESET, often before it has read the answer
 * that was already sent: the official `openai` SDK reported every 413 for a 5 MB chat body as an APIConnectionError
 * (and retried it), plain fetch as EPIPE, curl now and then as an empty reply (issue 27). So the whole answer is
 * written at once (it carries its Content-Length, so the client can read it in full), the rest of the body is read
 * and thrown away, and only then is the response ended, which closes the connection (`Connection: close`): the
 * client has finished writing by then, and the close is a clean FIN.
 *
 * Bounded: after `maxBytes` discarded bytes or `timeout` the response is ended anyway and the connection closed (a
 * client sending more than that gets the reset: reading an unbounded upload to be polite is a resource leak).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Bytes, Ms } from '../types.js'

export interface DrainLimits {
  /** Most body bytes read and discarded after the answer; 0 closes at once (the reset may hide the answer). */
  maxBytes: Bytes
  /** Longest time spent discarding. */
  timeout: Ms
}

/**
 * End `res` (whose answer is already written, with `Connection: close`) once `req`'s body has been read to its end,
 * or at once when past the limits.
 */
export function endAfterDrain(req: IncomingMessage, res: ServerResponse, limits: DrainLimits): void {
  if (req.complete || req.readableEnded || req.destroyed || limits.maxBytes === 0) {
    res.end()
    return
  }
  let discarded = 0
  const finish = (): void => {
    cleanup()
    if (!res.writableEnded) res.end()
  }
  const onData = (chunk: Buffer): void => {
    discarded += chunk.length
    if (discarded > limits.maxBytes) {
      // Stop reading: the connection is closed once the answer is flushed, and what the client still sends is reset.
      req.pause()
      finish()
    }
  }
  const timer = setTimeout(() => {
    req.pause()
    finish()
  }, limits.timeout)
  // An idle keep-alive process must not be held open by a slow client's drain.
  timer.unref()
  function cleanup(): void {
    clearTimeout(timer)
    req.off('data', onData)
    req.off('end', finish)
    req.off('close', finish)
    req.off('error', finish)
  }
  req.on('data', onData)
  req.on('end', finish)
  // The client left (or node's request timeout cut it off): nothing is left to wait for.
  req.on('close', finish)
  req.on('error', finish)
  // A body reader that gave up may have paused the request; an explicit pause survives adding a 'data' listener.
  req.resume()
}
