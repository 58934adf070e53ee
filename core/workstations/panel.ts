/**
 * The workstation panel: one page per project showing the state (refreshed every 3 s), the reason
 * of a failure or gateway stop, the recent transitions, the actions the state allows, and Open,
 * which opens the workstation in a new tab on the public listener. Server-rendered shell, a small
 * script; the project id is escaped into the page and sent to the API percent-encoded.
 */

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** The page for `projectId`; `publicUrl` is where Open goes (default: this host, the public port must be given). */
export function panelPage(projectId: string, publicUrl: string | undefined): string {
  const config = JSON.stringify({ projectId, publicUrl: publicUrl ?? '' }).replace(/</g, '\\u003c')
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Workstation · ${escapeHtml(projectId)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:44rem;color:#1d2430;padding:0 1rem}
h1{font-size:1.3rem}.state{display:inline-block;padding:.15rem .6rem;border-radius:1rem;background:#e8ecf2;font-weight:600}
.state.ready{background:#d3f2dc;color:#11602b}.state.failed{background:#fbdada;color:#8a1010}
.state.provisioning,.state.starting,.state.stopping,.state.deleting{background:#fff1c9;color:#6a4b00}
button{font:inherit;padding:.35rem .9rem;margin-right:.4rem;border-radius:.3rem;border:1px solid #9aa5b5;background:#fff;cursor:pointer}
button.primary{background:#1f5fd1;color:#fff;border-color:#1f5fd1}button:disabled{opacity:.45;cursor:default}
.reason{color:#8a1010;margin:.5rem 0}table{border-collapse:collapse;width:100%;margin-top:1rem;font-size:.9rem}
td,th{text-align:left;padding:.2rem .4rem;border-bottom:1px solid #e3e7ee}#token{display:none;margin:1rem 0}.muted{color:#6b7585}
</style></head><body>
<h1>Cloud workstation · <span id="project"></span></h1>
<form id="token"><label>Admin token <input type="password" name="token" autocomplete="off"></label> <button>Use</button></form>
<p>State: <span id="state" class="state">…</span> <span id="since" class="muted"></span></p>
<p id="reason" class="reason" hidden></p>
<p id="actions">
<button class="primary" id="open" disabled>Open</button>
<button data-action="provision">Provision</button><button data-action="start">Start</button>
<button data-action="stop">Stop</button><button data-action="delete">Delete</button>
</p>
<p id="error" class="reason" hidden></p>
<p class="muted">Credits charged: <span id="credits">0</span> · refreshes every 3 s</p>
<table><thead><tr><th>When</th><th>From</th><th>To</th><th>By</th><th>Reason</th></tr></thead><tbody id="history"></tbody></table>
<script>
const config = ${config}
const $ = (id) => document.getElementById(id)
$('project').textContent = config.projectId
const api = '/admin/projects/' + encodeURIComponent(config.projectId) + '/workstation'
const token = () => sessionStorage.getItem('tollgate-admin-token')
const fromHash = new URLSearchParams(location.hash.slice(1)).get('token')
if (fromHash) { sessionStorage.setItem('tollgate-admin-token', fromHash); history.replaceState(null, '', location.pathname) }
let openPath
const allowed = { absent: ['provision'], provisioning: ['stop', 'delete'], starting: ['stop', 'delete'], ready: ['stop', 'delete'],
  stopping: [], stopped: ['start', 'delete'], deleting: [], failed: ['provision', 'start', 'stop', 'delete'] }
let csrf
async function call(method, path) {
  const headers = token() ? { authorization: 'Bearer ' + token() } : {}
  if (!token() && method !== 'GET') {
    // Signed in with a session (accounts): changes carry the session's CSRF token.
    csrf ??= (await (await fetch('/admin/session', { credentials: 'same-origin' })).json()).csrfToken
    headers['x-csrf-token'] = csrf
  }
  const answer = await fetch(api + path, { method, headers, credentials: 'same-origin' })
  if (answer.status === 401) { $('token').style.display = 'block'; throw new Error('the admin API wants a token') }
  const body = await answer.json()
  if (!answer.ok && answer.status !== 202) throw new Error(body.error ? body.error.code + ': ' + body.error.message : String(answer.status))
  return body
}
function render(view) {
  $('state').textContent = view.state
  $('state').className = 'state ' + view.state
  $('since').textContent = view.since ? 'since ' + new Date(view.since).toLocaleTimeString() : ''
  $('reason').hidden = !view.reason
  $('reason').textContent = view.reason || ''
  $('credits').textContent = view.creditsCharged
  openPath = view.openPath
  $('open').disabled = !openPath
  for (const button of document.querySelectorAll('[data-action]')) button.disabled = !allowed[view.state].includes(button.dataset.action)
  $('history').replaceChildren(...view.history.slice().reverse().map((h) => {
    const row = document.createElement('tr')
    for (const cell of [new Date(h.at).toLocaleTimeString(), h.from, h.to, h.by, h.reason || '']) { const td = document.createElement('td'); td.textContent = cell; row.append(td) }
    return row
  }))
}
async function refresh() {
  try { render(await call('GET', '')); $('error').hidden = true } catch (error) { $('error').hidden = false; $('error').textContent = error.message }
}
for (const button of document.querySelectorAll('[data-action]')) button.addEventListener('click', async () => {
  const action = button.dataset.action
  try { render(await call(action === 'delete' ? 'DELETE' : 'POST', action === 'delete' ? '' : '/' + action)); $('error').hidden = true }
  catch (error) { $('error').hidden = false; $('error').textContent = error.message }
})
$('open').addEventListener('click', () => { if (openPath) window.open((config.publicUrl || '') + openPath, '_blank', 'noopener') })
$('token').addEventListener('submit', (event) => { event.preventDefault(); sessionStorage.setItem('tollgate-admin-token', event.target.token.value); $('token').style.display = 'none'; refresh() })
refresh()
setInterval(refresh, 3000)
</script></body></html>`
}
