// recallgate's console: a static page that calls the public /api/v1 endpoints with the `serviceKey` header, like any
// client. Plain ES module, no framework and no build (the whole console is three files served by the gateway):
// every piece of user text goes into the page through text nodes (`el()` below), never through HTML parsing, and the
// Content-Security-Policy the gateway sends allows only these files to run.

const KEY = 'recallgate.serviceKey'
const $ = (id) => document.getElementById(id)

/** An element with attributes and children; strings become text nodes (never parsed as HTML). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue
    if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v)
    else node.setAttribute(k, v === true ? '' : String(v))
  }
  for (const c of children.flat()) if (c !== undefined && c !== null) node.append(c instanceof Node ? c : document.createTextNode(String(c)))
  return node
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag)
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v))
  return node
}

class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `HTTP ${status}`)
    this.status = status
  }
}

async function api(path, init = {}) {
  const key = sessionStorage.getItem(KEY)
  const headers = { serviceKey: key ?? '', ...(init.headers ?? {}) }
  const r = await fetch(`/api/v1${path}`, { ...init, headers })
  const text = await r.text()
  const body = text === '' ? null : JSON.parse(text)
  if (!r.ok) throw new ApiError(r.status, body)
  return body
}

const when = (s) => (s ? new Date(s * 1000).toLocaleString() : '')
const num = (n) => (n === null || n === undefined ? '' : Number(n).toLocaleString())

function contentText(content) {
  if (content === null || content === undefined) return ''
  if (typeof content === 'string') return content
  if (Array.isArray(content)) return content.map((p) => (typeof p?.text === 'string' ? p.text : `[${p?.type ?? 'part'}]`)).join('\n')
  return JSON.stringify(content)
}

/** One chat message as readable text: its content, its tool calls, or the call a tool result answers. */
function messageCard(m, extra) {
  const calls = Array.isArray(m.tool_calls)
    ? m.tool_calls.map((c) => el('pre', { class: 'tool-call' }, `→ ${c.function?.name ?? c.type}(${c.function?.arguments ?? ''})  [${c.id}]`))
    : []
  return el(
    'div',
    { class: 'card msg' },
    el('span', { class: 'label' }, m.role),
    m.tool_call_id ? el('span', { class: 'muted' }, `result of ${m.tool_call_id}`) : null,
    extra ?? null,
    m.content !== null && m.content !== undefined && contentText(m.content) !== '' ? el('pre', {}, contentText(m.content)) : null,
    calls,
  )
}

function showError(view, err) {
  view.append(el('p', { class: 'error', role: 'alert' }, err instanceof Error ? err.message : String(err)))
}

// ---- views --------------------------------------------------------------------------------------------------

async function overview(view) {
  view.append(el('h1', {}, 'Overview: the last hour'))
  const list = await api('/requests?limit=1000')
  if (!list.enabled) view.append(el('p', { class: 'muted' }, 'Request traces are off (REQUEST_TRACES=0): nothing to chart.'))
  const now = Date.now() / 1000
  const buckets = Array.from({ length: 12 }, () => ({ requests: 0, tokens: 0, prompt: 0, cached: 0, errors: 0 }))
  for (const r of list.data) {
    const age = now - r.created_at
    if (age < 0 || age >= 3600) continue
    const b = buckets[11 - Math.floor(age / 300)]
    b.requests++
    b.tokens += (r.prompt_tokens ?? 0) + (r.completion_tokens ?? 0)
    b.prompt += r.prompt_tokens ?? 0
    b.cached += r.cached_tokens ?? 0
    if (r.status >= 400) b.errors++
  }
  const total = (k) => buckets.reduce((s, b) => s + b[k], 0)
  const share = total('prompt') > 0 ? `${Math.round((100 * total('cached')) / total('prompt'))}%` : '–'
  const chart = (title, value, values) => {
    const max = Math.max(1, ...values)
    const s = svg('svg', { viewBox: '0 0 120 40', preserveAspectRatio: 'none', role: 'img', 'aria-label': title })
    values.forEach((v, i) => s.append(svg('rect', { x: i * 10 + 1, width: 8, y: 40 - (38 * v) / max, height: (38 * v) / max })))
    return el('div', { class: 'card chart' }, el('div', {}, el('strong', {}, title), ' ', value), s)
  }
  view.append(
    el(
      'div',
      { class: 'charts' },
      chart('Requests', num(total('requests')), buckets.map((b) => b.requests)),
      chart('Tokens', num(total('tokens')), buckets.map((b) => b.tokens)),
      chart('Cache share', share, buckets.map((b) => (b.prompt > 0 ? b.cached / b.prompt : 0))),
      chart('Errors', num(total('errors')), buckets.map((b) => b.errors)),
    ),
    el('p', { class: 'muted' }, 'Five-minute buckets, from this tenant’s recent request traces.'),
  )
}

