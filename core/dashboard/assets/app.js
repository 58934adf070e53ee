// tollgate dashboard islands (served from this origin; the CSP allows no inline script).
// 1. [data-live] regions re-fetch their server-rendered fragment every few seconds;
// 2. #usage-chart draws requests per API type with uPlot and refreshes its data;
// 3. buttons and forms call the admin API (session cookie + CSRF header), features behind a password dialog.
'use strict'

/** The admin API endpoints the islands call (sessions, keys, project settings). */
const API = {
  session: '/admin/session',
  keys: (project) => `/admin/projects/${encodeURIComponent(project)}/keys`,
  key: (project, label, verb) => `/admin/projects/${encodeURIComponent(project)}/keys/${encodeURIComponent(label)}/${verb}`,
  project: (project) => `/admin/projects/${encodeURIComponent(project)}`,
  workstation: (project, verb) => `/admin/projects/${encodeURIComponent(project)}/workstation${verb ? `/${verb}` : ''}`,
  identity: '/admin/account/identity',
  identityLink: '/admin/account/identity/link',
  projects: '/admin/projects',
  topUp: (project) => `/admin/projects/${encodeURIComponent(project)}/credits/top-up`,
  thresholds: (project) => `/admin/projects/${encodeURIComponent(project)}/alerts/thresholds`,
  users: '/admin/users',
  user: (id) => `/admin/users/${encodeURIComponent(id)}`,
}

const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.getAttribute('content') ?? ''
const REFRESH_MS = Number(meta('refresh-ms')) || 3000

async function api(method, path, body) {
  const headers = { accept: 'application/json', 'x-csrf-token': meta('csrf-token') }
  if (body !== undefined) headers['content-type'] = 'application/json'
  let res
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' })
  } catch {
    return { ok: false, status: 0, body: {}, message: 'The gateway did not answer; try again.' }
  }
  const text = await res.text()
  let parsed = {}
  try { parsed = text ? JSON.parse(text) : {} } catch { parsed = {} }
  const message = parsed?.error?.message ?? (res.ok ? '' : `Request failed (${res.status}).`)
  return { ok: res.ok, status: res.status, body: parsed, message }
}

function showError(el, message) {
  if (!el) return
  el.textContent = message
  el.hidden = !message
}

// ---- times, announcements ----------------------------------------------------------------
const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' })
const FULL = new Intl.DateTimeFormat(undefined, { dateStyle: 'full', timeStyle: 'long' })
const SHORT = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' })

/** "in 42 min", "3 h ago": within a day; a date in the viewer's zone beyond. */
function relative(ms) {
  const seconds = Math.round((ms - Date.now()) / 1000)
  const abs = Math.abs(seconds)
  if (abs < 60) return RELATIVE.format(seconds, 'second')
  if (abs < 3600) return RELATIVE.format(Math.round(seconds / 60), 'minute')
  if (abs < 86400) return RELATIVE.format(Math.round(seconds / 3600), 'hour')
  return SHORT.format(new Date(ms))
}

/** Server-written UTC times in the viewer's zone: relative text, the full timestamp in `title`. */
function localTimes(root) {
  for (const el of root.querySelectorAll('time[datetime]')) {
    const ms = Date.parse(el.getAttribute('datetime'))
    if (!Number.isFinite(ms)) continue
    el.textContent = relative(ms)
    el.title = FULL.format(new Date(ms))
  }
}

/** Says `message` to screen readers (the page's polite live region). */
function announce(message) {
  const el = document.getElementById('announcer')
  if (!el || !message) return
  el.textContent = ''
  // A fresh text node after a tick, so the same message twice is read twice.
  setTimeout(() => { el.textContent = message }, 50)
}

// ---- live regions -------------------------------------------------------------------------
/** What identifies a control across a swap: its id, or its action and subject. */
function focusKey(el) {
  if (!el || el === document.body) return undefined
  if (el.id) return `#${CSS.escape(el.id)}`
  const attrs = ['data-action', 'data-label', 'data-feature', 'data-verb', 'href', 'name'].filter((a) => el.hasAttribute(a))
  if (attrs.length === 0) return undefined
  return el.tagName.toLowerCase() + attrs.map((a) => `[${a}="${CSS.escape(el.getAttribute(a))}"]`).join('')
}

/**
 * Replaces a region's content with its server-rendered fragment at `src`; a signed-out session goes
 * to the sign-in page. The poll touches nothing when the fragment did not change; when it did, keyboard
 * focus goes back to the same control and the changed figures marked `data-announce` are announced.
 * Resolves whether the fragment came; a network failure rejects.
 */
