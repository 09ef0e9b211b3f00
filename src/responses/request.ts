/**
 * A `POST /responses` body, validated and translated (reference §1, §8): the items it brings, the state it names
 * (`previous_response_id`, `conversation`, `store`), the Chat Completions fields for the upstream, and what the
 * Response object echoes. Every failure is a 400 whose `param` names the field (`tools[2].type`, `input[3].call_id`).
 *
 * Unknown fields are accepted and ignored: the SDKs add request fields every month, and refusing one would break a
 * client the day it upgrades. Nothing unknown is forwarded either: unlike the chat path's passthrough, this wire's
 * fields mean different things on Chat's (`text`, `tools`), so only what is translated here reaches the upstream.
 * Known fields that would change the answer and cannot be honoured (`background`, `prompt`) are refused by name.
 */
import { gatewayError, invalidParam } from '../errors.js'
import { isObject } from '../types.js'
import { checkExtensionSpelling, PROVIDER_FIELDS } from '../chat/extension-fields.js'
import { inRange, optionalBoolean, positiveInteger, readRagQuery, readSessionId } from '../chat/validate.js'
import type { NewId, ResponseItem } from './item-types.js'
import { normalizeInput } from './input-items.js'
import { parseTools } from './request-tools.js'
import { ECHO_DEFAULTS } from './output.js'

export interface ResponsesRequest {
  model: string
  instructions: string | null
  /** Normalized, ids assigned, item_references unresolved. */
  input: ResponseItem[]
  previousResponseId: string | undefined
  conversationId: string | undefined
  store: boolean
  stream: boolean
  include: string[]
  metadata: Record<string, string>
  fileSearch: { maxNumResults: number | undefined } | undefined
  /** Names of custom tools: the reply's calls to them map back to custom_tool_call. */
  customTools: ReadonlySet<string>
  /**
   * Chat Completions body fields for the upstream, without model/messages/stream/stream_options: tools, tool_choice,
   * parallel_tool_calls, response_format, verbosity, max_tokens, temperature, top_p, reasoning, user, logprobs,
   * top_logprobs, session_id.
   */
  chatFields: Record<string, unknown>
  maxOutputTokens: number | undefined
  /** What the Response object echoes (responseObject fills the defaults of any field missing here). */
  echo: Record<string, unknown>
  sessionId: string | undefined
  saveToMemory: boolean
  useRAG: boolean
  ragQuery: string | undefined
}

export interface ResponsesLimits {
  /** Items in `input`; more is a 400 naming `input`. */
  maxInputItems: number
  /** As MAX_SESSION_ID_LENGTH for chat; 256 (that setting's default) when not given. */
  maxSessionIdLength?: number
}

const EFFORTS: ReadonlySet<string> = new Set(['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'])
const SUMMARIES: ReadonlySet<string> = new Set(['auto', 'concise', 'detailed'])
const VERBOSITY: ReadonlySet<string> = new Set(['low', 'medium', 'high'])
const LOGPROBS_INCLUDE = 'message.output_text.logprobs'

