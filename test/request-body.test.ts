/**
 * Reading a request's body (src/http/body.ts, and the multipart reader of src/routes/files.ts) on a real socket when
 * the client left before the reading began: while the request waited on its key or its route, its 'close' went by.
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import fc from 'fast-check'
import './helpers/fc-seed.js'
import { MAX_JSON_DEPTH, nestsDeeperThan, parseBoundedJson, readBody } from '../src/http/body.js'
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

/** The nesting check read byte by byte, as it was before it jumped over strings: the reference it must agree with. */
function nestsDeeperByByte(raw: Buffer, max: number): boolean {
  let depth = 0
  let inString = false
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]
    if (inString) {
      if (c === 0x5c) i++
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return false
}

t.test('the nesting bound skips strings (escaped quotes and backslashes included) and counts everything else', async (t) => {
  // Texts made of the bytes that matter (quotes, backslashes, brackets) and some that do not, in any order.
  const piece = fc.constantFrom('"', '\\', '[', ']', '{', '}', 'a', ',', ':', 'é')
  fc.assert(
    fc.property(fc.array(piece, { maxLength: 60 }), fc.integer({ min: 0, max: 6 }), (pieces, max) => {
      const raw = Buffer.from(pieces.join(''))
      return nestsDeeperThan(raw, max) === nestsDeeperByByte(raw, max)
    }),
    { numRuns: 5000 },
  )
  const deep = (n: number, inside = ''): Buffer => Buffer.from(`${'['.repeat(n)}${inside}${']'.repeat(n)}`)
  t.equal(nestsDeeperThan(deep(MAX_JSON_DEPTH), MAX_JSON_DEPTH), false, 'at the bound')
  t.equal(nestsDeeperThan(deep(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH), true, 'one past it')
  // Brackets inside strings, and quotes escaped inside them, are text.
  t.equal(nestsDeeperThan(Buffer.from(`{"a":"${'['.repeat(500)}\\\"${'{'.repeat(500)}"}`), 4), false)
  t.equal(nestsDeeperThan(Buffer.from(`{"a":"x\\\\"${'['.repeat(10)}}`), 4), true, 'an escaped backslash ends no string early')
  t.throws(() => parseBoundedJson(deep(MAX_JSON_DEPTH + 1, '"]"'), (m) => new Error(m)), /nested deeper than/)
})
