/**
 * A small path router: routes are templates like `/api/v1/sessions/:id`. Matching is by segment, so a percent-encoded
 * slash inside an id (`a%2Fb`) stays one segment and is decoded only after matching.
 */
export interface Match<H> {
  handler: H
  template: string
  params: Record<string, string>
}

export type RouteResult<H> =
  | { kind: 'match'; match: Match<H> }
  | { kind: 'method-not-allowed'; allow: string[]; template: string }
  | { kind: 'not-found' }

interface Entry<H> {
  method: string
  template: string
  segments: string[]
  handler: H
}

export class Router<H> {
  readonly #entries: Entry<H>[] = []
  /**
   * Matches of parameterless templates by `method pathname`: such a template matches one path only, so this holds at
   * most a few entries per route. The segment walk it saves was 8 of the 1,090 µs a chat request cost the gateway at 32
   * connections (profiler time, bench/relay.ts).
   */
  readonly #static = new Map<string, RouteResult<H>>()

  add(method: string, template: string, handler: H): this {
    this.#entries.push({ method, template, segments: template.split('/').slice(1), handler })
    this.#static.clear()
    return this
  }

  find(method: string, pathname: string): RouteResult<H> {
    const key = `${method} ${pathname}`
    const known = this.#static.get(key)
    if (known !== undefined) return known
    const found = this.#find(method, pathname)
    if (found.kind === 'match' && !found.match.template.includes('/:')) this.#static.set(key, found)
    return found
  }

  #find(method: string, pathname: string): RouteResult<H> {
    const parts = pathname.split('/').slice(1)
    const allow: string[] = []
    let template: string | undefined
    // Static routes are registered before parameterised ones that could shadow them (e.g. /files/search before
    // /files/:id), and the first registered match wins.
    for (const e of this.#entries) {
      const params = matchSegments(e.segments, parts)
      if (params === undefined) continue
      if (e.method === method || (method === 'HEAD' && e.method === 'GET')) {
        // Frozen: a static match is shared by every request to its path.
        return { kind: 'match', match: { handler: e.handler, template: e.template, params: Object.freeze(params) } }
      }
      template ??= e.template
      allow.push(e.method)
    }
    if (template !== undefined) return { kind: 'method-not-allowed', allow, template }
    return { kind: 'not-found' }
  }
}

function matchSegments(pattern: string[], parts: string[]): Record<string, string> | undefined {
  if (pattern.length !== parts.length) return undefined
  const params: Record<string, string> = {}
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] as string
    const v = parts[i] as string
    if (p.startsWith(':')) {
      if (v === '') return undefined
      let decoded: string
      try {
        decoded = decodeURIComponent(v)
      } catch {
        // A malformed escape cannot name any stored id, so the route does not match (404 rather than 500).
        return undefined
      }
      params[p.slice(1)] = decoded
    } else if (p !== v) return undefined
  }
  return params
}
