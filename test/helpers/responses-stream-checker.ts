/**
 * An independent checker of a Responses event stream, written from the rules clients enforce (reference §4a–d,
 * pitfalls 10–12), not from the translator: it imports nothing from src/responses. It returns every violation it
 * finds (an empty list: the stream is well-formed), each naming the event's position.
 *
 * Rules: the first event is response.created; sequence numbers run 0, 1, 2, …; only official event types; no
 * top-level `error` key except in `error` events; items are added append-only (output_index = items so far), one open
 * at a time, with a non-empty unique id (and call_id for calls); content and summary parts are added in order before
 * their deltas; every delta names the open item (item_id, output_index) and suits its type; `*.done` texts equal the
 * deltas joined, and output_item.done's item matches them; an `error` event is followed by response.failed; the
 * terminal event is last, its status matches its type, its output equals the output_item.done items, its usage is
 * non-null, and its id is response.created's.
 */
import { isDeepStrictEqual } from 'node:util'

type Ev = Record<string, unknown>

const OFFICIAL = new Set([
  'response.created', 'response.in_progress', 'response.queued', 'response.completed', 'response.incomplete', 'response.failed',
  'response.output_item.added', 'response.output_item.done', 'response.content_part.added', 'response.content_part.done',
  'response.output_text.delta', 'response.output_text.done', 'response.output_text.annotation.added',
  'response.refusal.delta', 'response.refusal.done',
  'response.function_call_arguments.delta', 'response.function_call_arguments.done',
  'response.custom_tool_call_input.delta', 'response.custom_tool_call_input.done',
  'response.reasoning_summary_part.added', 'response.reasoning_summary_part.done',
  'response.reasoning_summary_text.delta', 'response.reasoning_summary_text.done',
  'response.reasoning_text.delta', 'response.reasoning_text.done',
  'error', 'keepalive',
])
const TERMINAL: Record<string, string> = { 'response.completed': 'completed', 'response.incomplete': 'incomplete', 'response.failed': 'failed' }

/** Which item type each delta-like event belongs to. */
const ITEM_OF: Record<string, string> = {
  'response.content_part.added': 'message',
  'response.content_part.done': 'message',
  'response.output_text.delta': 'message',
  'response.output_text.done': 'message',
  'response.output_text.annotation.added': 'message',
  'response.refusal.delta': 'message',
  'response.refusal.done': 'message',
  'response.function_call_arguments.delta': 'function_call',
  'response.function_call_arguments.done': 'function_call',
  'response.custom_tool_call_input.delta': 'custom_tool_call',
  'response.custom_tool_call_input.done': 'custom_tool_call',
  'response.reasoning_summary_part.added': 'reasoning',
  'response.reasoning_summary_part.done': 'reasoning',
  'response.reasoning_summary_text.delta': 'reasoning',
  'response.reasoning_summary_text.done': 'reasoning',
}

interface PartState {
  type: string
  text: string
  done: boolean
}
interface OpenItem {
  index: number
  id: string
  type: string
  parts: PartState[]
  summaries: PartState[]
  args: string
}

const obj = (v: unknown): Ev => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Ev) : {})