async function reloadRegion(region, src, { force = false } = {}) {
  const res = await fetch(src, { credentials: 'same-origin', headers: { accept: 'text/html' } })
  if (res.status === 401) {
    location.assign('/dashboard/sign-in')
    return false
  }
  if (!res.ok) return false
  const text = await res.text()
  // The poll leaves an unchanged region alone; a reload after an action always redraws (a control may have been changed by hand).
  if (!force && region.dataset.html === text) {
    localTimes(region)
    return true
  }
  const active = document.activeElement
  const key = region.contains(active) ? focusKey(active) : undefined
  const before = new Map([...region.querySelectorAll('[data-announce]')].map((el) => [el.dataset.announce, el.textContent.trim()]))
  region.innerHTML = text
  region.dataset.html = text
  localTimes(region)
  if (key) (region.querySelector(key) ?? region.closest('section, .card, main'))?.focus?.()
  const changes = [...region.querySelectorAll('[data-announce]')]
    .filter((el) => before.has(el.dataset.announce) && before.get(el.dataset.announce) !== el.textContent.trim())
    .map((el) => `${el.dataset.announce}: ${el.textContent.trim()}`)
  if (changes.length) announce(changes.join('. '))
  return true
}

function startLive() {
  const regions = [...document.querySelectorAll('[data-live]')]
  localTimes(document)
  if (regions.length === 0) return
  const note = document.querySelector('.live-note')
  const refresh = async () => {
    for (const region of regions) {
      // Not while a dialog is open: the user is acting on what they see.
      if (document.querySelector('dialog[open]')) continue
      try {
        if (!(await reloadRegion(region, region.dataset.live))) throw new Error('fragment not loaded')
        region.dataset.refreshedAt = String(Date.now())
        note?.classList.remove('stale')
      } catch {
        note?.classList.add('stale')
      }
    }
  }
  setInterval(refresh, REFRESH_MS)
}

// ---- usage chart --------------------------------------------------------------------------
const PALETTE = ['#3b5bdb', '#2b8a3e', '#e67700', '#ae3ec9', '#0c8599', '#c92a2a']

function startChart() {
  const el = document.getElementById('usage-chart')
  if (!el || typeof uPlot === 'undefined') return
  let plot
  let signature = ''
  const draw = (data) => {
    const types = data.series.map((s) => s.apiType)
    const total = data.series.reduce((sum, s) => sum + s.requests.reduce((a, b) => a + b, 0), 0)
    el.dataset.total = String(total)
    el.dataset.types = types.join(',')
    // Workstation minutes are not requests: their own series, drawn only when there are some.
    const minutes = data.workstationMinutes ?? []
    const hasMinutes = minutes.some((n) => n > 0)
    el.dataset.minutes = String(minutes.reduce((a, b) => a + b, 0))
    const columns = [data.x, ...data.series.map((s) => s.requests)]
    if (types.length === 0) columns.push(data.x.map(() => 0))
    if (hasMinutes) columns.push(minutes)
    // Refused answers per status and reason: dashed lines beside the requests.
    const refusals = data.refusals ?? []
    for (const r of refusals) columns.push(r.counts)
    el.dataset.refused = refusals.map((r) => r.answer).join(',')
    const next = (types.join(',') || '-') + (hasMinutes ? '+minutes' : '') + '|' + el.dataset.refused
    if (plot && next === signature) return plot.setData(columns)
    plot?.destroy()
    signature = next
    const series = [{}]
    if (types.length === 0) series.push({ label: 'requests', stroke: '#cfd5de', width: 2 })
    types.forEach((type, i) => {
      const color = PALETTE[i % PALETTE.length]
      series.push({ label: type, stroke: color, width: 2, fill: color + '1f', points: { size: 6, fill: color } })
    })
    if (hasMinutes) series.push({ label: 'workstation minutes', stroke: '#5f3dc4', width: 2, dash: [6, 4], points: { size: 5, fill: '#5f3dc4' } })
    const REFUSED = ['#b02020', '#8f4a00', '#862e9c', '#5c0011']
    refusals.forEach((r, i) => series.push({ label: `refused ${r.answer}`, stroke: REFUSED[i % REFUSED.length], width: 2, dash: [3, 3], points: { size: 5, fill: REFUSED[i % REFUSED.length] } }))
    plot = new uPlot({
      width: el.clientWidth || 800,
      height: 260,
      series,
      scales: { y: { range: (_u, _min, max) => [0, Math.max(4, Math.ceil(max * 1.15))] } },
      axes: [
        { stroke: '#4f5969', grid: { stroke: '#eef0f4' } },
        { stroke: '#4f5969', grid: { stroke: '#eef0f4' }, label: hasMinutes ? 'requests, minutes / hour' : 'requests / hour', size: 56 },
      ],
      legend: { live: true },
    }, columns, el)
  }
  const load = async () => {
    try {
      const res = await fetch(el.dataset.src, { credentials: 'same-origin' })
      if (res.status === 401) return void location.assign('/dashboard/sign-in')
      if (res.ok) draw(await res.json())
    } catch { /* the next tick tries again */ }
  }
  load()
  setInterval(load, REFRESH_MS)
  addEventListener('resize', () => plot?.setSize({ width: el.clientWidth, height: 260 }))
}

