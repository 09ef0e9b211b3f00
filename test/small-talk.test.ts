/**
 * Turns that ask nothing (src/chat/small-talk.ts): greetings, thanks and acknowledgements are recognised, so nothing is
 * retrieved or recalled for them; questions, however short, are not. The list below was written for this test (issue
 * 24 asks for at least 50 such turns), not taken from shared/data; the questions include SQuAD's and LoCoMo's shortest.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { asksNothing } from '../src/chat/small-talk.js'

export const SMALL_TALK = [
  'hi', 'Hi!', 'hello', 'Hello there', 'hey', 'hey hey', 'Heyyy', 'good morning', 'Good evening!', 'gm',
  'thanks', 'thanks!', 'Thanks!!', 'thank you', 'Thank you so much!', 'thanks a lot', 'thx', 'ty', 'tysm',
  'Thanks, that helps', 'thank you for the help', 'much appreciated', 'appreciate it', 'cheers', 'ok', 'OK.',
  'okay', 'ok, got it', 'Ok got it, thanks', 'got it', 'gotcha', 'cool', 'cool cool', 'great', 'great, thanks!',
  'nice', 'awesome', 'perfect', 'perfect, thank you', 'makes sense', 'that makes sense', 'understood', 'noted',
  'sounds good', 'looks good', 'yes', 'yep', 'no', 'nope', 'sure', 'alright', 'right', 'I see', 'oh I see',
  'wow', 'lol', 'haha', 'hahaha', 'continue', 'go on', 'please continue', 'keep going', 'next', 'and then?',
  'bye', 'goodbye', 'see you', 'see you soon', 'take care', 'good night', '👍', '🙏', 'ok 👍', 'thanks 🙏', '...',
  'Okay, thanks again!', 'Great, that is very helpful', 'yes please', 'no thanks', 'will do', 'done', 'agreed',
]

/** Real questions and requests, short ones on purpose: none of them may be taken for small talk. */
const QUESTIONS = [
  'How do I get a refund for a gift card?', 'refund policy?', 'What is the capital of France?', 'why?', 'how?',
  'who won?', 'Thanks! Now, what is the return window?', 'ok, and what about shipping to Canada?', 'continue the story about the dragon',
  'hi, can you summarise the handbook?', 'What did Caroline say about her family?', 'When did Melanie paint a sunrise?',
  'Explain BM25', 'translate hello to French', 'good morning, when does the store open?', 'next steps for onboarding',
  'is it safe?', 'what time is it in Tokyo', 'more details on the warranty please', 'price?',
]

t.test('at least 50 turns that ask nothing are recognised', async (t) => {
  t.ok(SMALL_TALK.length >= 50, `${SMALL_TALK.length} turns`)
  const missed = SMALL_TALK.filter((s) => !asksNothing(s))
  t.same(missed, [], 'every one of them')
})

t.test('questions are not small talk, however short', async (t) => {
  const caught = QUESTIONS.filter((q) => asksNothing(q))
  t.same(caught, [], 'none of them')
  t.equal(asksNothing(''), false, 'an empty turn is the empty_query case, not this one')
  t.equal(asksNothing('thanks '.repeat(30)), false, 'a long message is read as a message')
})

t.test("SQuAD's and LoCoMo's questions in shared/data: none is taken for small talk", async (t) => {
  const squad = JSON.parse(readFileSync(new URL('../../shared/data/squad-dev-v2.0.json', import.meta.url), 'utf8')) as {
    data: { paragraphs: { qas: { question: string }[] }[] }[]
  }
  const questions = squad.data.flatMap((a) => a.paragraphs.flatMap((p) => p.qas.map((q) => q.question)))
  for (const conv of ['conv-26', 'conv-30', 'conv-41']) {
    const raw = JSON.parse(readFileSync(new URL(`../../shared/data/locomo/${conv}.json`, import.meta.url), 'utf8')) as { qa: { question: string }[] }
    questions.push(...raw.qa.map((q) => q.question))
  }
  t.ok(questions.length > 1000, `${questions.length} questions`)
  t.same(questions.filter(asksNothing), [])
})