async function sessions(view) {
  view.append(el('h1', {}, 'Sessions'))
  const filter = el('input', { type: 'search', placeholder: 'Filter by id', 'aria-label': 'Filter sessions by id' })
  const body = el('tbody')
  view.append(el('form', { class: 'inline', onsubmit: (e) => e.preventDefault() }, filter))
  view.append(el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, 'Session'), el('th', { class: 'num' }, 'Messages'), el('th', {}, 'Last activity'))), body))
  const all = []
  let after
  for (let page = 0; page < 50; page++) {
    const r = await api(`/sessions?limit=100${after ? `&after=${encodeURIComponent(after)}` : ''}`)
    all.push(...r.data)
    if (!r.has_more) break
    after = r.last_id
  }
  const render = () => {
    body.replaceChildren()
    const q = filter.value.trim().toLowerCase()
    for (const s of all.filter((x) => x.id.toLowerCase().includes(q))) {
      body.append(
        el(
          'tr',
          {},
          el('td', {}, el('a', { href: `#/sessions/${encodeURIComponent(s.id)}` }, s.id)),
          el('td', { class: 'num' }, num(s.message_count)),
          el('td', {}, when(s.updated_at)),
        ),
      )
    }
    if (body.childElementCount === 0) body.append(el('tr', {}, el('td', { colspan: 3, class: 'muted' }, 'No sessions.')))
  }
  filter.addEventListener('input', render)
  render()
}

async function session(view, id) {
  const s = await api(`/sessions/${encodeURIComponent(id)}`)
  const exportJson = () => {
    const url = URL.createObjectURL(new Blob([JSON.stringify(s, null, 2)], { type: 'application/json' }))
    const a = el('a', { href: url, download: `session-${id}.json` })
    document.body.append(a)
    a.click()
    a.remove()
    URL.revokeObjectURL(url)
  }
  const del = async () => {
    if (!confirm(`Delete session ${id} for good?`)) return
    await api(`/sessions/${encodeURIComponent(id)}`, { method: 'DELETE' })
    location.hash = '#/sessions'
  }
  view.append(
    el('h1', {}, 'Session ', el('code', {}, id)),
    el('p', { class: 'muted' }, `${s.messages.length} messages · created ${when(s.created_at)} · updated ${when(s.updated_at)}`),
    el('p', {}, el('button', { type: 'button', onclick: exportJson }, 'Export JSON'), ' ', el('button', { type: 'button', id: 'delete-session', onclick: del }, 'Delete')),
  )
  for (const m of s.messages) view.append(messageCard(m, el('span', { class: 'muted' }, when(m.created_at))))
}