// ---- credit ledger (only when the gateway has the credits API) -----------------------------
async function startLedger() {
  const card = document.getElementById('credit-ledger')
  if (!card) return
  const render = async () => {
    let res
    try { res = await fetch(card.dataset.src, { credentials: 'same-origin', headers: { accept: 'application/json' } }) } catch { return }
    // 404: this gateway has no credit ledger endpoint; the card stays hidden.
    if (!res.ok) return
    const body = await res.json().catch(() => undefined)
    if (!Array.isArray(body?.entries)) return
    const rows = body.entries.slice(-12).reverse().map((entry) => {
      const detail = entry.kind === 'grant' ? `${entry.reason} by ${entry.actor}, ${SHORT.format(new Date(entry.at))}` : entry.kind === 'charge' ? `${entry.apiType} · ${SHORT.format(new Date(entry.hour))}` : entry.kind === 'grant' ? '' : ''
      const tr = document.createElement('tr')
      // Charges and holds come signed (negative): the column sums to the balance.
      const amount = Number(entry.amount).toLocaleString('en-US').replace('-', '−')
      for (const [text, cls] of [[entry.kind.replace('_', ' '), ''], [detail, 'muted'], [amount, 'r']]) {
        const td = document.createElement('td')
        td.textContent = text
        if (cls) td.className = cls
        tr.append(td)
      }
      return tr
    })
    card.querySelector('tbody').replaceChildren(...rows)
    card.hidden = false
  }
  await render()
  setInterval(render, REFRESH_MS)
}

// ---- workstation card (only when the gateway runs workstations and the project has them on) --
/** Which buttons each state allows (core/workstations/states.ts `decide`, the moves that change something). */
const WORKSTATION_ACTIONS = {
  absent: ['provision'],
  provisioning: ['stop', 'delete'],
  starting: ['stop', 'delete'],
  ready: ['stop', 'delete'],
  stopping: [],
  stopped: ['start', 'delete'],
  deleting: [],
  failed: ['provision', 'start', 'stop', 'delete'],
}
const STATE_CHIP = { ready: 'on', failed: 'off', absent: '', stopped: '' }

async function renderWorkstation() {
  const card = document.getElementById('workstation')
  if (!card) return
  const result = await api('GET', API.workstation(card.dataset.project))
  if (result.status === 401) return void location.assign('/dashboard/sign-in')
  const chip = card.querySelector('[data-slot="state"]')
  const reason = card.querySelector('[data-slot="reason"]')
  if (!result.ok) {
    chip.textContent = 'unavailable'
    chip.className = 'chip off'
    return showError(reason, result.message)
  }
  const view = result.body
  card.dataset.state = view.state
  chip.textContent = view.state
  chip.className = `chip ${STATE_CHIP[view.state] ?? 'warn'}`
  showError(reason, view.state === 'failed' && view.reason ? `Failed: ${view.reason}` : '')
  const allowed = WORKSTATION_ACTIONS[view.state] ?? []
  for (const button of card.querySelectorAll('[data-action="workstation"]')) button.disabled = !allowed.includes(button.dataset.verb)
  const open = card.querySelector('[data-slot="open"]')
  const openable = view.state === 'ready' && typeof view.openPath === 'string'
  if (openable) open.href = card.dataset.openBase.replace(/\/$/, '') + view.openPath
  open.hidden = !openable
}

async function renderIdentity() {
  const card = document.getElementById('workstation')
  if (!card) return
  const result = await api('GET', API.identity)
  const note = card.querySelector('[data-slot="identity"]')
  const button = card.querySelector('[data-action="link-identity"]')
  // 403: an admin-token caller has no account to link; nothing to show.
  if (!result.ok) return
  if (result.body.linked) {
    const { identity } = result.body
    note.textContent = `Opens for your linked identity ${identity.email ?? identity.subject} (${identity.issuer}).`
    button.hidden = true
  } else {
    note.textContent = 'Only your linked identity-provider account can open this workstation.'
    button.hidden = false
  }
}

function startWorkstation() {
  if (!document.getElementById('workstation')) return
  renderWorkstation()
  renderIdentity()
  setInterval(() => { if (!document.querySelector('dialog[open]')) renderWorkstation() }, REFRESH_MS)
}

// ---- actions ------------------------------------------------------------------------------
const projectId = () => document.querySelector('[data-project-id]')?.dataset.projectId

async function refreshNow() {
  for (const region of document.querySelectorAll('[data-live]')) await reloadRegion(region, region.dataset.live, { force: true })
}

/** The one-time key: shown with a Copy button; gone from the page once the dialog closes. */
function showKey(key, note) {
  const dialog = document.getElementById('key-dialog')
  dialog.querySelector('[data-slot="key"]').textContent = key
  dialog.querySelector('[data-slot="note"]').textContent = note ?? ''
  dialog.querySelector('[data-slot="copied"]').textContent = ''
  dialog.addEventListener('close', () => {
    dialog.querySelector('[data-slot="key"]').textContent = ''
    dialog.querySelector('[data-slot="copied"]').textContent = ''
  }, { once: true })
  dialog.showModal()
  dialog.querySelector('[data-action="copy-key"]').focus()
}

