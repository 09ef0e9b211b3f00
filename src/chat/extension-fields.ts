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
 * OpenRouter request fields that fold to an extension: `session_id` groups requests for its observability (broadcast;
 * LangChain's ChatOpenRouter sends it). Where the body passes through to the upstream (chat), they are the provider's,
 * not a misspelling, and go upstream unchanged.
 */
export const PROVIDER_FIELDS: ReadonlySet<string> = new Set(['session_id'])
const NONE: ReadonlySet<string> = new Set()

/**
 * Refuse a field that differs from an extension only by case or separators, naming the right spelling. Apart from
 * `passes` (the provider's own fields, for a body that is passed through), provider fields never fold to one of these
 * four (OpenAI's and OpenRouter's are snake_case words like `user`, `provider`). Field names longer than 32 characters
 * cannot be one of them and are not folded.
 */
export function checkExtensionSpelling(body: Record<string, unknown>, passes: ReadonlySet<string> = NONE): void {
  for (const k of Object.keys(body)) {
    if (k.length > 32 || passes.has(k)) continue
    const right = FOLDED.get(fold(k))
    if (right !== undefined && right !== k) throw invalidParam(k, `Unknown field "${k}": did you mean "${right}"?`)
  }
}
