/**
 * What a message weighs in tokens beyond its framing, and what tool definitions add to a prompt. Pure: the text
 * counter of the model's encoding is passed in.
 *
 * - String content: its exact count. Text and refusal parts: theirs.
 * - `name`: its text + 1 (OpenAI cookbook, "How to count tokens with tiktoken").
 * - Tool calls: per call, the name, the arguments and 3 for the call's framing; a tool result's content as text.
 *   `reasoning` text counts as text (providers that take it back count it as input).
 * - Images (gpt-4o rules): `detail: low` 85; otherwise fit within 2048×2048, shortest side to 768, 85 + 170 per
 *   512-px tile. The size is read from a data URL's PNG/JPEG/GIF/WebP header (image-size.ts); a remote URL is never
 *   fetched, so it counts the configured estimate (`image`, default 765 = a 1024×1024 image at high detail).
 * - Audio (`input_audio`): 10 tokens a second (OpenAI's rate for gpt-4o audio input), the duration read from a WAV
 *   header or estimated at 128 kbit/s for other formats.
 * - Files (`file`): the configured estimate per file (`file`, default 1,000): providers extract them their own way.
 * - Parts of a type we do not know: their JSON as text (over rather than under).
 * What these rules miss, the learned per-model correction (tokenizer.ts, from the upstream's `usage.prompt_tokens`)
 * takes up.
 */
import { isArray, isObject, type ChatMessage, type ContentPart, type Tokens } from '../types.js'
import { imageSize } from './image-size.js'

export interface MediaEstimates {
  /** Tokens for an image whose size cannot be read (a remote URL). */
  image: Tokens
  /** Tokens for a `file` part. */
  file: Tokens
}

export type CountText = (text: string) => Tokens

const AUDIO_TOKENS_PER_SECOND = 10
const MP3_BYTES_PER_SECOND = 16_000

export function contentTokens(m: ChatMessage, count: CountText, media: MediaEstimates): Tokens {
  let n = 0
  const c = m.content
  if (typeof c === 'string') n += count(c)
  else if (isArray(c)) for (const p of c) n += partTokens(p, count, media)
  if (typeof m.name === 'string') n += count(m.name) + 1
  if (typeof m.refusal === 'string') n += count(m.refusal)
  if (typeof m.reasoning === 'string') n += count(m.reasoning)
  if (isArray(m.tool_calls)) {
    for (const call of m.tool_calls) {
      const f = call.function
      n += 3 + (f ? count(f.name) + count(f.arguments) : count(JSON.stringify(call)))
    }
  }
  return n
}

function partTokens(p: ContentPart, count: CountText, media: MediaEstimates): Tokens {
  switch (p.type) {
    case 'text':
      return typeof p.text === 'string' ? count(p.text) : 0
    case 'refusal':
      return typeof p.refusal === 'string' ? count(p.refusal) : 0
    case 'image_url': {
      const img = p.image_url as { url?: unknown; detail?: unknown } | undefined
      return imageTokens(typeof img?.url === 'string' ? img.url : '', img?.detail, media.image)
    }
    case 'input_audio': {
      const a = p.input_audio as { data?: unknown; format?: unknown } | undefined
      return audioTokens(typeof a?.data === 'string' ? a.data : '', a?.format)
    }
    case 'file':
      return media.file
    default:
      return count(JSON.stringify(p))
  }
}

/** OpenAI's image rule for the gpt-4o class. */
export function imageTokens(url: string, detail: unknown, estimate: Tokens): Tokens {
  if (detail === 'low') return 85
  const size = url.startsWith('data:') ? imageSize(url) : undefined
  if (size === undefined) return estimate
  let { width: w, height: h } = size
  if (w <= 0 || h <= 0) return estimate
  const fit = Math.min(1, 2048 / Math.max(w, h))
  w *= fit
  h *= fit
  const shortest = Math.min(w, h)
  if (shortest > 768) {
    w *= 768 / shortest
    h *= 768 / shortest
  }
  return 85 + 170 * Math.ceil(w / 512) * Math.ceil(h / 512)
}

