/**
 * Ids come from clients (paths, `previous_response_id`, `item_reference`, conversation ids): one that could not be
 * stored (empty, huge, a control character — PostgreSQL text cannot even hold NUL) is simply not found, never a
 * database error. The same rule for every engine (LMDB keys have a size limit too).
 */
export function storableId(id: string): boolean {
  return id.length > 0 && id.length <= 256 && !/[\u0000-\u001f]/.test(id)
}