async function files(view) {
  view.append(el('h1', {}, 'Files'))
  const input = el('input', { type: 'file', id: 'file-input' })
  const progress = el('progress', { max: 100, value: 0, hidden: true })
  const status = el('p', { class: 'muted', role: 'status' })
  const upload = (file) =>
    new Promise((resolve) => {
      const form = new FormData()
      form.append('file', file)
      const xhr = new XMLHttpRequest()
      xhr.open('POST', '/api/v1/files')
      xhr.setRequestHeader('serviceKey', sessionStorage.getItem(KEY) ?? '')
      progress.hidden = false
      xhr.upload.onprogress = (e) => {
        if (e.lengthComputable) progress.value = (100 * e.loaded) / e.total
      }
      xhr.onload = () => {
        progress.hidden = true
        const body = xhr.responseText ? JSON.parse(xhr.responseText) : null
        status.textContent = xhr.status === 201 ? `Uploaded ${body.filename}: ${body.chunks} chunks.` : `Upload failed: ${body?.error?.message ?? xhr.status}`
        resolve()
      }
      xhr.onerror = () => {
        progress.hidden = true
        status.textContent = 'Upload failed: the connection closed.'
        resolve()
      }
      xhr.send(form)
    })
  const drop = el(
    'div',
    {
      class: 'drop',
      ondragover: (e) => {
        e.preventDefault()
        drop.classList.add('over')
      },
      ondragleave: () => drop.classList.remove('over'),
      ondrop: async (e) => {
        e.preventDefault()
        drop.classList.remove('over')
        for (const f of e.dataTransfer.files) await upload(f)
        await list()
      },
    },
    'Drop a file here, or ',
    input,
  )
  input.addEventListener('change', async () => {
    for (const f of input.files) await upload(f)
    input.value = ''
    await list()
  })
  const body = el('tbody')
  const list = async () => {
    const r = await api('/files')
    body.replaceChildren()
    for (const f of r.data) {
      const del = el('button', { type: 'button', onclick: async () => {
        await api(`/files/${encodeURIComponent(f.id)}`, { method: 'DELETE' })
        await list()
      } }, 'Delete')
      body.append(el('tr', {}, el('td', {}, f.filename), el('td', { class: 'num' }, num(f.chunks)), el('td', { class: 'num' }, num(f.bytes)), el('td', {}, when(f.created_at)), el('td', {}, del)))
    }
    if (r.data.length === 0) body.append(el('tr', {}, el('td', { colspan: 5, class: 'muted' }, 'No files yet.')))
  }
  const query = el('input', { type: 'search', placeholder: 'Search your files', 'aria-label': 'Search query', id: 'search-query' })
  const results = el('div', { id: 'search-results' })
  const search = async (e) => {
    e.preventDefault()
    results.replaceChildren()
    const r = await api('/files/search', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: query.value, k: 5 }) })
    if (r.data.length === 0) results.append(el('p', { class: 'muted' }, 'Nothing relevant.'))
    for (const h of r.data) results.append(el('div', { class: 'card part' }, el('strong', {}, h.filename), el('span', { class: 'muted' }, ` chunk ${h.chunk_index} · score ${h.score.toFixed(3)}`), el('pre', {}, h.text)))
  }
  view.append(
    drop,
    progress,
    status,
    el('h2', {}, 'Your files'),
    el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, 'File'), el('th', { class: 'num' }, 'Chunks'), el('th', { class: 'num' }, 'Bytes'), el('th', {}, 'Uploaded'), el('th', {}, ''))), body),
    el('h2', {}, 'Search'),
    el('form', { class: 'inline', onsubmit: (e) => search(e).catch((err) => showError(results, err)) }, query, el('button', { type: 'submit' }, 'Search')),
    results,
  )
  await list()
}

async function requests(view) {
  view.append(el('h1', {}, 'Requests'))
  const r = await api('/requests?limit=100')
  if (!r.enabled) view.append(el('p', { class: 'muted' }, 'Request traces are off (REQUEST_TRACES=0).'))
  const body = el('tbody')
  for (const q of r.data) {
    body.append(
      el(
        'tr',
        {},
        el('td', {}, el('a', { href: `#/requests/${encodeURIComponent(q.id)}` }, when(q.created_at))),
        el('td', {}, q.model),
        el('td', {}, q.session_id ?? ''),
        el('td', { class: 'num' }, q.status),
        el('td', { class: 'num' }, `${num(q.duration_ms)} ms`),
        el('td', { class: 'num' }, num(q.prompt_tokens)),
        el('td', { class: 'num' }, num(q.completion_tokens)),
        el('td', { class: 'num' }, num(q.cached_tokens)),
      ),
    )
  }
  if (r.data.length === 0) body.append(el('tr', {}, el('td', { colspan: 8, class: 'muted' }, 'No requests yet.')))
  view.append(
    el(
      'table',
      {},
      el('thead', {}, el('tr', {}, ...['Time', 'Model', 'Session', 'Status', 'Latency', 'Prompt', 'Completion', 'Cached'].map((h, i) => el('th', i >= 3 ? { class: 'num' } : {}, h)))),
      body,
    ),
  )
}