async function copyKey(button) {
  const dialog = button.closest('dialog')
  const key = dialog.querySelector('[data-slot="key"]').textContent
  const feedback = dialog.querySelector('[data-slot="copied"]')
  try {
    await navigator.clipboard.writeText(key)
    feedback.textContent = 'Copied to the clipboard.'
    feedback.className = 'copied small ok'
  } catch {
    // No clipboard permission: select the key so Ctrl+C / long-press copies it.
    const range = document.createRange()
    range.selectNodeContents(dialog.querySelector('[data-slot="key"]'))
    getSelection().removeAllRanges()
    getSelection().addRange(range)
    feedback.textContent = 'Could not copy: the key is selected, press Ctrl+C (or ⌘C).'
    feedback.className = 'copied small bad'
  }
}

/**
 * The confirmation dialog: `typed` is a name the user must type exactly; `grace` shows the grace
 * choice. `run(values)` does the change and answers the API's result: a refusal stays in the
 * dialog, success closes it.
 */
function confirmAction({ title, text, confirm, typed, grace, danger = true }, run) {
  const dialog = document.getElementById('confirm-dialog')
  const form = document.getElementById('confirm-form')
  form.reset()
  dialog.querySelector('[data-slot="title"]').textContent = title
  dialog.querySelector('[data-slot="text"]').textContent = text
  const button = dialog.querySelector('[data-slot="confirm"]')
  button.textContent = confirm
  button.classList.toggle('danger-fill', danger)
  dialog.querySelector('[data-slot="grace"]').hidden = !grace
  const typedSlot = dialog.querySelector('[data-slot="typed"]')
  typedSlot.hidden = typed === undefined
  if (typed !== undefined) dialog.querySelector('[data-slot="typed-label"]').textContent = `Type ${typed} to confirm`
  showFieldError(form, undefined, '')
  form.onsubmit = async (event) => {
    event.preventDefault()
    if (typed !== undefined && form.elements.typed.value.trim() !== typed) {
      return showFieldError(form, 'typed', `Type ${typed} exactly as shown (it is case-sensitive).`)
    }
    button.disabled = true
    const result = await run({ grace: Number(form.elements.grace.value) })
    button.disabled = false
    if (result && !result.ok) return showFieldError(form, undefined, result.message)
    dialog.close()
  }
  dialog.showModal()
  ;(typed !== undefined ? form.elements.typed : grace ? form.elements.grace : dialog.querySelector('[data-action="close-dialog"]')).focus()
}

/** The password dialog: resolves once the change succeeded, or when it is cancelled. */
function confirmWithPassword(title, text, send) {
  const dialog = document.getElementById('password-dialog')
  const form = document.getElementById('password-form')
  const error = form.querySelector('.error')
  dialog.querySelector('[data-slot="title"]').textContent = title
  dialog.querySelector('[data-slot="text"]').textContent = text
  form.reset()
  showError(error, '')
  form.onsubmit = async (event) => {
    event.preventDefault()
    const submit = form.querySelector('button[type="submit"]')
    submit.disabled = true
    const result = await send(form.elements.password.value)
    submit.disabled = false
    if (!result.ok) {
      // The API's own message (wrong password, no permission...) is shown as is.
      showError(error, result.message)
      form.elements.password.select()
      return
    }
    dialog.close()
    announce(`${title}: done.`)
    await refreshNow()
  }
  dialog.showModal()
  form.elements.password.focus()
}

/** A failed button action: the API's message in the page's banner, not a blocking dialog. */
function actionFailed(result) {
  const banner = document.getElementById('action-error')
  if (!banner) return
  showError(banner, result.message)
  banner.scrollIntoView({ block: 'nearest' })
}

function actionDone(message) {
  showError(document.getElementById('action-error'), '')
  if (message) notice(message)
}

// ---- accounts (operators) ----------------------------------------------------------------
/** The API's password rule checked before sending (core/accounts/password.ts has the rest). */
const MIN_PASSWORD_LENGTH = 12

/**
 * The field an API refusal is about: 409 user_exists is the email's, 409 self_lockout the role's
 * (a form without a role field shows it in its banner), a 400 names its field first.
 */
function fieldOf(result) {
  const code = result.body?.error?.code
  if (code === 'user_exists') return 'email'
  if (code === 'self_lockout') return 'role'
  if (code === 'project_exists') return 'id'
  if (code === 'alerts_not_configured' || /^thresholds\b/.test(result.message)) return 'thresholds'
  return /^(?:unknown field )?(credits\.refill\.day|credits\.refill|credits\.allocation|credits\.period|email|role|projects|password|id|name|plan|scopes|amount|reason|label)\b/.exec(result.message)?.[1]
}

/** One message under its field (or in the form's banner when it names none); every other one cleared. */
function showFieldError(form, field, message) {
  let placed = false
  for (const slot of form.querySelectorAll('[data-error-for]')) {
    const mine = Boolean(message) && slot.dataset.errorFor === field
    showError(slot, mine ? message : '')
    placed ||= mine
  }
  for (const input of form.querySelectorAll('input, select')) {
    if (input.name === field && message) input.setAttribute('aria-invalid', 'true')
    else input.removeAttribute('aria-invalid')
  }
  showError(form.querySelector('p.error'), placed ? '' : message)
}

