/**
 * The Responses API's own clients, unchanged, against the gateway: the OpenAI Agents SDK (whose default model
 * provider speaks Responses, and which keeps state server-side through `previousResponseId` or a conversation) and
 * the Vercel AI SDK's responses model (`generateText`, and a `streamText` tool loop, store on by default, so it
 * sends earlier items back as `item_reference`s). The mock provider answers with a tool call while the conversation
 * does not end in a tool result, so a run that finishes means every prompt paired its calls. On every store engine
 * (LMDB, and PostgreSQL when the test cluster is there).
 */
import t from 'tap'
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool as agentTool } from '@openai/agents'
import { createOpenAI } from '@ai-sdk/openai'
import { generateText, stepCountIs, streamText, tool } from 'ai'
import { z } from 'zod'
import { KEY_A, PROVIDER_KEY, startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

type Sent = Array<{ role: string; content?: unknown }>
const userTexts = (h: Harness): string[] =>
  ((h.mock.lastChatBody()?.messages ?? []) as Sent).filter((m) => m.role === 'user').map((m) => String(m.content))

for (const engine of testableEngines(t, 'the Responses API clients')) {
  t.test(`${engine.name}: @openai/agents: a function tool run twice, chained by previousResponseId and by a conversation`, async (t) => {
    const h = await startHarness(t, { engine })
    setTracingDisabled(true)
    // A runner of this gateway's own, not the SDK's default: that one keeps the first client it was given, which is
    // the previous engine's closed gateway.
    const runner = new Runner({ modelProvider: new OpenAIProvider({ openAIClient: h.client(), useResponses: true }) })
    let calls = 0
    const weather = agentTool({
      name: 'get_weather',
      description: 'Weather for a city',
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        calls++
        return `Sunny in ${city}`
      },
    })
    const agent = new Agent({ name: 'Weather', instructions: 'Answer briefly.', model: 'openai/gpt-4o', tools: [weather] })

    const first = await runner.run(agent, 'My name is Ada. Weather in Paris?')
    t.equal(calls, 1, 'the tool ran once in the first turn')
    t.type(first.finalOutput, 'string')
    t.ok(first.lastResponseId?.startsWith('resp_'))
    const second = await runner.run(agent, 'And in Rome?', { previousResponseId: first.lastResponseId })
    t.equal(calls, 2, 'once more in the second turn')
    t.type(second.finalOutput, 'string')
    t.same(userTexts(h), ['My name is Ada. Weather in Paris?', 'And in Rome?'], 'the second turn carried the first')

    const conv = await h.client().conversations.create({})
    await runner.run(agent, 'I live in Oslo. Weather here?', { conversationId: conv.id })
    await runner.run(agent, 'What about tomorrow?', { conversationId: conv.id })
    t.equal(calls, 4)
    t.same(userTexts(h), ['I live in Oslo. Weather here?', 'What about tomorrow?'], 'the conversation carried its first turn')
    const items = await h.client().conversations.items.list(conv.id, { order: 'asc' })
    t.same(
      items.data.map((i) => i.type),
      ['message', 'function_call', 'function_call_output', 'message', 'message', 'function_call', 'function_call_output', 'message'],
      'each turn: the question, the call, its result, the answer',
    )
  })

  t.test(`${engine.name}: @ai-sdk/openai responses model: generateText, and a streamText tool loop to its answer`, async (t) => {
    const h = await startHarness(t, { engine })
    const openai = createOpenAI({ baseURL: `${h.gw.url}/api/v1`, apiKey: PROVIDER_KEY, headers: { serviceKey: KEY_A } })
    h.mock.setDefault({ reply: 'Plain answer.' })
    const plain = await generateText({ model: openai.responses('openai/gpt-4o'), prompt: 'Say something.' })
    t.equal(plain.text, 'Plain answer.')
    t.ok(plain.usage.inputTokens !== undefined && plain.usage.inputTokens > 0)

    h.mock.setDefault({})
    const seen: string[] = []
    const result = streamText({
      model: openai.responses('openai/gpt-4o'),
      prompt: 'Weather in Lisbon?',
      tools: {
        get_weather: tool({
          description: 'Weather for a city',
          inputSchema: z.object({ city: z.string() }),
          execute: async ({ city }) => {
            seen.push(city)
            return { sky: 'clear' }
          },
        }),
      },
      stopWhen: stepCountIs(4),
    })
    const text = await result.text
    t.equal(seen.length, 1, 'the tool ran once')
    t.ok(text.length > 0, 'the loop ended with an answer')
    const steps = await result.steps
    t.equal(steps.length, 2)
    t.equal(steps.at(-1)?.finishReason, 'stop')
  })
}
