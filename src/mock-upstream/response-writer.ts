/**
 * How the mock's bytes leave: whole or in pieces (so a client's parser meets every split), with backpressure, and the
 * deliberate drop of a connection after a partial response.
 */
import type { ServerResponse } from 'node:http'
import { once } from 'node:events'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { Rng } from './prng.js'
import type { MockBehaviour } from './types.js'

/** Write respecting backpressure, in pieces when asked; rejects with an AbortError once the client has left. */
export async function write(res: ServerResponse, text: string, b: MockBehaviour, rng: Rng, signal: AbortSignal) {
  signal.throwIfAborted()
  const mode = b.splitWrites ?? 'none'
  if (mode === 'none') {
    if (!res.write(text)) await once(res, 'drain', { signal })
    return
  }
  const bytes = Buffer.from(text)
  for (let i = 0; i < bytes.length; ) {
    const n = mode === 'bytes' ? 1 : 1 + Math.floor(rng() * 8)
    res.write(bytes.subarray(i, i + n))
    i += n
    // Yielding lets each piece leave as its own write (noDelay is set), so the client sees them separately.
    await nextTurn(undefined, { signal })
  }
}

/** Cut the connection once what was written has left, so the client sees a partial response, then the drop. */
export async function dropAfterFlush(res: ServerResponse, signal: AbortSignal): Promise<void> {
  // node:http corks the socket around a response's first write and uncorks on the next tick.
  await nextTurn(undefined, { signal })
  const socket = res.socket
  if (socket && socket.writableLength > 0) await once(socket, 'drain', { signal })
  socket?.destroy()
}
