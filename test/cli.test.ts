/** The `recallgate` dispatcher's answers to a wrong call: what is wrong, and the help of the command that was called. */
import t from 'tap'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { main } from '../src/cli/main.js'
import { capturedIo } from './helpers/captured-io.js'

t.test('serve --help prints the serve help and does not start the server', async (t) => {
  const io = capturedIo()
  t.equal(await main(['serve', '--help'], io), 0)
  t.match(io.out(), /Usage: recallgate serve/)
})

t.test('serve --port is refused, saying PORT is where the port is set', async (t) => {
  const io = capturedIo()
  t.equal(await main(['serve', '--port', '9999'], io), 2)
  t.match(io.err(), /--port/)
  t.match(io.err(), /PORT=9999/)
  t.match(io.err(), /Usage: recallgate serve/)
})

t.test('keys create --plan gold says what is wrong, with the keys help', async (t) => {
  const io = capturedIo({ DATA_DIR: mkdtempSync(join(tmpdir(), 'recallgate-cli-')) })
  t.equal(await main(['keys', 'create', '--plan', 'gold'], io), 2)
  t.match(io.err(), /--plan must be one of free, pro, premium, enterprise, unlimited/)
  t.match(io.err(), /Usage: recallgate keys create/)
  t.notMatch(io.err(), /Run `recallgate <command> --help`/, 'not the general usage')
})
