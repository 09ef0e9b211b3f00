/**
 * `tools` and `tool_choice` of a Responses request → Chat Completions (reference §1, §8, pitfall 8).
 *
 * - Function tools are flat on this wire and nested on Chat's. `parameters: null` or `{}` becomes an empty object
 *   schema (providers reject a missing one) and a schema without `type` gets `type: "object"`; `strict` is sent only
 *   when the caller set it, because non-OpenAI providers can fail on `strict: true`.
 * - Custom tools (Codex's freeform `apply_patch`) become a function with one string argument, `input`; their names
 *   are returned so the reply's calls map back to `custom_tool_call`. A grammar, if any, goes into the description:
 *   Chat has no grammar-constrained tools, and the model still needs the format to write valid input.
 * - `file_search` is the caller's knowledge base, searched by the gateway (as `useRAG` does): recorded, never sent.
 * - Every other hosted tool (web_search, code_interpreter, computer_use, mcp, local_shell, image_generation, …) is a
 *   400 naming `tools[i].type`: the gateway cannot run it, and a model told it has a tool it cannot call misleads.
 */
import { invalidParam } from '../errors.js'
import { isObject } from '../types.js'

export interface ToolsResult {
  /** Chat tools, in the request's order (only those `allowed_tools` lets through). Empty: do not send `tools`. */
  chatTools: Record<string, unknown>[]
  /** Chat `tool_choice`, or undefined to leave it out. */
  chatToolChoice: unknown
  customTools: Set<string>
  fileSearch: { maxNumResults: number | undefined } | undefined
  /** The tools as the Response object echoes them (Responses shape, known fields only). */
  echoTools: Record<string, unknown>[]
  /** `tool_choice` as echoed: the caller's value, default `"auto"`. */
  echoToolChoice: unknown
}

const CHOICE_MODES: ReadonlySet<string> = new Set(['none', 'auto', 'required'])

export function parseTools(rawTools: unknown, rawChoice: unknown): ToolsResult {
  const chat = new Map<string, Record<string, unknown>>()
  const customTools = new Set<string>()
  const echoTools: Record<string, unknown>[] = []
  let fileSearch: ToolsResult['fileSearch']
  if (rawTools !== undefined && rawTools !== null) {
    if (!Array.isArray(rawTools)) throw invalidParam('tools', 'tools must be an array')
    for (let i = 0; i < rawTools.length; i++) {
      const at = `tools[${i}]`
      const tool: unknown = rawTools[i]
      if (!isObject(tool)) throw invalidParam(at, `${at} must be an object with a type`)
      switch (tool.type) {
        case 'function':
        case 'custom': {
          const name = toolName(tool, at)
          if (chat.has(name)) throw invalidParam(`${at}.name`, `${at}.name repeats the tool name ${JSON.stringify(name)}`)
          const description = optionalString(tool, 'description', at)
          if (tool.type === 'function') {
            chat.set(name, functionTool(tool, name, description, at))
            echoTools.push({ type: 'function', name, description: description ?? null, parameters: tool.parameters ?? null, strict: tool.strict ?? null })
          } else {
            chat.set(name, customTool(tool, name, description, at))
            customTools.add(name)
            const echo: Record<string, unknown> = { type: 'custom', name }
            if (description !== undefined) echo.description = description
            if (tool.format !== undefined) echo.format = tool.format
            echoTools.push(echo)
          }
          break
        }
        case 'file_search': {
          const n = tool.max_num_results
          if (n !== undefined && n !== null && (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1 || n > 50))
            throw invalidParam(`${at}.max_num_results`, `${at}.max_num_results must be an integer from 1 to 50`)
          fileSearch = { maxNumResults: typeof n === 'number' ? n : undefined }
          echoTools.push({ ...tool })
          break
        }
        default: {
          if (typeof tool.type !== 'string') throw invalidParam(`${at}.type`, `${at}.type must be a string`)
          throw invalidParam(
            `${at}.type`,
            `${at}: the hosted tool ${JSON.stringify(tool.type)} is not supported by this gateway (it cannot run it); ` +
              'use function or custom tools, or file_search for the knowledge base',
          )
        }
      }
    }
  }
  const choice = toolChoice(rawChoice, chat)
  const chatTools = choice.allowed === undefined ? [...chat.values()] : [...chat.entries()].filter(([n]) => choice.allowed?.has(n)).map(([, t]) => t)
  return {
    chatTools,
    // Chat refuses tool_choice without tools; with none left, "none" and "auto" mean the same anyway.
    chatToolChoice: chatTools.length > 0 ? choice.chat : undefined,
    customTools,
    fileSearch,
    echoTools,
    echoToolChoice: rawChoice ?? 'auto',
  }
}