/** Several messages, each under its field. */
function showFieldErrors(form, problems) {
  showFieldError(form, undefined, '')
  for (const [field, message] of problems) {
    for (const slot of form.querySelectorAll(`[data-error-for="${CSS.escape(field)}"]`)) showError(slot, message)
    form.querySelector(`[name="${CSS.escape(field)}"]`)?.setAttribute('aria-invalid', 'true')
  }
}

function passwordProblem(form) {
  const password = form.elements.password.value
  if (password.length < MIN_PASSWORD_LENGTH) return ['password', `Password: at least ${MIN_PASSWORD_LENGTH} characters (this one has ${password.length}).`]
  if (password !== form.elements.confirm.value) return ['confirm', 'the confirmation does not match the password']
  return undefined
}

const checkedProjects = (form) => [...form.querySelectorAll('input[name="projects"]:checked')].map((input) => input.value)

function userRow(button) {
  const row = button.closest('tr[data-user]')
  return { id: row.dataset.user, email: row.dataset.email, role: row.dataset.role, projects: JSON.parse(row.dataset.projects || '[]'), self: row.dataset.self === 'true' }
}

async function refreshAccounts() {
  const region = document.getElementById('accounts')
  await reloadRegion(region, region.dataset.src, { force: true })
}

function notice(message) {
  showError(document.getElementById('action-error'), '')
  const el = document.getElementById('action-notice')
  if (!el) return announce(message)
  el.textContent = message
  el.hidden = !message
}

/** Opens one of the account dialogs for a user; `submit` answers the API's result. */
function openUserDialog(id, user, submit) {
  const dialog = document.getElementById(id)
  const form = dialog.querySelector('form')
  form.reset()
  showFieldError(form, undefined, '')
  notice('')
  dialog.dataset.user = user.id
  form.onsubmit = async (event) => {
    event.preventDefault()
    const button = form.querySelector('button[type="submit"]')
    button.disabled = true
    const result = await submit(form)
    button.disabled = false
    if (!result) return
    if (!result.ok) {
      showFieldError(form, fieldOf(result), result.message)
      // The list may be stale (an account deleted elsewhere, a control forced): redraw it behind the dialog.
      return refreshAccounts()
    }
    dialog.close()
    await refreshAccounts()
  }
  return { dialog, form }
}

function startAccounts() {
  const form = document.getElementById('create-user')
  form?.addEventListener('submit', async (event) => {
    event.preventDefault()
    notice('')
    // Refused here, before anything is sent: every empty or short field at once, each under itself.
    const problems = []
    if (form.elements.email.value.trim() === '') problems.push(['email', 'Email: required, e.g. dev@example.com.'])
    const problem = passwordProblem(form)
    if (problem) problems.push(problem)
    if (problems.length) return showFieldErrors(form, problems)
    const submit = form.querySelector('button[type="submit"]')
    submit.disabled = true
    const email = form.elements.email.value.trim()
    const result = await api('POST', API.users, { email, role: form.elements.role.value, projects: checkedProjects(form), password: form.elements.password.value })
    submit.disabled = false
    if (!result.ok) return showFieldError(form, fieldOf(result), result.message)
    showFieldError(form, undefined, '')
    form.reset()
    const { user } = result.body
    // An owner with no project sees nothing: say so with the way out.
    notice(user.role === 'owner' && user.projects.length === 0
      ? `Account ${user.email} created (owner) with no projects: it sees nothing until you give it one with Role & projects.`
      : `Account ${user.email} created (${user.role}).`)
    await refreshAccounts()
  })
}

