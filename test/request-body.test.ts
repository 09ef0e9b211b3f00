/**
 * Reading a request's body (src/http/body.ts, and the multipart reader of src/routes/files.ts) on a real socket when
 * the client left before the reading began: while the request waited on its key or its route, its 'close' went by.
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { readBody } from '../src/http/body.js'
import { readMultipart } from '../src/routes/files.js'

/** A request whose client sent half its body and left; resolved once the server has seen it close. */
async function abandoned(t: Test, contentType: string): Promise<IncomingMessage> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => server.close())
  const arrived = once(server, 'request') as Promise<[IncomingMessage]>
  const s = connect((server.address() as AddressInfo).port, '127.0.0.1')
  await once(s, 'connect')
  s.write(`POST / HTTP/1.1\r\nHost: x\r\nContent-Type: ${contentType}\r\nContent-Length: 1000\r\n\r\nhalf a bo`)
  const [req] = await arrived
  // The server's own listeners (the request's ClientGone) take the connection's reset.
  req.on('error', () => undefined)
  s.destroy()
  await new Promise((resolve) => req.once('close', resolve))
  return req
}

t.test('a body whose client already left is refused at once (client_closed_request), not waited for', async (t) => {
  const json = await abandoned(t, 'application/json')
  await t.rejects(readBody(json, 10_000), { code: 'client_closed_request' })
  const form = await abandoned(t, 'multipart/form-data; boundary=XB')
  await t.rejects(readMultipart(form, 10_000, 20_000), { code: 'client_closed_request' })
})