export function checkResponseStream(events: readonly Ev[]): string[] {
  const v: string[] = []
  const doneItems: unknown[] = []
  const ids = new Set<string>()
  const callIds = new Set<string>()
  let open: OpenItem | undefined
  let createdId: unknown
  let terminalAt = -1
  if (events.length === 0) return ['the stream is empty']

  events.forEach((e, i) => {
    const type = e.type
    const here = `event ${i} (${String(type)})`
    if (typeof type !== 'string') return void v.push(`event ${i} has no type`)
    if (i === 0 && type !== 'response.created') v.push(`${here}: the first event must be response.created`)
    if (e.sequence_number !== i) v.push(`${here}: sequence_number ${String(e.sequence_number)}, expected ${i}`)
    if (!OFFICIAL.has(type)) v.push(`${here}: not an official event type`)
    if (type !== 'error' && 'error' in e) v.push(`${here}: a top-level error key outside an error event`)
    if (terminalAt >= 0) v.push(`${here}: after the terminal event`)

    if (type === 'response.created' || type === 'response.in_progress') {
      const r = obj(e.response)
      if (type === 'response.created') createdId = r.id
      if (r.object !== 'response') v.push(`${here}: response.object must be "response"`)
      if (!Array.isArray(r.output) || r.output.length !== 0) v.push(`${here}: output must be []`)
      if (r.status !== 'in_progress') v.push(`${here}: status must be in_progress`)
      return
    }
    if (type === 'error') {
      if (events[i + 1]?.type !== 'response.failed') v.push(`${here}: must be followed by response.failed`)
      return
    }
    if (type in TERMINAL) {
      terminalAt = i
      const r = obj(e.response)
      if (r.status !== TERMINAL[type]) v.push(`${here}: status ${String(r.status)}`)
      if (r.id !== createdId) v.push(`${here}: id differs from response.created's`)
      if (r.object !== 'response') v.push(`${here}: response.object must be "response"`)
      if (r.usage === null || r.usage === undefined) v.push(`${here}: usage is null`)
      if (type === 'response.incomplete' && r.incomplete_details == null) v.push(`${here}: incomplete_details is null`)
      if (type === 'response.failed' && r.error == null) v.push(`${here}: error is null`)
      if (type !== 'response.failed' && open !== undefined) v.push(`${here}: item ${open.id} is still open`)
      if (!isDeepStrictEqual(r.output, doneItems)) v.push(`${here}: output differs from the output_item.done items`)
      return
    }
    if (type === 'response.output_item.added') {
      const item = obj(e.item)
      if (open !== undefined) v.push(`${here}: item ${open.id} is still open`)
      if (e.output_index !== doneItems.length) v.push(`${here}: output_index ${String(e.output_index)}, expected ${doneItems.length}`)
      if (typeof item.id !== 'string' || item.id === '') v.push(`${here}: item without an id`)
      else if (ids.has(item.id)) v.push(`${here}: duplicate item id ${item.id}`)
      else ids.add(item.id)
      if (item.type === 'function_call' || item.type === 'custom_tool_call') {
        if (typeof item.call_id !== 'string' || item.call_id === '') v.push(`${here}: call without a call_id`)
        else if (callIds.has(item.call_id)) v.push(`${here}: duplicate call_id ${item.call_id}`)
        else callIds.add(item.call_id)
      }
      if (item.type === 'message' && (!Array.isArray(item.content) || item.content.length !== 0)) v.push(`${here}: a message must be added with content []`)
      open = { index: Number(e.output_index), id: String(item.id), type: String(item.type), parts: [], summaries: [], args: '' }
      return
    }
    if (type === 'keepalive') return
    // Everything else happens inside the open item.
    if (open === undefined) return void v.push(`${here}: no item is open`)
    const item = open
    if (type === 'response.output_item.done') {
      const done = obj(e.item)
      if (e.output_index !== item.index) v.push(`${here}: output_index ${String(e.output_index)}, open item is ${item.index}`)
      if (done.id !== item.id || done.type !== item.type) v.push(`${here}: item ${String(done.id)}/${String(done.type)} is not the open ${item.id}/${item.type}`)
      itemDone(done, item, here, v)
      doneItems.push(e.item)
      open = undefined
      return
    }
    if (e.item_id !== item.id || e.output_index !== item.index) v.push(`${here}: names ${String(e.item_id)}@${String(e.output_index)}, open item is ${item.id}@${item.index}`)
    if (ITEM_OF[type] !== undefined && ITEM_OF[type] !== item.type) v.push(`${here}: not an event of a ${item.type} item`)
    switch (type) {
      case 'response.content_part.added': {
        const part = obj(e.part)
        if (e.content_index !== item.parts.length) v.push(`${here}: content_index ${String(e.content_index)}, expected ${item.parts.length}`)
        item.parts.push({ type: String(part.type), text: '', done: false })
        return
      }
      case 'response.reasoning_summary_part.added':
        if (e.summary_index !== item.summaries.length) v.push(`${here}: summary_index ${String(e.summary_index)}, expected ${item.summaries.length}`)
        item.summaries.push({ type: 'summary_text', text: '', done: false })
        return
      case 'response.output_text.delta':
      case 'response.refusal.delta': {
        const p = part(item.parts, e.content_index, type === 'response.output_text.delta' ? 'output_text' : 'refusal', here, v)
        if (p !== undefined) p.text += String(e.delta)
        return
      }
      case 'response.output_text.done':
      case 'response.refusal.done': {
        const kind = type === 'response.output_text.done' ? 'output_text' : 'refusal'
        const p = part(item.parts, e.content_index, kind, here, v)
        const text = kind === 'output_text' ? e.text : e.refusal
        if (p !== undefined && text !== p.text) v.push(`${here}: done text differs from the deltas`)
        return
      }
      case 'response.output_text.annotation.added':
        part(item.parts, e.content_index, 'output_text', here, v)
        return
      case 'response.content_part.done': {
        const p = part(item.parts, e.content_index, String(obj(e.part).type), here, v)
        if (p !== undefined) {
          const pt = obj(e.part)
          if ((pt.type === 'refusal' ? pt.refusal : pt.text) !== p.text) v.push(`${here}: part text differs from the deltas`)
          p.done = true
        }
        return
      }
      case 'response.reasoning_summary_text.delta': {
        const s = part(item.summaries, e.summary_index, 'summary_text', here, v)
        if (s !== undefined) s.text += String(e.delta)
        return
      }
      case 'response.reasoning_summary_text.done':
      case 'response.reasoning_summary_part.done': {
        const s = part(item.summaries, e.summary_index, 'summary_text', here, v)
        const text = type === 'response.reasoning_summary_text.done' ? e.text : obj(e.part).text
        if (s !== undefined && text !== s.text) v.push(`${here}: summary text differs from the deltas`)
        if (s !== undefined && type === 'response.reasoning_summary_part.done') s.done = true
        return
      }
      case 'response.function_call_arguments.delta':
      case 'response.custom_tool_call_input.delta':
        item.args += String(e.delta)
        return
      case 'response.function_call_arguments.done':
        if (e.arguments !== item.args) v.push(`${here}: arguments differ from the deltas`)
        return
      case 'response.custom_tool_call_input.done':
        if (e.input !== item.args) v.push(`${here}: input differs from the deltas`)
        return
      default:
        v.push(`${here}: not expected inside an item`)
    }
  })
  if (terminalAt !== events.length - 1) v.push('the stream does not end with a terminal event')
  return v
}