function functionTool(tool: Record<string, unknown>, name: string, description: string | undefined, at: string): Record<string, unknown> {
  const p = tool.parameters
  if (p !== undefined && p !== null && !isObject(p)) throw invalidParam(`${at}.parameters`, `${at}.parameters must be a JSON Schema object or null`)
  const parameters = p === undefined || p === null || Object.keys(p).length === 0 ? { type: 'object', properties: {} } : p.type === undefined ? { type: 'object', ...p } : p
  const strict = tool.strict
  if (strict !== undefined && strict !== null && typeof strict !== 'boolean') throw invalidParam(`${at}.strict`, `${at}.strict must be a boolean or null`)
  const fn: Record<string, unknown> = { name }
  if (description !== undefined) fn.description = description
  fn.parameters = parameters
  if (typeof strict === 'boolean') fn.strict = strict
  return { type: 'function', function: fn }
}

function customTool(tool: Record<string, unknown>, name: string, description: string | undefined, at: string): Record<string, unknown> {
  let note = 'Pass the whole input as the string argument `input`.'
  const format = tool.format
  if (format !== undefined && format !== null) {
    if (!isObject(format) || (format.type !== 'text' && format.type !== 'grammar'))
      throw invalidParam(`${at}.format`, `${at}.format must be {type: "text"} or {type: "grammar", syntax, definition}`)
    if (format.type === 'grammar') {
      if (typeof format.definition !== 'string' || typeof format.syntax !== 'string')
        throw invalidParam(`${at}.format`, `${at}.format of type grammar needs syntax and definition strings`)
      note += ` It must follow this ${format.syntax} grammar:\n${format.definition}`
    }
  }
  return {
    type: 'function',
    function: {
      name,
      description: description === undefined || description === '' ? note : `${description}\n\n${note}`,
      parameters: { type: 'object', properties: { input: { type: 'string' } }, required: ['input'], additionalProperties: false },
    },
  }
}

interface Choice {
  chat: unknown
  /** `allowed_tools`: the names it keeps. */
  allowed: ReadonlySet<string> | undefined
}

function toolChoice(raw: unknown, tools: ReadonlyMap<string, unknown>): Choice {
  if (raw === undefined || raw === null) return { chat: undefined, allowed: undefined }
  if (typeof raw === 'string') {
    if (!CHOICE_MODES.has(raw)) throw invalidParam('tool_choice', 'tool_choice must be "none", "auto", "required" or an object')
    return { chat: raw, allowed: undefined }
  }
  if (!isObject(raw)) throw invalidParam('tool_choice', 'tool_choice must be "none", "auto", "required" or an object')
  switch (raw.type) {
    case 'function':
    case 'custom': {
      const name = raw.name
      if (typeof name !== 'string' || !tools.has(name))
        throw invalidParam('tool_choice', `tool_choice names ${JSON.stringify(name)}, which is not one of the request's function or custom tools`)
      return { chat: { type: 'function', function: { name } }, allowed: undefined }
    }
    case 'allowed_tools': {
      const mode = raw.mode
      if (mode !== 'auto' && mode !== 'required') throw invalidParam('tool_choice', 'tool_choice.mode must be "auto" or "required"')
      if (!Array.isArray(raw.tools)) throw invalidParam('tool_choice', 'tool_choice.tools must be an array of {type, name}')
      const allowed = new Set<string>()
      for (const t of raw.tools) if (isObject(t) && typeof t.name === 'string') allowed.add(t.name)
      return { chat: mode, allowed }
    }
    case 'file_search':
      // The gateway searches before the model runs; what is left for the model to choose is its other tools.
      return { chat: 'auto', allowed: undefined }
    default:
      throw invalidParam('tool_choice', `tool_choice of type ${JSON.stringify(raw.type)} is not supported by this gateway (it cannot run hosted tools)`)
  }
}

function toolName(tool: Record<string, unknown>, at: string): string {
  const name = tool.name
  if (typeof name !== 'string' || name === '') throw invalidParam(`${at}.name`, `${at}.name must be a non-empty string`)
  return name
}

function optionalString(o: Record<string, unknown>, field: string, at: string): string | undefined {
  const v = o[field]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string') throw invalidParam(`${at}.${field}`, `${at}.${field} must be a string`)
  return v
}
