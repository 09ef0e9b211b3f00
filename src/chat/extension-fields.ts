/**
 * recallgate's four body extensions, guarded against the mistakes users cannot see: a near-miss spelling that would
 * otherwise pass upstream as an unknown field (the request then runs without memory, silently). Session ids that look
 * the same but are different strings are made one in http/session-id.ts.
 */
import { invalidParam } from '../errors.js'

export const EXTENSIONS = ['sessionId', 'saveToMemory', 'useRAG', 'ragQuery'] as const

/** Case and separators dropped: "sessionID", "session_id", "Session-Id" all become "sessionid". */
const fold = (k: string): string => k.toLowerCase().replace(/[\s_.-]/g, '')

const FOLDED = new Map<string, string>(EXTENSIONS.map((e) => [fold(e), e]))

/**
 * Refuse a field that differs from an extension only by case or separators, naming the right spelling. Provider fields
 * never fold to one of these four (OpenAI's and OpenRouter's are snake_case words like `user`, `provider`), so
 * nothing real is caught. Field names longer than 32 characters cannot be one of them and are not folded.
 */
export function checkExtensionSpelling(body: Record<string, unknown>): void {
  for (const k of Object.keys(body)) {
    if (k.length > 32) continue
    const right = FOLDED.get(fold(k))
    if (right !== undefined && right !== k) throw invalidParam(k, `Unknown field "${k}": did you mean "${right}"?`)
  }
}