/** `opts.sessionIdHeader` is the `x-session-id` header, as for chat (the body's field wins). */
export function parseResponsesRequest(
  body: Record<string, unknown>,
  limits: ResponsesLimits,
  opts: { newId: NewId; sessionIdHeader?: string },
): ResponsesRequest {
  checkExtensionSpelling(body, PROVIDER_FIELDS)
  const model = body.model
  if (model === undefined || model === null) throw gatewayError('missing_parameter', { param: 'model', message: 'model is required' })
  if (typeof model !== 'string' || model === '' || model.length > 256) throw invalidParam('model', 'model must be a non-empty string of at most 256 characters')

  const previousResponseId = optionalId(body, 'previous_response_id')
  const conversationId = conversation(body.conversation)
  if (conversationId !== undefined && previousResponseId !== undefined) {
    throw invalidParam('conversation', "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or 'conversation'.")
  }

  const rawInput = body.input
  let input: ResponseItem[] = []
  if (rawInput !== undefined && rawInput !== null) {
    if (Array.isArray(rawInput) && rawInput.length > limits.maxInputItems)
      throw invalidParam('input', `input may contain at most ${limits.maxInputItems} items`)
    input = normalizeInput(rawInput, { newId: opts.newId })
  }
  // With neither a chain nor a conversation to continue, there would be nothing to answer.
  if (input.length === 0 && previousResponseId === undefined && conversationId === undefined)
    throw gatewayError('missing_parameter', { param: 'input', message: 'input is required (a string or a non-empty array of items)' })

  const instructions = body.instructions ?? null
  if (instructions !== null && typeof instructions !== 'string') throw invalidParam('instructions', 'instructions must be a string or null')

  if (optionalBoolean(body, 'background') === true)
    throw invalidParam('background', 'background responses are not supported by this gateway: omit background or set it to false')
  if (body.prompt !== undefined && body.prompt !== null)
    throw invalidParam('prompt', 'prompt templates are not supported by this gateway: send instructions and input instead')
  const store = optionalBoolean(body, 'store') ?? true
  const stream = optionalBoolean(body, 'stream') ?? false

  const chatFields: Record<string, unknown> = {}
  const echo: Record<string, unknown> = { store, instructions }

  const tools = parseTools(body.tools, body.tool_choice)
  if (tools.chatTools.length > 0) chatFields.tools = tools.chatTools
  if (tools.chatToolChoice !== undefined) chatFields.tool_choice = tools.chatToolChoice
  // The defaults themselves when nothing was set (output.ts shapeKey knows them by identity).
  echo.tools = tools.echoTools.length === 0 ? ECHO_DEFAULTS.tools : tools.echoTools
  echo.tool_choice = tools.echoToolChoice
  const parallel = optionalBoolean(body, 'parallel_tool_calls')
  // Chat refuses parallel_tool_calls without tools.
  if (parallel !== undefined && tools.chatTools.length > 0) chatFields.parallel_tool_calls = parallel
  echo.parallel_tool_calls = parallel ?? true
  const maxToolCalls = positiveInteger(body, 'max_tool_calls')
  echo.max_tool_calls = maxToolCalls ?? null

  const text = textFormat(body.text)
  if (text.responseFormat !== undefined) chatFields.response_format = text.responseFormat
  // Chat Completions has it at the top level (OpenAI's and OpenRouter's `verbosity`); Codex sets it for GPT-5 models.
  if (typeof text.echo.verbosity === 'string') chatFields.verbosity = text.echo.verbosity
  echo.text = body.text === undefined || body.text === null ? ECHO_DEFAULTS.text : text.echo

  const maxOutputTokens = positiveInteger(body, 'max_output_tokens')
  if (maxOutputTokens !== undefined) chatFields.max_tokens = maxOutputTokens
  echo.max_output_tokens = maxOutputTokens ?? null

  for (const [field, hi] of [['temperature', 2], ['top_p', 1]] as const) {
    const v = body[field]
    if (v === undefined || v === null) {
      echo[field] = 1
      continue
    }
    if (!inRange(v, 0, hi)) throw invalidParam(field, `${field} must be a number from 0 to ${hi}`)
    chatFields[field] = v
    echo[field] = v
  }

  const reasoning = reasoningField(body.reasoning)
  if (reasoning.effort !== null) chatFields.reasoning = { effort: reasoning.effort }
  echo.reasoning = reasoning.effort === null && reasoning.summary === null ? ECHO_DEFAULTS.reasoning : reasoning

  const include = stringArray(body, 'include')
  const topLogprobs = body.top_logprobs
  if (topLogprobs !== undefined && topLogprobs !== null) {
    if (typeof topLogprobs !== 'number' || !Number.isInteger(topLogprobs) || topLogprobs < 0 || topLogprobs > 20)
      throw invalidParam('top_logprobs', 'top_logprobs must be an integer from 0 to 20')
  }
  // Log probabilities cost and some providers refuse them: asked for only when the caller wants them back.
  if ((typeof topLogprobs === 'number' && topLogprobs > 0) || include.includes(LOGPROBS_INCLUDE)) {
    chatFields.logprobs = true
    if (typeof topLogprobs === 'number' && topLogprobs > 0) chatFields.top_logprobs = topLogprobs
  }
  echo.top_logprobs = topLogprobs ?? 0

  const user = optionalString(body, 'user')
  const safetyIdentifier = optionalString(body, 'safety_identifier')
  if (safetyIdentifier !== undefined && safetyIdentifier.length > 64) throw invalidParam('safety_identifier', 'safety_identifier must be at most 64 characters')
  // `user` is deprecated in favour of `safety_identifier`; OpenRouter knows only `user`.
  const upstreamUser = safetyIdentifier ?? user
  if (upstreamUser !== undefined) chatFields.user = upstreamUser
  echo.user = user ?? null
  echo.safety_identifier = safetyIdentifier ?? null

  // OpenRouter's own grouping of requests for its observability (extension-fields.ts), sent by clients that speak to it
  // directly: forwarded as chat forwards it. Checked here because this wire forwards only fields it knows; its length
  // is the provider's to judge, as on the chat path. Not a recallgate session (that is `sessionId`).
  const providerSession = optionalString(body, 'session_id')
  if (providerSession !== undefined) chatFields.session_id = providerSession

  const truncation = body.truncation ?? 'disabled'
  if (truncation !== 'auto' && truncation !== 'disabled') throw invalidParam('truncation', 'truncation must be "auto" or "disabled"')
  echo.truncation = truncation
  echo.metadata = body.metadata === undefined || body.metadata === null ? ECHO_DEFAULTS.metadata : metadataField(body.metadata)
  echo.prompt_cache_key = optionalString(body, 'prompt_cache_key') ?? null
  echo.service_tier = 'default'

  const saveToMemory = optionalBoolean(body, 'saveToMemory') ?? true
  const useRAG = optionalBoolean(body, 'useRAG') ?? true
  const sessionId = readSessionId(body.sessionId ?? opts.sessionIdHeader, limits.maxSessionIdLength ?? 256)
  const ragQuery = readRagQuery(body)

  return {
    model,
    instructions,
    input,
    previousResponseId,
    conversationId,
    store,
    stream,
    include,
    metadata: echo.metadata as Record<string, string>,
    fileSearch: tools.fileSearch,
    customTools: tools.customTools,
    chatFields,
    maxOutputTokens,
    echo,
    sessionId,
    saveToMemory,
    useRAG,
    ragQuery,
  }
}

