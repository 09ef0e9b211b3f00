/**
 * OpenAI's "upload, then refer to the file" flow through the gateway: `files.create`, then a Chat `file` part or a
 * Responses `input_file` naming the file by id. The provider cannot resolve our ids, so the model must get the file's
 * text; an id that is not the caller's is a 400 naming the part; a file the window cannot hold is refused before it
 * is read. On every store engine.
 */
import t, { type Test } from 'tap'
import OpenAI, { toFile } from 'openai'
import { KEY_A, KEY_B, startHarness, type Harness } from './helpers/harness.js'
import { testableEngines } from './helpers/store-engines.js'

t.setTimeout(240_000)

/** Paragraphs long enough to make several chunks, each sentence its own (so a stitching mistake shows). */
function longText(paragraphs: number): string {
  return Array.from({ length: paragraphs }, (_, p) =>
    Array.from({ length: 6 }, (_, s) => `Paragraph ${p} sentence ${s} records that valve ${p * 10 + s} was inspected on day ${p + s}.`).join(' '),
  ).join('\n\n')
}

async function upload(h: Harness, filename: string, content: string, key = KEY_A): Promise<{ id: string; chunks: number }> {
  const file = await h.client(key).files.create({ file: await toFile(Buffer.from(content), filename, { type: 'text/plain' }), purpose: 'user_data' })
  return file as unknown as { id: string; chunks: number }
}

/** Chat completions the upstream was asked for (the model list is fetched too). */
function chatCalls(h: Harness): number {
  return h.mock.requests.filter((r) => r.path.endsWith('/chat/completions')).length
}

/** The text of every part the upstream was sent, message by message. */
function sentTexts(h: Harness): string[] {
  const messages = (h.mock.lastChatBody()?.messages ?? []) as Array<{ content: unknown }>
  return messages.map((m) =>
    typeof m.content === 'string' ? m.content : Array.isArray(m.content) ? (m.content as Array<{ text?: string }>).map((p) => p.text ?? JSON.stringify(p)).join('\n') : '',
  )
}