const actions = {
  'edit-user'(button) {
    const user = userRow(button)
    const { dialog, form } = openUserDialog('user-edit-dialog', user, async (form) => {
      const change = { projects: checkedProjects(form) }
      if (!form.elements.role.disabled) change.role = form.elements.role.value
      const result = await api('PATCH', API.user(user.id), change)
      if (result.ok) notice(`${user.email}: ${result.body.user.role}, projects ${result.body.user.projects.join(', ') || 'none'}.`)
      return result
    })
    dialog.querySelector('[data-slot="email"]').textContent = user.email
    form.elements.role.value = user.role
    // Your own role cannot go down (the API would answer 409 self_lockout).
    form.elements.role.disabled = user.self
    dialog.querySelector('[data-slot="self-note"]').hidden = !user.self
    for (const input of form.querySelectorAll('input[name="projects"]')) input.checked = user.projects.includes(input.value)
    dialog.showModal()
  },
  'user-password'(button) {
    const user = userRow(button)
    const { dialog, form } = openUserDialog('user-password-dialog', user, async (form) => {
      const problem = passwordProblem(form)
      if (problem) return void showFieldError(form, ...problem)
      const result = await api('PATCH', API.user(user.id), { password: form.elements.password.value })
      // Your own sessions ended with it, this one included.
      if (result.ok && user.self) return void location.assign('/dashboard/sign-in')
      if (result.ok) notice(`New password set for ${user.email}; every session of it was signed out.`)
      return result
    })
    dialog.querySelector('[data-slot="text"]').textContent = user.self
      ? 'This signs you out of every session, this one included; sign in again with the new password.'
      : `This signs ${user.email} out of every session; they sign in again with the new password.`
    dialog.showModal()
    form.elements.password.focus()
  },
  'delete-user'(button) {
    const user = userRow(button)
    const { dialog } = openUserDialog('user-delete-dialog', user, async (form) => {
      if (form.elements.typed.value.trim() !== user.email) return void showFieldError(form, 'typed', `Type ${user.email} exactly as shown to delete the account.`)
      const result = await api('DELETE', API.user(user.id))
      if (result.ok) notice(`Account ${user.email} deleted.`)
      return result
    })
    dialog.querySelector('[data-slot="text"]').textContent = `Delete ${user.email}? Its sessions end at once and it loses access to its projects (the projects stay). This cannot be undone.`
    dialog.showModal()
    dialog.querySelector('input[name="typed"]').focus()
  },
  async 'sign-out'() {
    await api('DELETE', API.session)
    location.assign('/dashboard/sign-in')
  },
  'close-dialog'(button) {
    const dialog = button.closest('dialog')
    // A one-time key leaves the page as the dialog closes, not a task later (the close event is queued).
    for (const slot of dialog?.querySelectorAll('[data-slot="key"], [data-slot="copied"]') ?? []) slot.textContent = ''
    dialog?.close()
  },
  'rotate-key'(button) {
    const label = button.dataset.label
    confirmAction({
      title: `Rotate ${label}`,
      text: `A new key replaces ${label} and is shown once. Clients still using the old key are refused once the grace period ends.`,
      confirm: 'Rotate key',
      grace: true,
      danger: false,
    }, async ({ grace }) => {
      const result = await api('POST', API.key(projectId(), label, 'rotate'), { graceSeconds: grace })
      if (!result.ok) return result
      document.getElementById('confirm-dialog').close()
      const { key, previousLabel, graceUntil } = result.body
      const until = Date.parse(graceUntil)
      actionDone(`Key ${label} rotated.`)
      showKey(key, grace === 0
        ? `The new key keeps the label ${label}. The old one was refused at once.`
        : `The new key keeps the label ${label}. The old one, now ${previousLabel}, keeps working until ${FULL.format(new Date(until))} (${relative(until)}).`)
      await refreshNow()
      return result
    })
  },
  'disable-key'(button) {
    const label = button.dataset.label
    confirmAction({
      title: `Disable ${label}`,
      text: `Requests with ${label} are refused (401) from now on, including traffic in flight elsewhere. You can enable it again.`,
      confirm: 'Disable key',
    }, async () => {
      const result = await api('POST', API.key(projectId(), label, 'disable'))
      if (result.ok) {
        actionDone(`Key ${label} disabled.`)
        await refreshNow()
      }
      return result
    })
  },
  async 'enable-key'(button) {
    const result = await api('POST', API.key(projectId(), button.dataset.label, 'enable'))
    if (!result.ok) return actionFailed(result)
    actionDone(`Key ${button.dataset.label} enabled.`)
    await refreshNow()
  },
  'copy-key'(button) {
    return copyKey(button)
  },
  async workstation(button) {
    const card = document.getElementById('workstation')
    const verb = button.dataset.verb
    if (verb === 'delete') {
      const name = card.dataset.project
      return confirmAction({
        title: 'Delete the workstation',
        text: `This deletes the workstation of ${name} with its disk and history. It cannot be undone.`,
        confirm: 'Delete workstation',
        typed: name,
      }, async () => {
        const result = await api('DELETE', API.workstation(name))
        if (result.ok) {
          actionDone('Workstation deleted.')
          await renderWorkstation()
        }
        return result
      })
    }
    const result = await api('POST', API.workstation(card.dataset.project, verb))
    if (!result.ok) return actionFailed(result)
    actionDone(`Workstation: ${verb} requested.`)
    await renderWorkstation()
  },
  async 'link-identity'() {
    const result = await api('POST', API.identityLink, { returnTo: location.pathname })
    if (!result.ok) return actionFailed(result)
    location.assign(result.body.authorizeUrl)
  },
  'toggle-feature'(button) {
    const { feature, label, next } = button.dataset
    const on = next === 'true'
    confirmWithPassword(`${on ? 'Turn on' : 'Turn off'} ${label}`, `Enter your password to turn ${label} ${on ? 'on' : 'off'} for this project.`, (password) =>
      api('PATCH', API.project(projectId()), { features: { [feature]: on }, password }),
    )
  },
}

document.addEventListener('click', (event) => {
  const button = event.target.closest('[data-action]')
  if (!button || button.disabled) return
  const action = actions[button.dataset.action]
  if (!action) return
  event.preventDefault()
  action(button)
})

