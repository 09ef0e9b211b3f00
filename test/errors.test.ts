import t from 'tap'
import { readFileSync } from 'node:fs'
import { ERROR_CODES, asGatewayError, gatewayError, toWire } from '../src/errors.js'

t.test('every registry code is documented in the README with its status', async (t) => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
  for (const [code, def] of Object.entries(ERROR_CODES)) {
    t.match(readme, new RegExp(`\\| ${def.status} \\| \`${code}\` \\|`), `${code} (${def.status}) documented`)
  }
})

t.test('the wire shape is OpenAI’s and unknown errors leak nothing', async (t) => {
  t.same(toWire(gatewayError('invalid_parameter', { param: 'x', message: 'bad x' })), {
    error: { message: 'bad x', type: 'invalid_request_error', param: 'x', code: 'invalid_parameter' },
  })
  const internal = asGatewayError(new Error('secret internals at /srv/app.js:12'))
  t.equal(internal.status, 500)
  t.notMatch(JSON.stringify(toWire(internal)), /secret|app\.js/)
})
