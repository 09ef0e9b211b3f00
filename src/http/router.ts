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
  | { kind: 'bad-encoding'; param: string; template: string }
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
    // A path that is a static route's belongs to it alone: GET /files/search is that route with the wrong method
    // (405), not a file whose id is "search".
    const staticTemplate = this.#entries.find((e) => !e.template.includes('/:') && matchSegments(e.segments, parts) !== undefined)?.template
    for (const e of this.#entries) {
      if (staticTemplate !== undefined && e.template !== staticTemplate) continue
      const params = matchSegments(e.segments, parts)
      if (params === undefined) continue
      if (params === BAD_ENCODING) return { kind: 'bad-encoding', param: badParam(e.segments, parts), template: e.template }
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

/** A path that matches a template except that a parameter is not valid percent-encoding (`%zz`). */
const BAD_ENCODING: Record<string, string> = Object.freeze({})

function badParam(pattern: string[], parts: string[]): string {
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] as string
    if (!p.startsWith(':')) continue
    try {
      decodeURIComponent(parts[i] as string)
    } catch {
      return p.slice(1)
    }
  }
  return 'path'
}

function matchSegments(pattern: string[], parts: string[]): Record<string, string> | undefined {
  if (pattern.length !== parts.length) return undefined
  const params: Record<string, string> = {}
  let bad = false
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] as string
    const v = parts[i] as string
    if (p.startsWith(':')) {
      if (v === '') return undefined
      let decoded: string
      try {
        decoded = decodeURIComponent(v)
      } catch {
        // A malformed escape cannot name any stored id: the caller answers 400 about the encoding, not 404 "no route".
        bad = true
        continue
      }
      params[p.slice(1)] = decoded
    } else if (p !== v) return undefined
  }
  return bad ? BAD_ENCODING : params
}