// ---- forms --------------------------------------------------------------------------------
/** The rules the API applies, checked before sending so the message names the rule (not "match the requested format"). */
const RULES = {
  label: [/^[a-zA-Z0-9_.:-]{1,64}$/, 'Label: 1 to 64 letters, digits, _ . : or - (no spaces).'],
  id: [/^[a-zA-Z0-9_.-]{1,64}$/, 'Project id: 1 to 64 letters, digits, _ . or - (no spaces).'],
  plan: [/^[a-zA-Z0-9_.-]{1,64}$/, 'Plan: 1 to 64 letters, digits, _ . or -.'],
  name: [/^[\s\S]{1,200}$/, 'Name: 1 to 200 characters.'],
  reason: [/^[\x21-\x7e][\x20-\x7e]{0,63}$/, 'Reason: 1 to 64 printable ASCII characters, not starting with a space.'],
}

/** A form message goes away as soon as the field it is about changes. */
function clearOnInput(event) {
  const input = event.target
  const form = input.form
  if (!form) return
  const name = input.name === 'allocation' ? 'credits.allocation' : input.name === 'refillDay' ? 'credits.refill.day' : input.name
  for (const slot of form.querySelectorAll(`[data-error-for="${CSS.escape(name)}"]`)) showError(slot, '')
  input.removeAttribute('aria-invalid')
  showError(form.querySelector('p.error'), '')
}

/** Credits fields of the project forms as the API takes them. */
function creditsOf(form) {
  const credits = { allocation: Number(form.elements.allocation.value), period: form.elements.period.value }
  const refill = form.elements.refill.value
  if (refill === 'day') credits.refill = { interval: 'day' }
  if (refill === 'month') {
    credits.refill = { interval: 'month' }
    if (form.elements.refillDay.value !== '') credits.refill.day = Number(form.elements.refillDay.value)
  }
  return credits
}

/** The first rule a project form breaks: [field, message], or undefined. */
function projectProblem(form, withId) {
  for (const name of withId ? ['id', 'name', 'plan'] : ['name', 'plan']) {
    const value = form.elements[name].value.trim()
    if (name === 'name' && value === '' && withId) continue
    if (!RULES[name][0].test(value)) return [name, RULES[name][1]]
  }
  const allocation = form.elements.allocation.value
  if (!/^\d+$/.test(allocation)) return ['credits.allocation', 'Credit allocation: a whole number from 0.']
  const day = form.elements.refillDay.value
  if (form.elements.refill.value === 'month' && day !== '' && !(/^\d+$/.test(day) && Number(day) >= 1 && Number(day) <= 31)) return ['credits.refill.day', 'Refill day: a whole number from 1 to 31.']
  return undefined
}

function projectBody(form, withId) {
  const body = { plan: form.elements.plan.value.trim(), scopes: checked(form, 'scopes'), credits: creditsOf(form) }
  const name = form.elements.name.value.trim()
  if (name) body.name = name
  if (withId) body.id = form.elements.id.value.trim()
  return body
}

const checked = (form, name) => [...form.querySelectorAll(`input[name="${name}"]:checked`)].map((input) => input.value)

/** Runs a form's submit with its button disabled; a refusal is shown under the field it names. */
function onSubmit(form, handler) {
  form?.addEventListener('submit', async (event) => {
    event.preventDefault()
    const submit = form.querySelector('button[type="submit"]')
    submit.disabled = true
    try {
      const result = await handler(form)
      if (result && !result.ok) showFieldError(form, fieldOf(result), result.message)
    } finally {
      submit.disabled = false
    }
  })
}