function conversation(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined
  const id = isObject(v) ? v.id : v
  if (typeof id !== 'string' || id === '') throw invalidParam('conversation', 'conversation must be a conversation id ("conv_…") or {id: "conv_…"}')
  return id
}

/** `text.format` → Chat's `response_format` (Responses' json_schema is flat, Chat's nests it under `json_schema`). */
function textFormat(v: unknown): { responseFormat: Record<string, unknown> | undefined; echo: Record<string, unknown> } {
  if (v === undefined || v === null) return { responseFormat: undefined, echo: { format: { type: 'text' } } }
  if (!isObject(v)) throw invalidParam('text', 'text must be an object ({format, verbosity})')
  const echo: Record<string, unknown> = { format: { type: 'text' } }
  if (v.verbosity !== undefined && v.verbosity !== null) {
    if (typeof v.verbosity !== 'string' || !VERBOSITY.has(v.verbosity)) throw invalidParam('text.verbosity', 'text.verbosity must be one of low, medium, high')
    echo.verbosity = v.verbosity
  }
  const f = v.format
  if (f === undefined || f === null) return { responseFormat: undefined, echo }
  if (!isObject(f)) throw invalidParam('text.format', 'text.format must be an object with a type')
  switch (f.type) {
    case 'text':
      return { responseFormat: undefined, echo }
    case 'json_object':
      echo.format = { type: 'json_object' }
      return { responseFormat: { type: 'json_object' }, echo }
    case 'json_schema': {
      if (typeof f.name !== 'string' || f.name === '') throw invalidParam('text.format.name', 'text.format.name must be a non-empty string')
      if (!isObject(f.schema)) throw invalidParam('text.format.schema', 'text.format.schema must be a JSON Schema object')
      if (f.strict !== undefined && f.strict !== null && typeof f.strict !== 'boolean') throw invalidParam('text.format.strict', 'text.format.strict must be a boolean')
      if (f.description !== undefined && f.description !== null && typeof f.description !== 'string')
        throw invalidParam('text.format.description', 'text.format.description must be a string')
      const schema: Record<string, unknown> = { name: f.name, schema: f.schema }
      if (typeof f.strict === 'boolean') schema.strict = f.strict
      if (typeof f.description === 'string') schema.description = f.description
      echo.format = { type: 'json_schema', ...schema }
      return { responseFormat: { type: 'json_schema', json_schema: schema }, echo }
    }
    default:
      throw invalidParam('text.format.type', 'text.format.type must be one of text, json_object, json_schema')
  }
}

