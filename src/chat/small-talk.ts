/**
 * Turns that ask nothing: greetings, thanks, acknowledgements, "continue". Retrieval and recall search with the
 * user's words, and a ranking always has a best hit, so "thanks!" used to pull about 330 tokens of excerpts into the
 * prompt (issue 24). Such a turn is recognised before any search runs, and nothing is retrieved or recalled for it
 * (`_metadata.rag.reason: "small_talk"`); the history still goes in, as for any turn.
 *
 * Recognised: a short message (at most MAX_WORDS words) made only of the words below (and emoji, punctuation,
 * laughter), with no question mark after a word that is not itself small talk. The list is closed on purpose: a word
 * outside it ("refund", "why", a name) makes the turn a question worth searching for, so the cost of a miss here is
 * what it was before (a search), never a question left unanswered. Written by hand, not tuned on shared/data; the
 * turns it is held to are in test/small-talk.test.ts, with real questions it must not catch.
 */

const MAX_WORDS = 8

/** Every word of a turn that asks nothing is one of these (lower case, apostrophes removed). */
const WORDS: ReadonlySet<string> = new Set(
  [
    // greetings and goodbyes
    'hi hello hey heya hiya howdy yo greetings morning afternoon evening night good day gm gn bye goodbye cya later',
    'see you soon take care cheers',
    // thanks
    'thanks thank thx ty tysm thankyou appreciate appreciated it much so very a lot lots many again for that this',
    'the help helpful helps is there your you all kind kindly',
    // acknowledgements and reactions
    'ok okay okey k kk alright allright right sure yes yeah yep yup ya no nope nah fine cool great nice awesome',
    'perfect excellent amazing wonderful lovely neat sweet brilliant fantastic super gotcha got understood',
    'understand makes sense noted roger will do done i im i see agreed agree true indeed exactly absolutely',
    'definitely totally sounds looks good well wow oh ah aha hmm hm uh um huh lol haha hahaha lmao omg',
    // keep going
    'continue go on please pls plz keep going next more carry proceed and then',
  ]
    .join(' ')
    .split(' '),
)

/** Laughter of any length and letters held for emphasis ("hahaha", "okkkk", "thanksss"). */
const STRETCHED = /^(?:(?:ha)+h?|(?:he)+h?|(?:lo)+l|o+k+|ye+s+|no+|thanks+|thx+|hi+|hey+|yay+|wo+w+)$/

export function asksNothing(text: string): boolean {
  const trimmed = text.trim()
  if (trimmed === '' || trimmed.length > 120) return false
  // Letters and digits (any script) with apostrophes joined in; everything else (emoji, punctuation) separates words.
  const words = trimmed
    .toLowerCase()
    .replace(/['’]/g, '')
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w !== '')
  if (words.length > MAX_WORDS) return false
  // Emoji or punctuation alone ("👍", "?!") ask nothing either, but a lone "?" asks to go on: not a search.
  for (const w of words) if (!WORDS.has(w) && !STRETCHED.test(w)) return false
  return true
}
