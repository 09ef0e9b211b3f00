/**
 * OpenRouter's SSE stream as the mock sends it: `: OPENROUTER PROCESSING` keep-alive comments, a role chunk, content
 * chunks, a stop chunk, a usage-only chunk (`choices: []`), `data: [DONE]`; and the behaviours that break it
 * (a mid-stream error event with a top-level `error` and `finish_reason: "error"`, a choice that finishes with
 * `error` and no error event, hangs, resets, invalid SSE).
 */
import type { ServerResponse } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { encode } from 'gpt-tokenizer'
import { splitCodePoints } from './content.js'
import { textLogprobs, type Generation } from './openrouter-json.js'
import { dropAfterFlush } from './response-writer.js'
import type { Json, MockBehaviour } from './types.js'

export async function streamReply(
  res: ServerResponse,
  r: Generation,
  b: MockBehaviour,
  send: (text: string) => Promise<void>,
  signal: AbortSignal,
): Promise<void> {
  const nl = b.crlf ? '\r\n' : '\n'
  const frame = (json: Json) => `data: ${JSON.stringify(json)}${nl}${nl}`
  const chunk = (choices: Json[], extra: Json = {}) =>
    frame({ ...r.head, object: 'chat.completion.chunk', ...extra, choices })
  const delta = (d: Json, finish: string | null) => [
    { index: 0, delta: d, finish_reason: finish, native_finish_reason: finish, logprobs: null },
  ]
  // The last content chunk: `stop` (or `tool_calls`), or `error` for choiceError, with no error event beside it.
  const ce = b.choiceError
  const finishing = (d: Json, finish: string) => {
    if (ce === undefined) return chunk(delta(d, finish))
    const choices = delta(d, ce.finishReason ?? 'error')
    if (ce.inChoice === true) Object.assign(choices[0] as Json, { error: { code: ce.code ?? 502, message: ce.message ?? 'Provider disconnected unexpectedly' } })
    return chunk(choices)
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-generation-id': r.head.id })
  for (let i = 0; i < (b.keepAliveComments ?? 1); i++) await send(`: OPENROUTER PROCESSING${nl}${nl}`)
  if (b.invalidSse) {
    await send(`data: {"id": "${r.head.id}", "choices": [{${nl}${nl}not an event stream${nl}data: <html>${nl}${nl}`)
    return void res.end()
  }
  await send(chunk(delta({ role: 'assistant', content: '' }, null)))
  if (r.toolCalls) {
    // As OpenAI streams them: the first fragment of a call carries id, type, name and empty arguments; then pieces of
    // the arguments by index.
    for (const [index, c] of r.toolCalls.entries()) {
      const first = { index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }
      await send(chunk(delta({ role: 'assistant', content: null, tool_calls: [first] }, null)))
      for (const piece of splitCodePoints(c.arguments, b.chunkChars ?? 4))
        await send(chunk(delta({ tool_calls: [{ index, function: { arguments: piece } }] }, null)))
    }
    await send(finishing({}, 'tool_calls'))
    if (b.usage !== false) await send(chunk([], { usage: r.usage }))
    await send(`data: [DONE]${nl}${nl}`)
    return void res.end()
  }
  const pieces = splitCodePoints(r.text, b.chunkChars ?? 4)
  const cut = b.midStreamError?.afterChunks ?? ce?.afterChunks
  const stopAt = cut === undefined ? pieces.length : Math.min(cut, pieces.length)
  for (let i = 0; i < Math.max(1, stopAt); i++) {
    const piece = pieces[i]
    if (piece !== undefined && i < stopAt) {
      const choices = delta({ role: 'assistant', content: piece }, null)
      if (r.logprobs === true) Object.assign(choices[0] as Json, { logprobs: textLogprobs([piece]) })
      await send(chunk(choices))
    }
    // The mid-stream point: after the first content chunk (after the role chunk when there is none).
    if (i === 0 && b.hang === 'mid-stream') return
    if (i === 0 && b.reset === 'mid-stream') return dropAfterFlush(res, signal)
    if (piece === undefined || i >= stopAt) break
    const delay = (b.tokensPerSecond ? (1000 * encode(piece).length) / b.tokensPerSecond : (b.interChunkDelayMs ?? 0)) + (i === 0 ? (b.firstTokenGapMs ?? 0) : 0)
    if (delay) await sleep(delay, undefined, { signal })
  }
  if (b.midStreamError) {
    const { code = 502, message = 'Provider disconnected unexpectedly' } = b.midStreamError
    const choices = [{ index: 0, delta: { content: '' }, finish_reason: 'error', native_finish_reason: 'error' }]
    await send(chunk(choices, { error: { code, message } }))
    return void res.end()
  }
  await send(finishing({ role: 'assistant', content: '' }, 'stop'))
  if (b.usage !== false) await send(chunk([], { usage: r.usage }))
  await send(`data: [DONE]${nl}${nl}`)
  res.end()
}
