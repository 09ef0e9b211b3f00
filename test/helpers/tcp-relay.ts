/**
 * A TCP relay to a server (PostgreSQL in the tests) that can be cut, every connection reset and new ones refused, and
 * restored on the same port: what a database going away and coming back looks like to the gateway.
 */
import { once } from 'node:events'
import { connect, createServer, type Server, type Socket } from 'node:net'

export async function cuttableRelay(target: URL): Promise<{ url: string; cut(): Promise<void>; restore(): Promise<void>; close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  let server: Server | undefined
  let port = 0
  const listen = async (): Promise<void> => {
    const s = createServer((inbound) => {
      const outbound = connect(Number(target.port), target.hostname)
      for (const sock of [inbound, outbound]) {
        sockets.add(sock)
        sock.on('close', () => sockets.delete(sock))
        // A reset on one side ends the other: what a database going away looks like to the gateway.
        sock.on('error', () => {
          inbound.destroy()
          outbound.destroy()
        })
      }
      inbound.pipe(outbound).pipe(inbound)
    })
    s.listen(port, '127.0.0.1')
    await once(s, 'listening')
    port = (s.address() as { port: number }).port
    server = s
  }
  const cut = async (): Promise<void> => {
    const s = server
    server = undefined
    for (const sock of sockets) sock.destroy()
    if (s !== undefined) await new Promise((r) => s.close(r))
  }
  await listen()
  const u = new URL(target.toString())
  u.port = String(port)
  return { url: u.toString(), cut, restore: listen, close: cut }
}
