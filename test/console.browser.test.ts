/**
 * The web console in a real browser (Debian's chromium driven by playwright-core, off the network): sign in, the
 * views a user reaches through their addresses, what they show of data made through the API, what the page does
 * through the API, and that user text stays text. With RECALLGATE_SCREENSHOTS=1 the same run writes a screenshot
 * of each view to docs/console/ (the README links them); otherwise they go to the test's own directory.
 */
import t from 'tap'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser, type Page } from 'playwright-core'
import { KEY_A, startHarness, type Harness } from './helpers/harness.js'
import { uploadJson } from './helpers/uploads.js'
import { skipUnless } from './helpers/services.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const XSS = '<img src=x onerror="window.__pwned=1">'

async function chat(h: Harness, body: Record<string, unknown>): Promise<string> {
  const r = await h.fetch('/api/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/gpt-4o', ...body }) })
  await r.text()
  return r.headers.get('x-request-id') ?? ''
}

async function signIn(page: Page, url: string, key: string): Promise<void> {
  await page.goto(`${url}/console`)
  await page.fill('#key', key)
  await page.click('#signin button[type=submit]')
}

t.test('the console in chromium', { skip: skipUnless(existsSync(CHROMIUM), `no browser at ${CHROMIUM} (.ci/run installs Debian's chromium)`) }, async (t) => {
  const h = await startHarness(t)
  const shots = process.env.RECALLGATE_SCREENSHOTS === '1' ? join(import.meta.dirname, '..', 'docs', 'console') : t.testdir()
  mkdirSync(shots, { recursive: true })
  const browser: Browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  t.teardown(() => browser.close())
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 } })
  const page = await context.newPage()
  const violations: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) violations.push(m.text())
  })
  page.on('dialog', (d) => void d.accept())

  await t.test('a wrong key shows an error, not a blank page', async (t) => {
    await signIn(page, h.gw.url, 'sk-not-a-real-key-000000')
    await page.waitForSelector('#signin-error:not(:empty)')
    t.match(await page.textContent('#signin-error'), /Sign-in failed: Invalid service key/)
    t.equal(await page.isVisible('#nav'), false)
  })

  const up = await uploadJson(h, { filename: 'zorbelt.txt', content: 'The walrus colony at Cape Zorbelt numbers 4,217 animals.' }, { provider: null })
  t.equal(up.status, 201)
  await chat(h, { messages: [{ role: 'user', content: XSS }], sessionId: 'hostile', useRAG: false })
  const requestId = await chat(h, {
    messages: [{ role: 'user', content: 'How many animals are in the walrus colony at Cape Zorbelt?' }],
    sessionId: 'walrus-talk',
  })

  await t.test('sign in; the overview and a session made through the API, its transcript as text', async (t) => {
    await signIn(page, h.gw.url, KEY_A)
    await page.waitForSelector('.charts')
    t.match(await page.textContent('.charts'), /Requests\s*2/)
    await page.screenshot({ path: join(shots, 'overview.png') })
    t.equal(await page.evaluate(() => (globalThis as unknown as { sessionStorage: { getItem(k: string): string | null } }).sessionStorage.getItem('recallgate.serviceKey')), KEY_A, 'the key is kept in sessionStorage')
    t.notOk(page.url().includes(KEY_A), 'and never in the address')

    await page.goto(`${h.gw.url}/console#/sessions`)
    await page.waitForSelector('text=walrus-talk')
    t.ok(await page.isVisible('text=hostile'))
    await page.screenshot({ path: join(shots, 'sessions.png') })
    await page.click('text=hostile')
    await page.waitForSelector('.msg pre')
    t.equal(await page.textContent('.msg pre'), XSS, 'the message shows its characters')
    t.equal(await page.locator('#view img').count(), 0, 'no element was made from it')
    t.equal(await page.evaluate(() => (globalThis as unknown as { __pwned?: number }).__pwned), undefined, 'and nothing ran')
  })

  await t.test('a request with a session and a file: its excerpt, the file name and token counts', async (t) => {
    await page.goto(`${h.gw.url}/console#/requests`)
    await page.waitForSelector('#view table a')
    await page.screenshot({ path: join(shots, 'requests.png') })
    await page.goto(`${h.gw.url}/console#/requests/${requestId}`)
    await page.waitForSelector('.part-excerpts')
    const excerpt = await page.textContent('.part-excerpts')
    t.match(excerpt, /zorbelt\.txt/, 'the file the excerpt came from')
    t.match(excerpt, /4,217/, 'the excerpt as sent')
    t.match(excerpt, /\d+ tokens/, 'its tokens')
    t.match(await page.textContent('.part-request'), /the request/)
    t.match(await page.textContent('#left-out'), /retrieved chunks not sent/)
    await page.screenshot({ path: join(shots, 'request.png'), fullPage: true })
  })

  await t.test('a file uploaded through the page is searchable through the API', async (t) => {
    await page.goto(`${h.gw.url}/console#/files`)
    await page.waitForSelector('#file-input')
    await page.setInputFiles('#file-input', { name: 'quibble.md', mimeType: 'text/markdown', buffer: Buffer.from('# Setup\n\nInstall the quibbleflux driver before anything else.') })
    await page.waitForSelector('text=Uploaded quibble.md')
    await page.fill('#search-query', 'quibbleflux driver')
    await page.click('#view form.inline button')
    await page.waitForSelector('#search-results .card')
    await page.screenshot({ path: join(shots, 'files.png'), fullPage: true })
    const r = await h.fetch('/api/v1/files/search', { method: 'POST', provider: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: 'quibbleflux driver' }) })
    const hits = ((await r.json()) as { data: Array<{ filename: string }> }).data
    t.equal(hits[0]?.filename, 'quibble.md')
  })

  await t.test('a session deleted in the page is gone from the API', async (t) => {
    await page.goto(`${h.gw.url}/console#/sessions/walrus-talk`)
    await page.waitForSelector('#delete-session')
    await page.click('#delete-session')
    await page.waitForURL(/#\/sessions$/)
    const r = await h.fetch('/api/v1/sessions/walrus-talk', { provider: null })
    t.equal(r.status, 404)
  })

  await t.test('sign out forgets the key', async (t) => {
    await page.click('#signout')
    t.equal(await page.evaluate(() => (globalThis as unknown as { sessionStorage: { getItem(k: string): string | null } }).sessionStorage.getItem('recallgate.serviceKey')), null)
    t.equal(await page.isVisible('#signin'), true)
  })

  t.same(violations, [], 'no Content-Security-Policy violation')
  const res = await fetch(`${h.gw.url}/console`)
  t.match(res.headers.get('content-security-policy'), /script-src 'self'/)
  t.match(res.headers.get('content-security-policy'), /frame-ancestors 'none'/)
})
