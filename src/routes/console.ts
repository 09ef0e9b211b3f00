/**
 * GET /console and its two assets: the web console (src/console/), served from the package, no key needed to load
 * the page (it signs in with a service key and calls /api/v1 like any client). Read once at start and kept in
 * memory (≈ 25 KB). The policy headers are what make it safe by construction: only these files may run (no inline
 * script, no eval), it may talk only to this origin, and no other site may frame it.
 */
import { readFileSync } from 'node:fs'
import type { Handler } from '../http/server.js'

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CSP,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
}

const ASSETS = { 'index.html': 'text/html; charset=utf-8', 'app.js': 'text/javascript; charset=utf-8', 'app.css': 'text/css; charset=utf-8' } as const

/** The console's files, from src/console next to this module's folder (dist/src/console once built: `npm run build` copies them). */
export function consoleRoutes(dir: URL = new URL('../console/', import.meta.url)) {
  const serve = (name: keyof typeof ASSETS): Handler => {
    const body = readFileSync(new URL(name, dir))
    return async (ctx) => {
      ctx.res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': ASSETS[name], 'content-length': body.length })
      ctx.res.end(body)
    }
  }
  return { page: serve('index.html'), script: serve('app.js'), style: serve('app.css') }
}