for (const engine of testableEngines(t, 'file inputs')) {
  const start = async (t: Test): Promise<Harness> => startHarness(t, { engine })

  t.test(`${engine.name}: a Chat file part naming an uploaded file sends the file's whole text, fenced, with its name`, async (t) => {
    const h = await start(t)
    const content = longText(30)
    const file = await upload(h, 'valves.txt', content)
    t.ok(file.chunks > 3, `several chunks (${file.chunks}), so the text is stitched back from overlapping ones`)
    const res = await h.client().chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Which valve was inspected last?' }, { type: 'file', file: { file_id: file.id } }] }],
      // @ts-expect-error recallgate's extension
      useRAG: false,
    })
    t.ok(res.choices[0]?.message.content, 'answered')
    const body = h.mock.lastChatBody() as { messages: Array<{ content: Array<{ type: string; text?: string; file?: unknown }> }> }
    const parts = body.messages.at(-1)?.content ?? []
    t.same(parts.map((p) => p.type), ['text', 'text'], 'the file part went upstream as text, nothing named by id')
    const text = parts[1]?.text ?? ''
    t.match(text, /^The file "valves\.txt" \(file-[^)]+\), quoted:\n```\n/, 'named, and fenced as quoted data')
    t.ok(text.includes(content), 'the whole text, every sentence once and in order')
    t.equal(text.split('Paragraph 17 sentence 3 ').length, 2, 'no overlap repeated')
  })

  t.test(`${engine.name}: a file quoted whole is not retrieved again in pieces; another file still is`, async (t) => {
    const h = await start(t)
    const pump = await upload(h, 'pump.txt', 'The pump in hall B runs at 1,450 rpm and is serviced every March.')
    const ask = async (content: Array<Record<string, unknown>>) => {
      const res = await h.client().chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: content as never }] })
      return { rag: (res as unknown as { _metadata: { rag: { reason: string | null; query: string | null; sources: Array<{ filename: string }> } } })._metadata.rag, sent: sentTexts(h).join('\n') }
    }
    const question = { type: 'text', text: 'How fast does the pump in hall B run, and when is it serviced?' }
    const alone = await ask([question])
    t.same(alone.rag.sources.map((s) => s.filename), ['pump.txt'], 'asked alone, the pump file is retrieved')
    const quoted = await ask([question, { type: 'file', file: { file_id: pump.id } }])
    t.equal(quoted.rag.reason, 'in_prompt', '_metadata says why nothing was retrieved')
    t.equal(quoted.rag.query, question.text, 'the search is for the question, not for the quoted file')
    t.same(quoted.rag.sources, [])
    t.equal(quoted.sent.split('1,450 rpm').length, 2, 'the text is in the prompt once')
    await upload(h, 'hall.txt', 'How fast the pump in hall B runs is logged when it is serviced by the night shift.')
    const both = await ask([question, { type: 'file', file: { file_id: pump.id } }])
    t.same(both.rag.sources.map((s) => s.filename), ['hall.txt'], `the other file is still retrieved ${JSON.stringify(both.rag)}`)
  })

  t.test(`${engine.name}: a file an earlier turn quoted, still in the history sent, is not retrieved again in pieces`, async (t) => {
    const h = await start(t)
    const pump = await upload(h, 'pump.txt', 'The pump in hall B runs at 1,450 rpm and is serviced every March.')
    const client = h.client()
    await client.chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Keep this for later.' }, { type: 'file', file: { file_id: pump.id } }] }],
      // @ts-expect-error recallgate's extensions
      sessionId: 'pump-2',
    })
    const res = await client.chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [{ role: 'user', content: 'How fast does the pump in hall B run, and when is it serviced?' }],
      // @ts-expect-error recallgate's extensions
      sessionId: 'pump-2',
    })
    const rag = (res as unknown as { _metadata: { rag: { reason: string | null; sources: unknown[]; resultsFound: number } } })._metadata.rag
    t.ok(rag.resultsFound > 0, 'the search found the file')
    t.equal(rag.reason, 'in_prompt', 'and left it out: the history quotes it whole')
    t.notOk(sentTexts(h).some((m) => m.startsWith("Excerpts from the user's files")), 'no excerpts block: the file is not quoted twice')
  })

  t.test(`${engine.name}: a session keeps the file's text, so a later turn still has it after the file is deleted`, async (t) => {
    const h = await start(t)
    const file = await upload(h, 'pump.txt', 'The pump in hall B runs at 1,450 rpm.')
    const client = h.client()
    await client.chat.completions.create({
      model: 'openai/gpt-4o',
      messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: file.id } }, { type: 'text', text: 'Note this.' }] }],
      // @ts-expect-error recallgate's extensions
      sessionId: 'pump-1',
      useRAG: false,
    })
    await client.files.delete(file.id)
    // @ts-expect-error recallgate's extensions
    await client.chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'How fast does it run?' }], sessionId: 'pump-1', useRAG: false })
    t.ok(sentTexts(h).some((m) => m.includes('1,450 rpm')), 'the history sent upstream holds the text')
  })

  t.test(`${engine.name}: an id that is not one of the caller's files is a 400 naming the part, and nothing goes upstream`, async (t) => {
    const h = await start(t)
    const theirs = await upload(h, 'secret.txt', 'Tenant B keeps its launch codes here.', KEY_B)
    for (const id of ['file-does-not-exist', theirs.id]) {
      const before = chatCalls(h)
      const err = await h
        .client()
        .chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: [{ type: 'text', text: 'read it' }, { type: 'file', file: { file_id: id } }] }] })
        .catch((e: unknown) => e)
      t.ok(err instanceof OpenAI.BadRequestError, `${id}: 400`)
      t.match(err, { code: 'invalid_parameter', param: 'messages[0].content[1].file.file_id', message: /No file with id/ })
      t.equal(chatCalls(h), before, 'the upstream was not called')
    }
  })

  t.test(`${engine.name}: a file larger than the model's window is refused before it is read`, async (t) => {
    const h = await start(t)
    const file = await upload(h, 'big.txt', longText(200))
    const err = await h
      .client()
      .chat.completions.create({ model: 'test/tiny', messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: file.id } }] }] })
      .catch((e: unknown) => e)
    t.match(err, { status: 400, code: 'context_length_exceeded', param: 'messages[0].content[0].file.file_id', message: /search it instead/ })

    // Two files, each within the window, together over it: the second is refused before it is read.
    const a = await upload(h, 'a.txt', longText(20))
    const b = await upload(h, 'b.txt', longText(20))
    const both = await h
      .client()
      .chat.completions.create({ model: 'test/tiny', messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: a.id } }, { type: 'file', file: { file_id: b.id } }] }] })
      .catch((e: unknown) => e)
    t.match(both, { status: 400, code: 'context_length_exceeded', param: 'messages[0].content[1].file.file_id', message: /with the files named before it/ })
    // One file named over and over: each naming counts (read once, but each would be sent).
    const many = await h
      .client()
      .chat.completions.create({ model: 'test/tiny', messages: [{ role: 'user', content: Array.from({ length: 500 }, () => ({ type: 'file' as const, file: { file_id: a.id } })) }] })
      .catch((e: unknown) => e)
    t.match(many, { status: 400, code: 'context_length_exceeded', param: 'messages[0].content[1].file.file_id' })
  })

  t.test(`${engine.name}: Responses input_file by file_id: the text goes upstream, input_items shows the part as sent, a chained turn still has it`, async (t) => {
    const h = await start(t)
    const file = await upload(h, 'boiler.txt', 'The boiler pressure in building 7 must stay under 1.4 bar.')
    const client = h.client()
    const first = await client.responses.create({
      model: 'openai/gpt-4o',
      input: [{ role: 'user', content: [{ type: 'input_file', file_id: file.id }, { type: 'input_text', text: 'What is the limit?' }] }],
    })
    t.equal(first.status, 'completed')
    t.ok(sentTexts(h).some((m) => m.includes('under 1.4 bar') && m.includes('"boiler.txt"')), 'the file text went upstream')
    const items = await client.responses.inputItems.list(first.id)
    t.match(items.data[0], { type: 'message', content: [{ type: 'input_file', file_id: file.id }, { type: 'input_text' }] }, 'listed as sent')
    await client.responses.create({ model: 'openai/gpt-4o', previous_response_id: first.id, input: 'And in building 8?' })
    t.ok(sentTexts(h).some((m) => m.includes('under 1.4 bar')), 'the chain replays the text')

    const err = await client.responses
      .create({ model: 'openai/gpt-4o', input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }, { type: 'input_file', file_id: 'file-nope' }] }] })
      .catch((e: unknown) => e)
    t.match(err, { status: 400, code: 'invalid_parameter', param: 'input[0].content[1].file_id' })
  })

  t.test(`${engine.name}: a conversation item naming a file keeps its text for later responses and lists as the file`, async (t) => {
    const h = await start(t)
    const file = await upload(h, 'chiller.txt', 'The chiller on roof C is flushed every 90 days.')
    const client = h.client()
    const conversation = await client.conversations.create({
      items: [{ type: 'message', role: 'user', content: [{ type: 'input_file', file_id: file.id }, { type: 'input_text', text: 'Keep this in mind.' }] }],
    })
    const listed = await client.conversations.items.list(conversation.id)
    t.match(listed.data[0], { type: 'message', role: 'user', content: [{ type: 'input_file', file_id: file.id, filename: 'chiller.txt' }, { type: 'input_text', text: 'Keep this in mind.' }] }, 'listed as the file, as sent')
    t.notOk(JSON.stringify(listed.data).includes('90 days'), 'the listing does not spell out the file')
    await client.conversations.items.create(conversation.id, {
      items: [{ type: 'message', role: 'user', content: [{ type: 'input_file', file_id: file.id }] }],
    })
    const calls = chatCalls(h)
    await client.responses.create({ model: 'openai/gpt-4o', conversation: conversation.id, input: 'How often is the chiller flushed?' })
    t.equal(chatCalls(h), calls + 1)
    const sent = sentTexts(h)
    t.equal(sent.filter((m) => m.includes('flushed every 90 days') && m.includes('"chiller.txt"')).length, 2, 'both turns carry the text upstream')
    t.notOk(JSON.stringify(h.mock.lastChatBody()).includes('"file_id"'), 'no id the provider cannot resolve went upstream')

    const before = (await client.conversations.items.list(conversation.id)).data.length
    const err = await client.conversations.items
      .create(conversation.id, { items: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }, { type: 'input_file', file_id: 'file-nope' }] }] })
      .catch((e: unknown) => e)
    t.match(err, { status: 400, code: 'invalid_parameter', param: 'items[0].content[1].file_id' })
    t.equal((await client.conversations.items.list(conversation.id)).data.length, before, 'nothing added')
    const other = await h
      .client(KEY_B)
      .conversations.create({ items: [{ type: 'message', role: 'user', content: [{ type: 'input_file', file_id: file.id }] }] })
      .catch((e: unknown) => e)
    t.match(other, { status: 400, param: 'items[0].content[0].file_id' }, "another tenant's file is not found")

    // No model is named when items are added: the bound is the largest window the upstream lists (200,000 here), not
    // DEFAULT_CONTEXT_LENGTH (8,192), so a file the default would refuse is kept, and one named past it is not.
    const big = await upload(h, 'big.txt', longText(200))
    const named = (n: number) => [{ type: 'message' as const, role: 'user' as const, content: Array.from({ length: n }, () => ({ type: 'input_file' as const, file_id: big.id })) }]
    const kept = await client.conversations.create({ items: named(1) })
    t.match((await client.conversations.items.list(kept.id)).data[0], { content: [{ type: 'input_file', file_id: big.id }] }, 'a file larger than the default window is kept')
    const over = await client.conversations.create({ items: named(20) }).catch((e: unknown) => e)
    t.match(over, { status: 400, code: 'context_length_exceeded', param: /^items\[0\]\.content\[\d+\]\.file_id$/ })
  })
}

t.test('files.content: the text extracted from a file, stitched whole from its chunks; 404 for another tenant', async (t) => {
  const h = await startHarness(t)
  const content = longText(400)
  const file = await upload(h, 'valves.txt', content)
  t.ok(file.chunks > 256, `more chunks (${file.chunks}) than one batch of the reader`)
  const res = await h.client().files.content(file.id)
  t.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8')
  t.equal(await res.text(), content, 'the text as uploaded (a plain text file is its own extracted text)')
  const other = await h.client(KEY_B).files.content(file.id).catch((e: unknown) => e)
  t.match(other, { status: 404 })
})
