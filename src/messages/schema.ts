/**
 * Structural validation of a Chat Completions `messages` array: the whole OpenAI schema (roles developer, system,
 * user, assistant, tool and the deprecated function; string or part-array content; tool calls), checked for what the
 * contract names and nothing more. Part types and fields we do not know pass untouched: providers add new ones often,
 * and refusing them would break clients the day they appear. A failure is a 400 whose `param` names the field
 * (`messages[3].tool_calls[0].id`).
 *
 * The pairing rule between tool calls and tool results is a separate check (pairing.ts): it has to run again once
 * memory has supplied the assistant message a request's tool results answer.
 */
import { gatewayError, invalidParam } from '../errors.js'
import { isObject, type ChatMessage, type Role } from '../types.js'

const ROLES: ReadonlySet<string> = new Set<Role>(['developer', 'system', 'user', 'assistant', 'tool', 'function'])
const DETAILS: ReadonlySet<string> = new Set(['auto', 'low', 'high'])

export function validateMessages(raw: unknown, max: number): ChatMessage[] {
  if (raw === undefined || raw === null)
    throw gatewayError('missing_parameter', { param: 'messages', message: 'messages is required' })
  if (!Array.isArray(raw)) throw invalidParam('messages', 'messages must be an array')
  if (raw.length === 0) throw invalidParam('messages', 'messages must contain at least one message')
  if (raw.length > max) throw invalidParam('messages', `messages may contain at most ${max} messages`)
  for (let i = 0; i < raw.length; i++) validateMessage(raw[i], `messages[${i}]`)
  return raw as ChatMessage[]
}

function validateMessage(m: unknown, at: string): void {
  if (!isObject(m)) throw invalidParam(at, `${at} must be an object with a role`)
  const role = m.role
  if (typeof role !== 'string' || !ROLES.has(role)) {
    throw invalidParam(`${at}.role`, `${at}.role must be one of developer, system, user, assistant, tool, function`)
  }
  if (m.name !== undefined && typeof m.name !== 'string') throw invalidParam(`${at}.name`, `${at}.name must be a string`)
  const content = m.content
  switch (role as Role) {
    case 'system':
    case 'developer':
    case 'user':
      if (content === undefined || content === null)
        throw gatewayError('missing_parameter', { param: `${at}.content`, message: `${at}.content is required` })
      checkContent(content, `${at}.content`)
      return
    case 'tool':
      if (typeof m.tool_call_id !== 'string' || m.tool_call_id === '') {
        if (m.tool_call_id === undefined)
          throw gatewayError('missing_parameter', { param: `${at}.tool_call_id`, message: `${at}.tool_call_id is required` })
        throw invalidParam(`${at}.tool_call_id`, `${at}.tool_call_id must be a non-empty string`)
      }
      if (content === undefined || content === null)
        throw gatewayError('missing_parameter', { param: `${at}.content`, message: `${at}.content is required` })
      checkContent(content, `${at}.content`)
      return
    case 'assistant': {
      if (content !== undefined && content !== null) checkContent(content, `${at}.content`)
      if (m.refusal !== undefined && m.refusal !== null && typeof m.refusal !== 'string')
        throw invalidParam(`${at}.refusal`, `${at}.refusal must be a string or null`)
      const calls = m.tool_calls
      if (calls !== undefined && calls !== null) checkToolCalls(calls, `${at}.tool_calls`)
      const hasCalls = Array.isArray(calls) && calls.length > 0
      // OpenAI: content is "required unless tool_calls or function_call is specified"; an audio reply is referenced
      // by id, and a refusal carries its text on its own.
      if ((content === undefined || content === null) && !hasCalls && m.function_call == null && m.audio == null && m.refusal == null)
        throw gatewayError('missing_parameter', {
          param: `${at}.content`,
          message: `${at}.content is required unless tool_calls (or function_call, audio, refusal) is given`,
        })
      return
    }
    case 'function':
      if (typeof m.name !== 'string' || m.name === '')
        throw gatewayError('missing_parameter', { param: `${at}.name`, message: `${at}.name is required for role function` })
      if (content !== undefined && content !== null && typeof content !== 'string')
        throw invalidParam(`${at}.content`, `${at}.content must be a string or null`)
      return
  }
}

function checkContent(content: unknown, at: string): void {
  if (typeof content === 'string') return
  if (!Array.isArray(content)) throw invalidParam(at, `${at} must be a string or an array of content parts`)
  for (let j = 0; j < content.length; j++) checkPart(content[j], `${at}[${j}]`)
}

function checkPart(p: unknown, at: string): void {
  if (!isObject(p) || Array.isArray(p)) throw invalidParam(at, `${at} must be an object with a string type`)
  if (typeof p.type !== 'string' || p.type === '') throw invalidParam(`${at}.type`, `${at}.type must be a non-empty string`)
  switch (p.type) {
    case 'text':
      if (typeof p.text !== 'string') throw invalidParam(`${at}.text`, `${at}.text must be a string`)
      return
    case 'refusal':
      if (typeof p.refusal !== 'string') throw invalidParam(`${at}.refusal`, `${at}.refusal must be a string`)
      return
    case 'image_url': {
      const img = p.image_url
      if (!isObject(img) || typeof img.url !== 'string' || img.url === '')
        throw invalidParam(`${at}.image_url.url`, `${at}.image_url.url must be a non-empty string (a URL or a data URL)`)
      if (img.detail !== undefined && (typeof img.detail !== 'string' || !DETAILS.has(img.detail)))
        throw invalidParam(`${at}.image_url.detail`, `${at}.image_url.detail must be one of auto, low, high`)
      return
    }
    case 'input_audio': {
      const a = p.input_audio
      if (!isObject(a) || typeof a.data !== 'string')
        throw invalidParam(`${at}.input_audio.data`, `${at}.input_audio.data must be a base64 string`)
      if (typeof a.format !== 'string')
        throw invalidParam(`${at}.input_audio.format`, `${at}.input_audio.format must be a string (wav, mp3)`)
      return
    }
    case 'file': {
      const f = p.file
      if (!isObject(f) || (typeof f.file_data !== 'string' && typeof f.file_id !== 'string'))
        throw invalidParam(`${at}.file`, `${at}.file must be an object with file_data or file_id`)
      return
    }
    default:
      // A part type we do not know: passed through as it is.
      return
  }
}

function checkToolCalls(calls: unknown, at: string): void {
  if (!Array.isArray(calls)) throw invalidParam(at, `${at} must be an array`)
  const seen = new Set<string>()
  for (let k = 0; k < calls.length; k++) {
    const c: unknown = calls[k]
    const here = `${at}[${k}]`
    if (!isObject(c)) throw invalidParam(here, `${here} must be an object`)
    if (typeof c.id !== 'string' || c.id === '') throw invalidParam(`${here}.id`, `${here}.id must be a non-empty string`)
    if (seen.has(c.id)) throw invalidParam(`${here}.id`, `${here}.id repeats the id ${JSON.stringify(c.id)}`)
    seen.add(c.id)
    if (typeof c.type !== 'string') throw invalidParam(`${here}.type`, `${here}.type must be a string ("function")`)
    if (c.type === 'function') {
      const f = c.function
      if (!isObject(f)) throw invalidParam(`${here}.function`, `${here}.function must be an object with name and arguments`)
      if (typeof f.name !== 'string' || f.name === '')
        throw invalidParam(`${here}.function.name`, `${here}.function.name must be a non-empty string`)
      if (typeof f.arguments !== 'string')
        throw invalidParam(`${here}.function.arguments`, `${here}.function.arguments must be a string (JSON text)`)
    }
  }
}

