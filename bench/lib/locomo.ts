/**
 * The LoCoMo conversations in ../shared/data/locomo/ (see its README), read the same way by the recall benchmarks
 * (memory-eval.ts, recall-perf.ts): sessions with their dates, and the questions of categories 1–4 with their evidence.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { sharedDataPath } from './project-root.js'

export interface LocomoTurn {
  speaker: string
  dia_id: string
  text: string
}

export interface Conversation {
  /** The file name without ".json" ("conv-26"). */
  name: string
  /** Speaker A: replayed as `user`, speaker B as `assistant`. */
  speakerA: string
  /** Epoch ms (UTC) of each session, with its turns in order. */
  sessions: Array<{ date: number; turns: LocomoTurn[] }>
  /** Categories 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop (5, adversarial, is left out). */
  questions: Array<{ question: string; category: number; evidence: string[] }>
  /** Turn text by dia_id. */
  text: Map<string, string>
}

/** The conversations, by file name order; `only` limits them to those names. */
export function loadLocomo(only?: readonly string[]): Conversation[] {
  const dir = sharedDataPath('locomo')
  const files = readdirSync(dir)
    .filter((f) => /^conv-.*\.json$/.test(f))
    .filter((f) => only === undefined || only.includes(f.replace(/\.json$/, '')))
    .sort()
  return files.map((f) => {
    const raw = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Record<string, unknown>
    const sessions: Conversation['sessions'] = []
    for (let n = 1; Array.isArray(raw[`session_${n}`]); n++) {
      sessions.push({ date: parseDate(String(raw[`session_${n}_date_time`])), turns: raw[`session_${n}`] as LocomoTurn[] })
    }
    const text = new Map<string, string>()
    for (const s of sessions) for (const t of s.turns) text.set(t.dia_id, t.text)
    const qa = raw.qa as Array<{ question: string; category: number; evidence: string[] }>
    const questions = qa
      .filter((q) => q.category >= 1 && q.category <= 4)
      // A few evidence entries hold two ids in one string ("D8:6; D9:17").
      .map((q) => ({ question: q.question, category: q.category, evidence: q.evidence.flatMap((e) => e.split(/[;,\s]+/)).filter((e) => text.has(e)) }))
    return { name: f.replace(/\.json$/, ''), speakerA: String(raw.speaker_a), sessions, questions, text }
  })
}

const MONTHS = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december']

/** "1:56 pm on 8 May, 2023" → epoch ms (UTC). */
function parseDate(s: string): number {
  const m = /(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+([a-z]+),?\s+(\d{4})/i.exec(s)
  if (m === null) throw new Error(`unrecognised LoCoMo date "${s}"`)
  const [, hh, mm, ampm, dd, month, yyyy] = m as unknown as [string, string, string, string, string, string, string]
  const hour = (Number(hh) % 12) + (ampm.toLowerCase() === 'pm' ? 12 : 0)
  const mon = MONTHS.indexOf(month.toLowerCase())
  if (mon < 0) throw new Error(`unrecognised month in "${s}"`)
  return Date.UTC(Number(yyyy), mon, Number(dd), hour, Number(mm))
}
