/** The `recallgate` dispatcher's answers to a wrong call: what is wrong, and the help of the command that was called. */
import t from 'tap'
import { mkdtempSync, readFileSync } from 'node:fs'
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

t.test('--version prints the package version', async (t) => {
  const io = capturedIo()
  t.equal(await main(['--version'], io), 0)
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
  t.equal(io.out(), `recallgate ${pkg.version}\n`)
})

t.test('sessions --help and keys list --help print their own help', async (t) => {
  const sessions = capturedIo()
  t.equal(await main(['sessions', '--help'], sessions), 0)
  t.match(sessions.out(), /Usage: recallgate sessions export <id>/)
  const list = capturedIo()
  t.equal(await main(['keys', 'list', '--help'], list), 0)
  t.match(list.out(), /^Usage: recallgate keys list \[--json\]/)
  t.match(list.out(), /--json .*unix\s+seconds/s)
  const wrong = capturedIo()
  t.equal(await main(['sessions', 'import'], wrong), 2)
  t.match(wrong.err(), /unknown sessions subcommand "import"/)
})

t.test('serve --port 18081 says in one sentence where the port is set', async (t) => {
  for (const argv of [['--port', '18081'], ['--port=18081']]) {
    const io = capturedIo()
    t.equal(await main(['serve', ...argv], io), 2)
    t.match(io.err(), /^error: serve has no --port option: the gateway is configured by environment variables, e\.g\. PORT=18081 recallgate serve\n/)
    t.notMatch(io.err(), /positional/, "not util.parseArgs's advice about positionals")
  }
})
