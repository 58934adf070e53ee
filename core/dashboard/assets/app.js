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
  users: '/admin/users',
  user: (id) => `/admin/users/${encodeURIComponent(id)}`,
}
/** How long a rotated key keeps working beside its successor. */
const ROTATION_GRACE_SECONDS = 3600

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

// ---- live regions -------------------------------------------------------------------------
/**
 * Replaces a region's content with its server-rendered fragment at `src`; a signed-out session goes
 * to the sign-in page. Resolves whether the fragment came; a network failure rejects.
 */
async function reloadRegion(region, src) {
  const res = await fetch(src, { credentials: 'same-origin', headers: { accept: 'text/html' } })
  if (res.status === 401) {
    location.assign('/dashboard/sign-in')
    return false
  }
  if (res.ok) region.innerHTML = await res.text()
  return res.ok
}

function startLive() {
  const regions = [...document.querySelectorAll('[data-live]')]
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
    const columns = [data.x, ...data.series.map((s) => s.requests)]
    if (types.length === 0) columns.push(data.x.map(() => 0))
    const next = types.join(',') || '-'
    if (plot && next === signature) return plot.setData(columns)
    plot?.destroy()
    signature = next
    const series = [{}]
    if (types.length === 0) series.push({ label: 'requests', stroke: '#cfd5de', width: 2 })
    types.forEach((type, i) => {
      const color = PALETTE[i % PALETTE.length]
      series.push({ label: type, stroke: color, width: 2, fill: color + '1f', points: { size: 6, fill: color } })
    })
    plot = new uPlot({
      width: el.clientWidth || 800,
      height: 260,
      series,
      scales: { y: { range: (_u, _min, max) => [0, Math.max(4, Math.ceil(max * 1.15))] } },
      axes: [
        { stroke: '#687385', grid: { stroke: '#eef0f4' } },
        { stroke: '#687385', grid: { stroke: '#eef0f4' }, label: 'requests / hour', size: 56 },
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
      const detail = entry.kind === 'grant' ? `${entry.reason} by ${entry.actor}` : entry.kind === 'charge' ? `${entry.apiType} · ${String(entry.hour).replace('T', ' ').slice(0, 16)} UTC` : ''
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
  for (const region of document.querySelectorAll('[data-live]')) await reloadRegion(region, region.dataset.live)
}

function showKey(key, note) {
  const dialog = document.getElementById('key-dialog')
  dialog.querySelector('[data-slot="key"]').textContent = key
  dialog.querySelector('[data-slot="note"]').textContent = note ?? ''
  dialog.showModal()
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

function actionDone() {
  showError(document.getElementById('action-error'), '')
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
  return /^(?:unknown field )?(email|role|projects|password)\b/.exec(result.message)?.[1]
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

function passwordProblem(form) {
  const password = form.elements.password.value
  if (password.length < MIN_PASSWORD_LENGTH) return ['password', `password: at least ${MIN_PASSWORD_LENGTH} characters (this one has ${password.length})`]
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
  await reloadRegion(region, region.dataset.src)
}

function notice(message) {
  showError(document.getElementById('action-error'), '')
  const el = document.getElementById('action-notice')
  if (!el) return
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
    const problem = passwordProblem(form)
    // Refused here, before anything is sent.
    if (problem) return showFieldError(form, ...problem)
    const submit = form.querySelector('button[type="submit"]')
    submit.disabled = true
    const email = form.elements.email.value.trim()
    const result = await api('POST', API.users, { email, role: form.elements.role.value, projects: checkedProjects(form), password: form.elements.password.value })
    submit.disabled = false
    if (!result.ok) return showFieldError(form, fieldOf(result), result.message)
    showFieldError(form, undefined, '')
    form.reset()
    notice(`Account ${result.body.user.email} created (${result.body.user.role}).`)
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
    const { dialog } = openUserDialog('user-delete-dialog', user, async () => {
      const result = await api('DELETE', API.user(user.id))
      if (result.ok) notice(`Account ${user.email} deleted.`)
      return result
    })
    dialog.querySelector('[data-slot="text"]').textContent = `Delete ${user.email}? Its sessions end at once and it loses access to its projects (the projects stay).`
    dialog.showModal()
  },
  async 'sign-out'() {
    await api('DELETE', API.session)
    location.assign('/dashboard/sign-in')
  },
  'close-dialog'(button) {
    button.closest('dialog')?.close()
  },
  async 'rotate-key'(button) {
    const label = button.dataset.label
    const result = await api('POST', API.key(projectId(), label, 'rotate'), { graceSeconds: ROTATION_GRACE_SECONDS })
    if (!result.ok) return actionFailed(result)
    actionDone()
    const { key, previousLabel, graceUntil } = result.body
    showKey(key, `The new key keeps the label ${label}. The old one, now ${previousLabel}, keeps working until ${graceUntil}.`)
    await refreshNow()
  },
  async 'disable-key'(button) {
    const result = await api('POST', API.key(projectId(), button.dataset.label, 'disable'))
    if (!result.ok) return actionFailed(result)
    actionDone()
    await refreshNow()
  },
  async 'enable-key'(button) {
    const result = await api('POST', API.key(projectId(), button.dataset.label, 'enable'))
    if (!result.ok) return actionFailed(result)
    actionDone()
    await refreshNow()
  },
  async workstation(button) {
    const card = document.getElementById('workstation')
    const verb = button.dataset.verb
    const result = verb === 'delete'
      ? await api('DELETE', API.workstation(card.dataset.project))
      : await api('POST', API.workstation(card.dataset.project, verb))
    if (!result.ok) return actionFailed(result)
    actionDone()
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
function startForms() {
  const signIn = document.getElementById('sign-in')
  signIn?.addEventListener('submit', async (event) => {
    event.preventDefault()
    const form = event.currentTarget
    const result = await api('POST', API.session, { email: form.elements.email.value, password: form.elements.password.value })
    if (!result.ok) return showError(form.querySelector('.error'), result.message)
    location.assign('/dashboard/projects')
  })
  const createKey = document.getElementById('create-key')
  createKey?.addEventListener('submit', async (event) => {
    event.preventDefault()
    const form = event.currentTarget
    const label = form.elements.label.value.trim()
    const result = await api('POST', API.keys(form.dataset.project), { label })
    if (!result.ok) return showError(form.querySelector('.error'), result.message)
    showError(form.querySelector('.error'), '')
    form.reset()
    showKey(result.body.key, `Key ${label} is active now.`)
    await refreshNow()
  })
}

startLive()
startChart()
startForms()
startLedger()
startWorkstation()
startAccounts()