const PART_NAMES = { system: 'system', history: 'kept history', recall: 'recalled turns', excerpts: 'excerpts', request: 'the request' }

async function request(view, id) {
  const t = await api(`/requests/${encodeURIComponent(id)}`)
  view.append(
    el('h1', {}, 'Request ', el('code', {}, t.id)),
    el(
      'p',
      { class: 'muted' },
      `${when(t.created_at)} · ${t.model} · ${t.route} · status ${t.status} · ${num(t.duration_ms)} ms · packed ${num(t.total_tokens_packed)} of ${num(t.window)} tokens · prompt ${num(t.prompt_tokens)}, completion ${num(t.completion_tokens)}, cached ${num(t.cached_tokens)}`,
    ),
  )
  if (t.session_id) view.append(el('p', {}, 'Session ', el('a', { href: `#/sessions/${encodeURIComponent(t.session_id)}` }, t.session_id)))
  if (t.error) view.append(el('p', { class: 'error' }, `${t.error.code}: ${t.error.message}`))
  const left = t.left_out
  view.append(
    el('h2', {}, 'Left out'),
    el(
      'ul',
      { id: 'left-out' },
      el('li', {}, `${num(left.historyMessages)} older history messages (did not fit the window, or beyond MAX_HISTORY_MESSAGES)`),
      el('li', {}, `${num(left.chunks)} retrieved chunks not sent${left.retrievalReason ? ` (${left.retrievalReason})` : ''}`),
    ),
    el('h2', {}, 'Sent upstream'),
  )
  for (const p of t.parts) {
    const sources = p.sources
      ? el('ul', {}, ...p.sources.map((s) => el('li', {}, `${s.filename} · chunk ${s.chunk_index} · score ${Number(s.score).toFixed(3)}`)))
      : null
    view.append(
      el(
        'div',
        { class: `card part part-${p.part}` },
        el('span', { class: `label ${p.part}` }, PART_NAMES[p.part] ?? p.part),
        el('span', { class: 'muted' }, `${p.message.role} · ${num(p.tokens)} tokens`),
        sources,
        el('pre', {}, contentText(p.message.content)),
        Array.isArray(p.message.tool_calls) ? p.message.tool_calls.map((c) => el('pre', {}, `→ ${c.function?.name}(${c.function?.arguments})`)) : [],
      ),
    )
  }
}

// ---- routing ------------------------------------------------------------------------------------------------

const ROUTES = [
  [/^#?\/?$/, overview],
  [/^#\/sessions$/, sessions],
  [/^#\/sessions\/(.+)$/, session],
  [/^#\/files$/, files],
  [/^#\/requests$/, requests],
  [/^#\/requests\/(.+)$/, request],
]

async function route() {
  const view = $('view')
  view.replaceChildren()
  const signedIn = sessionStorage.getItem(KEY) !== null
  $('signin').hidden = signedIn
  $('nav').hidden = !signedIn
  if (!signedIn) return
  const hash = location.hash || '#/'
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', hash.startsWith(a.getAttribute('href')) && a.getAttribute('href') !== '#/' || hash === a.getAttribute('href'))
  for (const [re, render] of ROUTES) {
    const m = re.exec(hash)
    if (!m) continue
    try {
      await render(view, ...m.slice(1).map(decodeURIComponent))
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) {
        sessionStorage.removeItem(KEY)
        $('signin-error').textContent = `Sign-in failed: ${err.message}`
        return route()
      }
      showError(view, err)
    }
    return
  }
  showError(view, `No view at ${hash}`)
}

$('signin').addEventListener('submit', async (e) => {
  e.preventDefault()
  const key = $('key').value.trim()
  $('signin-error').textContent = ''
  sessionStorage.setItem(KEY, key)
  try {
    // Any authenticated read tells a good key from a bad one.
    await api('/sessions?limit=1')
    $('key').value = ''
    await route()
  } catch (err) {
    sessionStorage.removeItem(KEY)
    $('signin-error').textContent = `Sign-in failed: ${err instanceof Error ? err.message : String(err)}`
  }
})
$('signout').addEventListener('click', () => {
  sessionStorage.removeItem(KEY)
  location.hash = '#/'
  void route()
})
window.addEventListener('hashchange', () => void route())
void route()