function startForms() {
  document.addEventListener('input', clearOnInput)
  document.addEventListener('change', clearOnInput)
  const signIn = document.getElementById('sign-in')
  signIn?.addEventListener('input', () => showError(signIn.querySelector('.error'), ''))
  signIn?.addEventListener('submit', async (event) => {
    event.preventDefault()
    const form = event.currentTarget
    const missing = ['email', 'password'].filter((name) => form.elements[name].value === '')
    if (missing.length) return showError(form.querySelector('.error'), `Enter your ${missing.join(' and ')}.`)
    const result = await api('POST', API.session, { email: form.elements.email.value, password: form.elements.password.value })
    if (!result.ok) return showError(form.querySelector('.error'), result.message)
    location.assign('/dashboard/projects')
  })
  onSubmit(document.getElementById('create-key'), async (form) => {
    const label = form.elements.label.value.trim()
    const error = form.querySelector('.error')
    if (!RULES.label[0].test(label)) {
      form.elements.label.setAttribute('aria-invalid', 'true')
      return showError(error, RULES.label[1])
    }
    const result = await api('POST', API.keys(form.dataset.project), { label })
    if (!result.ok) return showError(error, result.message)
    showError(error, '')
    form.reset()
    actionDone(`Key ${label} created.`)
    showKey(result.body.key, `Key ${label} is active now.`)
    await refreshNow()
  })
  onSubmit(document.getElementById('create-project'), async (form) => {
    const problem = projectProblem(form, true)
    if (problem) return showFieldError(form, ...problem)
    const body = projectBody(form, true)
    const result = await api('POST', API.projects, body)
    if (!result.ok) return result
    showFieldError(form, undefined, '')
    form.reset()
    notice(`Project ${body.id} created. Add an owner on the Accounts page, or open it to add keys.`)
    await refreshNow()
  })
  onSubmit(document.getElementById('project-form'), async (form) => {
    const problem = projectProblem(form, false)
    if (problem) return showFieldError(form, ...problem)
    const result = await api('PATCH', API.project(form.dataset.project), projectBody(form, false))
    if (!result.ok) return result
    showFieldError(form, undefined, '')
    const project = result.body.project
    notice(`Settings saved: plan ${project.plan}, scopes ${project.scopes.join(', ') || 'none'}, ${project.credits.allocation.toLocaleString()} credits per period.`)
    // The heading and the chips carry the plan and scopes: reload the page's static parts.
    const head = document.querySelector('.page-head .head-text')
    if (head) {
      head.querySelector('h1 .chip').textContent = project.plan
      head.querySelector('.muted').textContent = `${project.id} · scopes: ${project.scopes.join(', ') || 'none'}`
    }
    await refreshNow()
  })
  onSubmit(document.getElementById('top-up-form'), async (form) => {
    const amount = form.elements.amount.value
    if (!/^\d+$/.test(amount) || Number(amount) < 1) return showFieldError(form, 'amount', 'Amount: a whole number of credits from 1.')
    const reason = form.elements.reason.value
    if (reason !== '' && !RULES.reason[0].test(reason)) return showFieldError(form, 'reason', RULES.reason[1])
    const body = { amount: Number(amount), idempotencyKey: `dashboard-${crypto.randomUUID()}` }
    if (reason) body.reason = reason
    const result = await api('POST', API.topUp(form.dataset.project), body)
    if (!result.ok) return result
    showFieldError(form, undefined, '')
    form.reset()
    notice(`${Number(amount).toLocaleString()} credits granted; ${result.body.balance.remaining.toLocaleString()} left this period.`)
    await refreshNow()
  })
}

/**
 * "20%, 500" as the API's thresholds, or [field, message] naming the first entry that is neither a
 * percentage (more than 0, at most 100) nor a whole number of credits (the API checks the same).
 */
function parseThresholdsText(text) {
  const parts = text.split(',').map((part) => part.trim()).filter((part) => part !== '')
  if (parts.length === 0) return { problem: 'Thresholds: enter at least one, e.g. 20% or 500.' }
  if (parts.length > 10) return { problem: `Thresholds: at most 10 (this has ${parts.length}).` }
  const thresholds = []
  for (const part of parts) {
    const percent = /^(\d+(?:\.\d+)?)\s*%$/.exec(part)
    if (percent) {
      const value = Number(percent[1])
      if (!(value > 0 && value <= 100)) return { problem: `Thresholds: ${part} is not a percentage more than 0 and at most 100.` }
      thresholds.push({ percent: value })
    } else if (/^\d+$/.test(part)) thresholds.push({ remaining: Number(part) })
    else return { problem: `Thresholds: “${part}” is neither a percentage (e.g. 20%) nor a whole number of credits left (e.g. 500).` }
  }
  const seen = new Set(parts.map((part) => part.replace(/\s+/g, '')))
  if (seen.size !== parts.length) return { problem: 'Thresholds: each may appear once.' }
  return { thresholds }
}

/** The thresholds form after the API answered: the values in force and where they come from. */
function thresholdsSaved(form, view) {
  form.elements.thresholds.value = view.thresholds.map((t) => (t.percent !== undefined ? `${t.percent}%` : String(t.remaining))).join(', ')
  form.querySelector('[data-slot="source"]').textContent = view.source === 'runtime' ? 'Set here, in place of gateway.yaml’s.' : 'As in gateway.yaml.'
  form.querySelector('[data-action="thresholds-yaml"]').hidden = view.source !== 'runtime'
  showFieldError(form, undefined, '')
}

function startThresholds() {
  const form = document.getElementById('thresholds-form')
  if (!form) return
  onSubmit(form, async () => {
    const { thresholds, problem } = parseThresholdsText(form.elements.thresholds.value)
    if (problem) return showFieldError(form, 'thresholds', problem)
    const result = await api('PUT', API.thresholds(form.dataset.project), { thresholds })
    if (!result.ok) return result
    thresholdsSaved(form, result.body)
    notice(`Alert thresholds saved: ${form.elements.thresholds.value}.`)
  })
  form.querySelector('[data-action="thresholds-yaml"]').addEventListener('click', async () => {
    const result = await api('PUT', API.thresholds(form.dataset.project), { thresholds: null })
    if (!result.ok) return showFieldError(form, fieldOf(result), result.message)
    thresholdsSaved(form, result.body)
    notice(`Alert thresholds are gateway.yaml’s again: ${form.elements.thresholds.value}.`)
  })
}

startLive()
startChart()
startThresholds()
startForms()
startLedger()
startWorkstation()
startAccounts()
