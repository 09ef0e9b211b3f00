/**
 * Token counting over gpt-tokenizer's encodings: the one place that knows which encoding a model uses, how a chat is
 * framed, how much of a window to trust for vendors whose tokenizer we do not have, and what the upstream has taught
 * us about our counts.
 *
 * Exactness: for OpenAI models `chatTokens` equals gpt-tokenizer's `encodeChat(...).length` for the same encoding and
 * chat format. encodeChat encodes every message's content on its own and frames it with fixed special tokens, so a
 * chat's count is additive: `chatOverhead + Σ (perMessage + contentTokens)`. That is what lets history be counted
 * from the content counts stored at write time instead of re-tokenizing it on every request. The framing is the
 * library's (`scheme` below, checked against `encodeChat` by the tests). User text may contain `<|endoftext|>`,
 * `<|im_start|>` and friends: they are plain text to us (that is also what the provider does with them in message
 * content), never special tokens and never a reason to throw.
 *
 * Other vendors tokenize differently; their counts are o200k estimates, made safe by a per-vendor share of the window
 * kept free (`margins`) and by a learned per-model correction from the upstream's reported `prompt_tokens`.
 */
import { LRUCache } from 'lru-cache'
import { CL100K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants'
import type { ChatMessage, Role, Tokens } from '../types.js'
import { contentTokens, responseFormatTokens, toolsTokens, type MediaEstimates } from './message-tokens.js'
import { boundedCount } from './bounded-count.js'
import { countO200k, pieceCounter } from './token-count.js'
import { rankTable, splitCounter } from './bpe-ranks.js'

export type EncodingName = 'o200k_base' | 'cl100k_base'

/** Encoding of the content token counts stored with every message (and chunk). */
export const STORED_ENCODING: EncodingName = 'o200k_base'

/** How one family of models turns a chat into tokens. */
interface Scheme {
  readonly encoding: EncodingName
  /** The gpt-tokenizer chat model whose format this is (what `chatTokens` is checked against). */
  readonly referenceModel: 'gpt-4o' | 'gpt-4' | 'gpt-3.5-turbo'
  readonly count: (text: string) => Tokens
  /** Tokens each message adds besides its content: the same for every role in these formats. */
  readonly perMessage: Tokens
  readonly overhead: Tokens
}

/**
 * A scheme of the reference model's chat format: `overhead` tokens for the chat (the reply's start) and `perMessage`
 * for each message besides its content, as gpt-tokenizer's `encodeChat` frames it. gpt-4o / gpt-4:
 * <|im_start|>role<|im_sep|>content<|im_end|>, 4 a message and 3 for the chat; gpt-3.5 puts newlines in place of
 * <|im_sep|> and after <|im_end|>, one more a message. Written here, not measured from the library at load as before:
 * measuring loaded the library's encoders on the main thread, whose tables stayed on its heap (bpe-ranks.ts says what
 * that cost). test/tokenizer.test.ts measures them from `encodeChat` and fails if the library frames otherwise.
 */
function scheme(encoding: EncodingName, referenceModel: Scheme['referenceModel'], count: (text: string) => Tokens, overhead: Tokens, perMessage: Tokens): Scheme {
  return { encoding, referenceModel, count, perMessage, overhead }
}

// o200k content is counted through the cache of pieces (token-count.ts, equal to the library's count): a request's
// words have mostly been seen before, and counting the messages was the largest library cost of a plain relay.
const O200K = scheme('o200k_base', 'gpt-4o', countO200k, 3, 4)
// cl100k content the same way, through our own merge over cl100k's ranks (bpe-ranks.ts, built the first time a cl100k
// model is counted). cl100k's pre-tokenizer never puts a non-space character and a following space in one pre-token
// either (its patterns take a space only in front), so the pieces' counts add up; the property test in
// test/tokenizer.test.ts holds the count equal to the library's.
const cl100kBpe = splitCounter('cl100k_base', CL100K_TOKEN_SPLIT_REGEX)
const countCl100k = pieceCounter({ count: (text) => boundedCount(text, cl100kBpe), maxEntries: 200_000, maxPieceLength: 32 })
const CL100K = scheme('cl100k_base', 'gpt-4', countCl100k, 3, 4)
const CL100K_GPT35 = scheme('cl100k_base', 'gpt-3.5-turbo', countCl100k, 3, 5)

/** OpenAI ids that predate o200k (gpt-tokenizer's cl100k list, as prefixes so dated and `:variant` ids match too). */
const CL100K_IDS = /^(?:gpt-3\.5|gpt-4(?=$|[-:@])|text-embedding-(?:3|ada)|babbage-002|davinci-002)/
const GPT35_IDS = /^gpt-3\.5/

/** Learned ratios outside this range are clamped: one odd upstream report must not wreck every later budget. */
const MIN_RATIO = 0.5
const MAX_RATIO = 2
/** Weight of a new observation in the per-model moving average. */
const EMA_ALPHA = 0.1
/**
 * Prompts smaller than this are not learned from: with a few tokens of content, framing conventions (OpenAI counts 3
 * per message, encodeChat 4) dominate the ratio and say nothing about the vendor's tokenizer.
 */
const MIN_OBSERVED: Tokens = 64

interface ModelInfo {
  readonly scheme: Scheme
  readonly margin: number
}

export interface TokenCounterOptions {
  /**
   * Share of the window kept free per vendor prefix (`anthropic` → 0.15); `*` applies to every other vendor and to
   * ids without a vendor. A missing `*` means 0. Values must be in [0, 1).
   */
  margins: Record<string, number>
  /** Distinct model ids whose resolution and learned correction are kept (least recently used evicted). Default 1000.
   */
  maxModels?: number
  /** Tokens counted for media whose size cannot be read from the request (see message-tokens.ts). */
  media?: Partial<MediaEstimates>
}

export class TokenCounter {
  readonly #margins: ReadonlyMap<string, number>
  readonly #defaultMargin: number
  /** Model ids arrive from clients, so both maps are bounded. */
  readonly #models: LRUCache<string, ModelInfo>
  readonly #ratios: LRUCache<string, number>
  /**
   * History is stored with o200k counts; a cl100k model needs its own. Keyed by the message object so it lives exactly
   * as long as the history entry that holds it (the session repository caches those), with no bound of its own to
   * manage.
   */
  readonly #cl100kCounts = new WeakMap<object, Tokens>()
  readonly #media: MediaEstimates

  constructor(opts: TokenCounterOptions) {
    const margins = new Map<string, number>()
    for (const [vendor, share] of Object.entries(opts.margins)) {
      if (!(share >= 0 && share < 1)) throw new RangeError(`margin for "${vendor}" must be in [0, 1), got ${share}`)
      margins.set(vendor, share)
    }
    this.#margins = margins
    this.#defaultMargin = margins.get('*') ?? 0
    const max = opts.maxModels ?? 1000
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxModels must be a positive integer, got ${max}`)
    this.#models = new LRUCache({ max })
    this.#ratios = new LRUCache({ max })
    this.#media = { image: opts.media?.image ?? 765, file: opts.media?.file ?? 1000 }
  }

  /**
   * Builds the stored encoding's rank table now (≈ 0.2 s, bpe-ranks.ts), so that the first request counted does not
   * wait for it. The gateway calls it while starting; cl100k's is built the first time a cl100k model is counted.
   */
  load(): void {
    rankTable(STORED_ENCODING)
  }

  /** Which encoding a model id maps to (an `openai/` prefix is ignored; every other vendor gets o200k). */
  encodingFor(model: string): EncodingName {
    return this.#info(model).scheme.encoding
  }

  /** Content-only count; `model` picks the encoding (o200k, the stored encoding, when omitted). */
  textTokens(text: string, model?: string): Tokens {
    return (model === undefined ? O200K : this.#info(model).scheme).count(text)
  }

  /**
   * Tokens one message adds to a chat: the per-message framing for this model's chat format plus everything the
   * message carries (message-tokens.ts). For a plain string message this is exactly what encodeChat counts.
   */
  messageTokens(m: ChatMessage, model: string): Tokens {
    const s = this.#info(model).scheme
    return s.perMessage + contentTokens(m, s.count, this.#media)
  }

  /** A message's tokens without framing, in the stored encoding (o200k): stored with each saved message. */
  storedContentTokens(m: ChatMessage): Tokens {
    return contentTokens(m, O200K.count, this.#media)
  }

  /** Same as messageTokens, from an already known content count (same encoding as the model's): no tokenizing. */
  messageTokensFromContent(contentTokens: Tokens, model: string): Tokens {
    return this.#info(model).scheme.perMessage + contentTokens
  }

  /**
   * A stored message's tokens for this model, from the count stored at write time (o200k). Only for the older
   * cl100k OpenAI models is the message counted again (once per message object).
   */
  storedMessageTokens(m: { role: Role; message: ChatMessage; tokens: Tokens }, model: string): Tokens {
    const s = this.#info(model).scheme
    if (s.encoding === STORED_ENCODING) return s.perMessage + m.tokens
    let content = this.#cl100kCounts.get(m)
    if (content === undefined) {
      content = contentTokens(m.message, s.count, this.#media)
      this.#cl100kCounts.set(m, content)
    }
    return s.perMessage + content
  }

  /**
   * Tokens the request's tool definitions add to the prompt (OpenAI cookbook's rules for function definitions; 0
   * without tools). `functions`, the deprecated parameter, holds the same function definitions and is counted alike.
   */
  toolsTokens(tools: unknown, model: string, functions?: unknown): Tokens {
    const s = this.#info(model).scheme
    const given: readonly unknown[] = Array.isArray(tools) ? tools : []
    const all = Array.isArray(functions) && functions.length > 0
      ? [...given, ...functions.map((f: unknown) => ({ type: 'function', function: f }))]
      : tools
    return toolsTokens(all, s.count, s.encoding === 'o200k_base' ? 7 : 10)
  }

  /**
   * Tokens the request's `response_format` JSON schema adds to the prompt (0 without one). With `toolsTokens`, what a
   * request adds besides its messages: the packer's `extraTokens`.
   */
  responseFormatTokens(format: unknown, model: string): Tokens {
    return responseFormatTokens(format, this.#info(model).scheme.count)
  }

  /** Added once per chat: the reply priming (`<|im_start|>assistant<|im_sep|>`). */
  chatOverhead(model: string): Tokens {
    return this.#info(model).scheme.overhead
  }

  /** Exact count of a whole chat as encodeChat counts it for this model's encoding and chat format. */
  chatTokens(messages: readonly ChatMessage[], model: string): Tokens {
    const s = this.#info(model).scheme
    let total = s.overhead
    for (const m of messages) total += s.perMessage + contentTokens(m, s.count, this.#media)
    return total
  }

  /**
   * The part of `window` the packer may fill for this model: the vendor's margin is kept free, and when the upstream
   * has reported more prompt tokens than we counted (ratio r > 1) the budget shrinks to window / r if that is
   * smaller. The margin is the configured floor of safety; learning only ever tightens it.
   */
  usableWindow(model: string, window: Tokens): Tokens {
    const { margin } = this.#info(model)
    const ratio = Math.max(1, this.#ratios.get(model) ?? 1)
    return Math.max(0, Math.floor(window * Math.min(1 - margin, 1 / ratio)))
  }

  /**
   * Learn from the upstream's `usage.prompt_tokens` (`reported`) for a prompt we counted as `counted`. Keeps a
   * per-model moving average of reported / counted, clamped to [0.5, 2]; prompts under 64 tokens and nonsense
   * values are ignored.
   */
  observe(model: string, counted: Tokens, reported: Tokens): void {
    if (!Number.isFinite(counted) || !Number.isFinite(reported) || counted < MIN_OBSERVED || reported <= 0) return
    const ratio = Math.min(MAX_RATIO, Math.max(MIN_RATIO, reported / counted))
    const previous = this.#ratios.get(model)
    this.#ratios.set(model, previous === undefined ? ratio : previous + EMA_ALPHA * (ratio - previous))
  }

  /** Learned reported/counted ratios by model id (for metrics). */
  corrections(): ReadonlyMap<string, number> {
    return new Map(this.#ratios.entries())
  }

  /** Margin share for a model's vendor (exposed for metrics and docs). */
  marginFor(model: string): number {
    return this.#info(model).margin
  }

  #info(model: string): ModelInfo {
    let info = this.#models.get(model)
    if (info === undefined) {
      info = this.#resolve(model)
      this.#models.set(model, info)
    }
    return info
  }

  #resolve(model: string): ModelInfo {
    const slash = model.indexOf('/')
    const vendor = slash === -1 ? undefined : model.slice(0, slash)
    const margin = (vendor === undefined ? undefined : this.#margins.get(vendor)) ?? this.#defaultMargin
    // Only OpenAI ids (with their vendor prefix, or bare) can name an older encoding; everything else is o200k.
    const id = vendor === undefined ? model : vendor === 'openai' ? model.slice(slash + 1) : undefined
    let s = O200K
    if (id !== undefined && CL100K_IDS.test(id)) s = GPT35_IDS.test(id) ? CL100K_GPT35 : CL100K
    return { scheme: s, margin }
  }
}
