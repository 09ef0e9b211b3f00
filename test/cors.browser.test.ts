/**
 * CORS_ORIGINS in a real browser (Debian's chromium, playwright-core): a page served from another origin calls the
 * gateway with fetch, as a browser app would (its preflight, then the request), and reads the answer, the request id
 * and an error's body; without the setting the browser refuses the same call.
 */
import { existsSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { chromium, type Browser } from 'playwright-core'
import t from 'tap'
import { KEY_A, PROVIDER_KEY, startHarness } from './helpers/harness.js'
import { skipUnless } from './helpers/services.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

interface Outcome {
  ok: boolean
  status?: number
  requestId?: string | null
  text?: string
  error?: string
}

t.test('a page on an allowed origin calls the API from chromium', { skip: skipUnless(existsSync(CHROMIUM), `no browser at ${CHROMIUM} (.ci/run installs Debian's chromium)`) }, async (t) => {
  // The app's own origin: another port on loopback is another origin.
  const app = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title>'))
  await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => app.close(() => resolve())))
  const appOrigin = `http://127.0.0.1:${(app.address() as AddressInfo).port}`

  const browser: Browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  t.teardown(() => browser.close())
  const page = await (await browser.newContext()).newPage()
  await page.goto(appOrigin)

  const call = (gateway: string, key: string | null): Promise<Outcome> =>
    page.evaluate(
      async ({ gateway, key, provider }) => {
        try {
          const r = await fetch(`${gateway}/api/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${provider}`, ...(key === null ? {} : { serviceKey: key }) },
            body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Hello from the page' }] }),
          })
          return { ok: true, status: r.status, requestId: r.headers.get('x-request-id'), text: await r.text() }
        } catch (err) {
          return { ok: false, error: String(err) }
        }
      },
      { gateway, key, provider: PROVIDER_KEY },
    )

  await t.test('allowed: the reply, its request id, and an error the page can read', async (t) => {
    const h = await startHarness(t, { env: { CORS_ORIGINS: appOrigin } })
    const r = await call(h.gw.url, KEY_A)
    t.equal(r.ok, true, r.error ?? '')
    t.equal(r.status, 200)
    t.match(r.requestId, /^req_/, 'an exposed header is readable')
    t.match(JSON.parse(r.text ?? '{}'), { object: 'chat.completion', choices: [{ message: { content: /Hello from the page/ } }] })
    const refused = await call(h.gw.url, null)
    t.equal(refused.status, 401)
    t.match(JSON.parse(refused.text ?? '{}'), { error: { code: 'missing_service_key' } }, 'the error body, not an opaque failure')
  })

  await t.test('not allowed: the browser refuses the call', async (t) => {
    const h = await startHarness(t)
    const r = await call(h.gw.url, KEY_A)
    t.equal(r.ok, false)
    t.match(r.error, /Failed to fetch/)
  })
})