function part(parts: PartState[], index: unknown, type: string, here: string, v: string[]): PartState | undefined {
  const p = typeof index === 'number' ? parts[index] : undefined
  if (p === undefined) {
    v.push(`${here}: part ${String(index)} was not added`)
    return undefined
  }
  if (p.type !== type) v.push(`${here}: part ${String(index)} is ${p.type}, not ${type}`)
  if (p.done) v.push(`${here}: part ${String(index)} is already done`)
  return p
}

function itemDone(done: Ev, item: OpenItem, here: string, v: string[]): void {
  if (item.type === 'message') {
    const content = Array.isArray(done.content) ? done.content.map(obj) : []
    if (content.length !== item.parts.length) v.push(`${here}: ${content.length} parts, ${item.parts.length} streamed`)
    item.parts.forEach((p, k) => {
      if (!p.done) v.push(`${here}: part ${k} was not done`)
      const c = content[k] ?? {}
      if ((c.type === 'refusal' ? c.refusal : c.text) !== p.text) v.push(`${here}: part ${k} text differs from the deltas`)
    })
  } else if (item.type === 'function_call') {
    if (done.arguments !== item.args) v.push(`${here}: arguments differ from the deltas`)
  } else if (item.type === 'custom_tool_call') {
    if (done.input !== item.args) v.push(`${here}: input differs from the deltas`)
  } else if (item.type === 'reasoning') {
    const summary = Array.isArray(done.summary) ? done.summary.map(obj) : []
    item.summaries.forEach((s, k) => {
      if (!s.done) v.push(`${here}: summary part ${k} was not done`)
      if (summary[k]?.text !== s.text) v.push(`${here}: summary ${k} differs from the deltas`)
    })
  }
}
