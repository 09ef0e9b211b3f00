/**
 * The agent frameworks people build on, unchanged, against the gateway: the Vercel AI SDK's `streamText` tool loop
 * (it resends the whole conversation on every step) and LangChain's `bindTools` round trip, each with a session. The
 * mock provider answers with a tool call while the conversation does not end in a tool result and refuses a
 * conversation that breaks OpenAI's pairing rule, so a loop that finishes means every prompt was valid. On every
 * store engine (LMDB, and PostgreSQL when the test cluster is there).
 */
import t from 'tap'
import { streamText, tool, stepCountIs } from 'ai'
import { createOpenAICompatible } from '@ai-sdk/openai-compatible'
import { ChatOpenAI } from '@langchain/openai'
import { HumanMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages'
import { z } from 'zod'
import { KEY_A, PROVIDER_KEY, startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

type Stored = Array<{ role: string; content: unknown; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>; tool_call_id?: string }>

async function storedSession(h: Harness, id: string): Promise<Stored> {
  const r = await h.fetch(`/api/v1/sessions/${encodeURIComponent(id)}`)
  return ((await r.json()) as { messages: Stored }).messages
}

for (const engine of testableEngines(t, 'agent frameworks')) {
  t.test(`${engine.name}: Vercel AI SDK: a streamText tool loop runs to its answer, with a session, every message sent once`, async (t) => {
    const h = await startHarness(t, { engine })
    const recallgate = createOpenAICompatible({
      name: 'recallgate',
      baseURL: `${h.gw.url}/api/v1`,
      apiKey: PROVIDER_KEY,
      headers: { serviceKey: KEY_A, 'x-session-id': 'vercel-loop' },
    })
    const seen: string[] = []
    const result = streamText({
      model: recallgate('openai/gpt-4o'),
      messages: [{ role: 'user', content: 'What is the weather in Berlin?' }],
      tools: {
        get_weather: tool({
          description: 'Current weather in a city',
          inputSchema: z.object({ city: z.string() }),
          execute: async ({ city }) => {
            seen.push(city)
            return { city, celsius: 11 }
          },
        }),
      },
      stopWhen: stepCountIs(4),
    })
    const text = await result.text
    const steps = await result.steps
    t.equal(steps.length, 2, 'a tool step, then the answer')
    t.equal(seen.length, 1, 'the tool ran once')
    t.match(text, /Echo: What is the weather in Berlin\?/)

    // Step two resent the question and the call: recognised as the session's own, not sent twice.
    const second = h.mock.lastChatBody()?.messages as Array<{ role: string }>
    t.same(second.map((m) => m.role), ['user', 'assistant', 'tool'])
    const stored = await storedSession(h, 'vercel-loop')
    t.same(stored.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant'])
    t.equal(stored[1]?.tool_calls?.[0]?.function.name, 'get_weather')
    t.equal(stored[2]?.tool_call_id, stored[1]?.tool_calls?.[0]?.id)
  })

  t.test(`${engine.name}: LangChain: bindTools round trip in a session, the whole history resent each time`, async (t) => {
    const h = await startHarness(t, { engine })
    const model = new ChatOpenAI({
      model: 'openai/gpt-4o',
      apiKey: PROVIDER_KEY,
      maxRetries: 0,
      configuration: { baseURL: `${h.gw.url}/api/v1`, defaultHeaders: { serviceKey: KEY_A, 'x-session-id': 'lc' } },
    })
    const withTools = model.bindTools([
      {
        type: 'function',
        function: {
          name: 'lookup_order',
          description: 'Find an order by its number',
          parameters: { type: 'object', properties: { order: { type: 'string' } }, required: ['order'] },
        },
      },
    ])
    const history: BaseMessage[] = [new HumanMessage('Where is order 42?')]
    const call = await withTools.invoke(history)
    t.equal(call.tool_calls?.length, 1)
    history.push(call, new ToolMessage({ tool_call_id: call.tool_calls?.[0]?.id ?? '', content: 'shipped yesterday' }))
    const answer = await withTools.invoke(history)
    t.match(String(answer.content), /Echo: Where is order 42\?/)
    const sent = h.mock.lastChatBody()?.messages as Array<{ role: string }>
    t.same(sent.map((m) => m.role), ['user', 'assistant', 'tool'], 'each message once')

    history.push(answer, new HumanMessage('Thanks!'))
    await model.invoke(history)
    const stored = await storedSession(h, 'lc')
    t.same(stored.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant', 'user', 'assistant'])
  })
}