/** OpenRouter takes `reasoning: {effort}`; the summary setting has no Chat equivalent and is only echoed. */
function reasoningField(v: unknown): { effort: string | null; summary: string | null } {
  if (v === undefined || v === null) return { effort: null, summary: null }
  if (!isObject(v)) throw invalidParam('reasoning', 'reasoning must be an object ({effort, summary})')
  const effort = v.effort ?? null
  if (effort !== null && (typeof effort !== 'string' || !EFFORTS.has(effort)))
    throw invalidParam('reasoning.effort', 'reasoning.effort must be one of none, minimal, low, medium, high, xhigh, max')
  const summary = v.summary ?? v.generate_summary ?? null
  if (summary !== null && (typeof summary !== 'string' || !SUMMARIES.has(summary)))
    throw invalidParam('reasoning.summary', 'reasoning.summary must be one of auto, concise, detailed')
  return { effort, summary }
}

/** OpenAI's bounds: at most 16 pairs, keys up to 64 characters, string values up to 512. */
export function metadataField(v: unknown): Record<string, string> {
  if (v === undefined || v === null) return {}
  if (!isObject(v)) throw invalidParam('metadata', 'metadata must be an object of string values')
  const keys = Object.keys(v)
  if (keys.length > 16) throw invalidParam('metadata', 'metadata may have at most 16 keys')
  const out: Record<string, string> = {}
  for (const k of keys) {
    const value = v[k]
    if (k.length > 64) throw invalidParam('metadata', `metadata keys must be at most 64 characters (${JSON.stringify(k.slice(0, 16))}… is longer)`)
    if (typeof value !== 'string') throw invalidParam('metadata', `metadata.${k} must be a string`)
    if (value.length > 512) throw invalidParam('metadata', `metadata.${k} must be at most 512 characters`)
    // A `__proto__` key stays a key (an assignment would set the prototype).
    Object.defineProperty(out, k, { value, enumerable: true, writable: true, configurable: true })
  }
  return out
}

function optionalId(body: Record<string, unknown>, field: string): string | undefined {
  const v = body[field]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string' || v === '') throw invalidParam(field, `${field} must be a non-empty string`)
  return v
}

function optionalString(body: Record<string, unknown>, field: string): string | undefined {
  const v = body[field]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string') throw invalidParam(field, `${field} must be a string`)
  return v
}

function stringArray(body: Record<string, unknown>, field: string): string[] {
  const v = body[field]
  if (v === undefined || v === null) return []
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) throw invalidParam(field, `${field} must be an array of strings`)
  return v as string[]
}