function audioTokens(base64: string, format: unknown): Tokens {
  const bytes = Math.floor((base64.length * 3) / 4)
  let seconds = bytes / MP3_BYTES_PER_SECOND
  if (format === 'wav') {
    const head = Buffer.from(base64.slice(0, 64), 'base64')
    // RIFF header: byte rate (bytes per second) is the little-endian uint32 at offset 28.
    const rate = head.length >= 32 && head.toString('latin1', 0, 4) === 'RIFF' ? head.readUInt32LE(28) : 0
    // The samples are the `data` chunk's bytes (its size at offset 40 in the canonical 44-byte header), not the file's.
    const data = head.length >= 44 && head.toString('latin1', 36, 40) === 'data' ? Math.min(head.readUInt32LE(40), bytes) : bytes
    seconds = rate > 0 ? data / rate : bytes / 48_000
  }
  return Math.ceil(seconds * AUDIO_TOKENS_PER_SECOND)
}

/**
 * Tool definitions, by the OpenAI cookbook's rules for functions: per function `funcInit` (7 for gpt-4o's encoding,
 * 10 for gpt-4 / gpt-3.5) plus `name:description`; 3 if it has properties, then per property 3 plus
 * `name:type:description` (an enum: −3, then 3 plus its text per item); 12 at the end. Tools that are not functions
 * count as their JSON text.
 */
export function toolsTokens(tools: unknown, count: CountText, funcInit: Tokens): Tokens {
  if (!Array.isArray(tools) || tools.length === 0) return 0
  let n = 12
  for (const tool of tools) {
    const f = isObject(tool) && tool.type === 'function' && isObject(tool.function) ? tool.function : undefined
    if (f === undefined) {
      n += count(JSON.stringify(tool))
      continue
    }
    n += funcInit
    const desc = typeof f.description === 'string' ? f.description.replace(/\.+$/, '') : ''
    n += count(`${typeof f.name === 'string' ? f.name : ''}:${desc}`)
    const params = isObject(f.parameters) ? f.parameters : undefined
    const props = params && isObject(params.properties) ? params.properties : undefined
    const keys = props ? Object.keys(props) : []
    if (props === undefined || keys.length === 0) continue
    n += 3
    for (const key of keys) {
      const p = isObject(props[key]) ? (props[key] as Record<string, unknown>) : {}
      n += 3
      if (Array.isArray(p.enum)) {
        n -= 3
        for (const item of p.enum) n += 3 + count(String(item))
      }
      const type = typeof p.type === 'string' ? p.type : JSON.stringify(p.type ?? '')
      const pdesc = typeof p.description === 'string' ? p.description : ''
      n += count(`${key}:${type}:${pdesc}`)
      // Nested schemas (objects, arrays of objects) are not in the cookbook's rule: their JSON counts as text.
      if (p.properties !== undefined || p.items !== undefined) n += count(JSON.stringify(p.properties ?? p.items))
    }
  }
  return n
}

/**
 * A `response_format` JSON schema (chat's, and the Responses API's `text.format` translated to it): providers put the
 * schema into the prompt (OpenAI renders it beside the system message for structured outputs) and bill it as input, so
 * it takes room as tool definitions do; uncounted, a large schema let a packed prompt overflow the window. How each
 * provider renders it is not published: it counts as the JSON text of `json_schema` (name, description, schema,
 * strict), as a tool that is not a function does, and the learned correction covers a provider that counts more.
 * `text` and `json_object` add no schema: 0.
 */
export function responseFormatTokens(format: unknown, count: CountText): Tokens {
  if (!isObject(format) || format.type !== 'json_schema' || !isObject(format.json_schema)) return 0
  return count(JSON.stringify(format.json_schema))
}
