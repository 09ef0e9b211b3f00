/**
 * OpenAI's cursor lists (`input_items`, conversation items, files): `order` asc|desc (default desc), `limit` (1–100,
 * default 20, unless the list's own bounds say otherwise: files take 1–10,000, default 10,000, as OpenAI's do),
 * `after` = the id of the last item of the previous page; `{object: "list", data, first_id, last_id, has_more}`.
 * `items` come oldest first.
 */
import { invalidParam } from '../errors.js'

export function listPage<T>(
  items: readonly T[],
  query: URLSearchParams,
  idOf: (item: T) => string,
  bounds: { defaultLimit: number; maxLimit: number } = { defaultLimit: 20, maxLimit: 100 },
): Record<string, unknown> {
  const order = query.get('order') ?? 'desc'
  if (order !== 'asc' && order !== 'desc') throw invalidParam('order', "order must be 'asc' or 'desc'")
  const rawLimit = query.get('limit')
  let limit = bounds.defaultLimit
  if (rawLimit !== null) {
    if (!/^\d+$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > bounds.maxLimit) {
      throw invalidParam('limit', `limit must be a whole number from 1 to ${bounds.maxLimit}`)
    }
    limit = Number(rawLimit)
  }
  const ordered = order === 'asc' ? items : [...items].reverse()
  let start = 0
  const after = query.get('after')
  if (after !== null) {
    const at = ordered.findIndex((i) => idOf(i) === after)
    if (at === -1) throw invalidParam('after', `No item with id '${after}' in this list`)
    start = at + 1
  }
  const before = query.get('before')
  let end = ordered.length
  if (before !== null) {
    const at = ordered.findIndex((i) => idOf(i) === before)
    if (at === -1) throw invalidParam('before', `No item with id '${before}' in this list`)
    end = at
  }
  const data = ordered.slice(start, Math.min(end, start + limit))
  return {
    object: 'list',
    data,
    first_id: data.length > 0 ? idOf(data[0] as T) : null,
    last_id: data.length > 0 ? idOf(data.at(-1) as T) : null,
    has_more: start + data.length < end,
  }
}
