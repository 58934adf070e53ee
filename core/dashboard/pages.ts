/**
 * The dashboard's pages and live fragments, as template functions (server-rendered HTML). The
 * script islands (assets/app.js) only refresh `[data-live]` regions from the fragment URLs, draw
 * the uPlot chart and send the admin API calls of buttons and dialogs.
 */
import type { AlertRecord } from '../alerts/low-balance.ts'
import type { ProjectSummary, RouteStat } from './data.ts'
import { formatNumber, html, type SafeHtml } from './html.ts'
import { layout, REFRESH_MS, type DashboardViewer } from './layout.ts'

const FEATURES: { key: 'proveBatch' | 'sponsoredWallet' | 'relayToConfidentialSpace' | 'tee' | 'workstation'; label: string; help: string; operatorOnly: boolean }[] = [
  { key: 'proveBatch', label: 'ZK Prove Batch', help: 'Batched proofs on /prove-batch', operatorOnly: false },
  { key: 'sponsoredWallet', label: 'Sponsored Wallet', help: 'Honour the sponsored request header', operatorOnly: false },
  { key: 'relayToConfidentialSpace', label: 'Relay to Confidential Space', help: 'Relay proof jobs to the confidential space', operatorOnly: true },
  { key: 'tee', label: 'TEE proving', help: 'tee_enabled requests go to the TEE pool', operatorOnly: true },
  { key: 'workstation', label: 'Cloud workstation', help: 'A personal workstation for this project (reload to see its card)', operatorOnly: true },
]

/** The sign-in form; the island posts it to the session endpoint. */
export function signInPage(): string {
  return layout(
    'Sign in',
    undefined,
    html`<section class="signin card">
      <h1>Sign in</h1>
      <p class="muted">Use your tollgate account. Operators create accounts with <code>tollgate user add</code> or the admin API (<code>POST /admin/users</code>).</p>
      <form id="sign-in" autocomplete="on">
        <label>Email <input name="email" type="email" autocomplete="username" required autofocus></label>
        <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
        <p class="error" role="alert" hidden></p>
        <button type="submit" class="primary">Sign in</button>
      </form>
    </section>`,
  )
}

function meter(percent: number): SafeHtml {
  const level = percent <= 10 ? 'low' : percent <= 30 ? 'warn' : 'ok'
  // A <meter> styles itself without inline style attributes (CSP: no 'unsafe-inline').
  return html`<meter class="meter ${level}" min="0" max="100" low="10.01" high="30.01" optimum="100" value="${percent.toFixed(1)}">${percent.toFixed(0)}%</meter>`
}

function featureBadges(summary: ProjectSummary): SafeHtml {
  const on = FEATURES.filter((f) => summary.project.features[f.key])
  return on.length ? html`${on.map((f) => html`<span class="chip on">${f.label}</span>`)}` : html`<span class="muted small">no ZK features</span>`
}

function projectCard(summary: ProjectSummary): SafeHtml {
  const { project, balance, window } = summary
  return html`<a class="card project-card" href="/dashboard/projects/${encodeURIComponent(project.id)}" data-project="${project.id}">
    <div class="card-head"><h2>${project.name}</h2><span class="chip">${project.plan}</span></div>
    <div class="muted small">${project.id}</div>
    <div class="credits-line"><span class="big" data-field="credits-left">${formatNumber(balance.remaining)}</span>
      <span class="muted">of ${formatNumber(balance.allocation)} credits left · ${balance.period}</span></div>
    ${meter(balance.percentLeft)}
    <dl class="mini">
      <div><dt>Requests 24 h</dt><dd>${formatNumber(window.requests)}</dd></div>
      <div><dt>Errors</dt><dd class="${window.errors ? 'bad' : ''}">${formatNumber(window.errors)}</dd></div>
      <div><dt>Credits 24 h</dt><dd>${formatNumber(window.credits)}</dd></div>
    </dl>
    <div class="badges">${featureBadges(summary)}</div>
  </a>`
}

/** The project grid (live fragment). */
export function projectsFragment(summaries: readonly ProjectSummary[]): SafeHtml {
  if (summaries.length === 0) return html`<p class="empty card">No projects yet. Projects come from gateway.yaml or <code>POST /admin/projects</code>.</p>`
  return html`<div class="grid">${summaries.map(projectCard)}</div>`
}

export function projectsPage(viewer: DashboardViewer, summaries: readonly ProjectSummary[]): string {
  return layout(
    'Projects',
    viewer,
    html`<div class="page-head"><h1>Projects</h1><span class="muted small live-note">updates every ${REFRESH_MS / 1000} s</span></div>
    <div data-live="/dashboard/fragments/projects">${projectsFragment(summaries)}</div>`,
    { active: 'projects' },
  )
}

function statusBreakdown(summary: ProjectSummary): SafeHtml {
  const classes = ['2xx', '3xx', '4xx', '5xx', 'other'].filter((c) => summary.statusClasses[c])
  const total = classes.reduce((sum, c) => sum + summary.statusClasses[c]!, 0)
  if (total === 0) return html`<p class="muted">No requests in the last 24 hours.</p>`
  return html`<ul class="bars">${classes.map((c) => {
    const n = summary.statusClasses[c]!
    return html`<li><span class="label">${c}</span><meter class="bar s${c}" min="0" max="${total}" value="${n}"></meter><span class="num">${formatNumber(n)}</span><span class="muted small">${((n / total) * 100).toFixed(1)}%</span></li>`
  })}</ul>`
}

function routesTable(routes: readonly RouteStat[]): SafeHtml {
  if (routes.length === 0) return html`<p class="muted">No traffic yet.</p>`
  return html`<table class="table">
    <thead><tr><th>Route</th><th>API type</th><th class="r">Requests</th><th class="r">Errors</th><th class="r">Mean</th><th class="r">Slowest</th></tr></thead>
    <tbody>${routes.slice(0, 8).map(
      (r) => html`<tr><td><code>${r.route}</code></td><td>${r.apiType}</td><td class="r">${formatNumber(r.requests)}</td>
        <td class="r ${r.errors ? 'bad' : ''}">${formatNumber(r.errors)}</td><td class="r">${r.meanLatencyMs.toFixed(1)} ms</td><td class="r">${r.maxLatencyMs.toFixed(0)} ms</td></tr>`,
    )}</tbody></table>`
}

function keysTable(summary: ProjectSummary): SafeHtml {
  const { project } = summary
  if (project.keys.length === 0) return html`<p class="muted">No keys.</p>`
  const now = Date.now()
  return html`<table class="table keys">
    <thead><tr><th>Label</th><th>State</th><th>Expires</th><th></th></tr></thead>
    <tbody>${project.keys.map((key) => {
      const expired = key.expiresAt !== undefined && key.expiresAt <= now
      const state = key.disabled ? html`<span class="chip off">disabled</span>` : expired ? html`<span class="chip off">expired</span>` : html`<span class="chip on">active</span>`
      return html`<tr data-key="${key.label}"><td><code>${key.label}</code></td><td>${state}</td>
        <td>${key.expiresAt === undefined ? html`<span class="muted">never</span>` : new Date(key.expiresAt).toISOString().replace('.000Z', 'Z')}</td>
        <td class="actions">
          <button type="button" data-action="rotate-key" data-label="${key.label}" ${key.disabled ? 'disabled' : ''}>Rotate</button>
          ${key.disabled
            ? html`<button type="button" data-action="enable-key" data-label="${key.label}">Enable</button>`
            : html`<button type="button" class="danger" data-action="disable-key" data-label="${key.label}">Disable</button>`}
        </td></tr>`
    })}</tbody></table>`
}

function featureToggles(summary: ProjectSummary, viewer: DashboardViewer): SafeHtml {
  return html`<ul class="features">${FEATURES.map((f) => {
    const on = summary.project.features[f.key]
    const locked = f.operatorOnly && !viewer.operator
    return html`<li><div><strong>${f.label}</strong><div class="muted small">${f.help}${f.operatorOnly ? ' · operator only' : ''}</div></div>
      <button type="button" class="switch ${on ? 'on' : ''}" role="switch" aria-checked="${on ? 'true' : 'false'}" data-action="toggle-feature"
        data-feature="${f.key}" data-label="${f.label}" data-next="${on ? 'false' : 'true'}" ${locked ? 'disabled' : ''}><span></span><em>${on ? 'On' : 'Off'}</em></button></li>`
  })}</ul>`
}

/** Alert rows (project page, alerts page and operator view). */
export function alertsList(alerts: readonly AlertRecord[], withProject: boolean): SafeHtml {
  if (alerts.length === 0) return html`<p class="muted">No low-balance alerts.</p>`
  return html`<table class="table alerts">
    <thead><tr><th>Fired</th>${withProject ? html`<th>Project</th>` : ''}<th>Threshold</th><th class="r">Left</th><th>Delivery</th><th>Attempts</th></tr></thead>
    <tbody>${alerts.map((a) => {
      const threshold = a.threshold.percent !== undefined ? `${a.threshold.percent}% left` : `${formatNumber(a.threshold.remaining ?? 0)} left`
      const chip = a.state === 'delivered' ? 'on' : a.state === 'failed' ? 'off' : 'warn'
      return html`<tr><td>${a.firedAt.replace('T', ' ').slice(0, 19)}</td>${withProject ? html`<td><a href="/dashboard/projects/${encodeURIComponent(a.projectId)}">${a.projectId}</a></td>` : ''}
        <td>${threshold} <span class="muted small">(${a.period})</span></td><td class="r">${formatNumber(a.balance.remaining)}</td>
        <td><span class="chip ${chip}">${a.state}</span></td>
        <td class="attempts">${a.attempts.map((t) => html`<span class="attempt ${t.error ? 'bad' : 'good'}" title="${t.at}${t.error ? ' · ' + t.error : ''}">${t.status ?? '×'}</span>`)}</td></tr>`
    })}</tbody></table>`
}

/** Everything of a project page that changes by itself (live fragment). */
export function projectFragment(summary: ProjectSummary, viewer: DashboardViewer): SafeHtml {
  const { balance, window } = summary
  const errorRate = window.requests ? (window.errors / window.requests) * 100 : 0
  return html`<section class="tiles">
      <div class="card tile credits"><div class="muted small">Credits left · ${balance.period}</div>
        <div class="big" data-field="credits-left">${formatNumber(balance.remaining)}</div>
        ${meter(balance.percentLeft)}
        <div class="muted small">${formatNumber(balance.used)} used of ${formatNumber(balance.allocation)}</div></div>
      <div class="card tile"><div class="muted small">Requests · 24 h</div><div class="big" data-field="requests">${formatNumber(window.requests)}</div></div>
      <div class="card tile"><div class="muted small">Credits spent · 24 h</div><div class="big">${formatNumber(window.credits)}</div></div>
      <div class="card tile"><div class="muted small">Error rate · 24 h</div><div class="big ${errorRate > 5 ? 'bad' : ''}">${errorRate.toFixed(1)}%</div>
        <div class="muted small">${formatNumber(window.errors)} errors</div></div>
    </section>
    <section class="cols">
      <div class="card"><h2>Answers by status class</h2>${statusBreakdown(summary)}</div>
      <div class="card"><h2>Busiest routes</h2>${routesTable(summary.routes)}</div>
    </section>
    <section class="cols">
      <div class="card"><h2>Keys</h2>${keysTable(summary)}</div>
      <div class="card"><h2>Features</h2>${featureToggles(summary, viewer)}</div>
    </section>
    <section class="card"><h2>Low-balance alerts</h2>${alertsList(summary.alerts, false)}</section>`
}

/**
 * The Workstation card: filled and refreshed by app.js from the admin API (state, failure reason,
 * actions the state allows, Open in a new tab, and a link button when the user has no linked IdP
 * account). Rendered only when the gateway runs workstations and the project has the feature on.
 */
function workstationCard(projectId: string, openBase: string): SafeHtml {
  const verb = (action: string, label: string, cls = '') => html`<button type="button" class="${cls}" data-action="workstation" data-verb="${action}" disabled>${label}</button>`
  return html`<section class="card" id="workstation" data-project="${projectId}" data-open-base="${openBase}">
      <div class="card-head"><h2>Workstation</h2><span class="chip" data-slot="state">loading…</span></div>
      <p class="error" data-slot="reason" role="alert" hidden></p>
      <div class="buttons workstation-actions">
        ${verb('provision', 'Provision', 'primary')}${verb('start', 'Start')}${verb('stop', 'Stop')}${verb('delete', 'Delete', 'danger')}
        <a class="button primary" data-slot="open" target="_blank" rel="noopener" hidden>Open</a>
      </div>
      <p class="muted small" data-slot="identity"></p>
      <button type="button" data-action="link-identity" hidden>Link your identity</button>
    </section>`
}

export function projectPage(viewer: DashboardViewer, summary: ProjectSummary, workstationBase?: string): string {
  const { project } = summary
  const id = encodeURIComponent(project.id)
  return layout(
    project.name,
    viewer,
    html`<div class="page-head" data-project-id="${project.id}">
      <div><a class="muted small" href="/dashboard/projects">← Projects</a><h1>${project.name} <span class="chip">${project.plan}</span></h1>
        <div class="muted small">${project.id} · scopes: ${[...project.scopes].join(', ') || 'none'}</div></div>
      <span class="muted small live-note">updates every ${REFRESH_MS / 1000} s</span>
    </div>
    <p class="error" id="action-error" role="alert" hidden></p>
    <section class="card chart-card">
      <div class="card-head"><h2>Requests per API type · last 24 h</h2>
        <a class="small" href="/admin/projects/${id}/usage?granularity=hour&amp;by=route&amp;format=csv" download>CSV</a></div>
      <div id="usage-chart" data-src="/dashboard/fragments/projects/${id}/chart.json"></div>
    </section>
    ${workstationBase !== undefined ? workstationCard(project.id, workstationBase) : ''}
    <div data-live="/dashboard/fragments/projects/${id}">${projectFragment(summary, viewer)}</div>
    <section class="card" id="credit-ledger" data-src="/admin/projects/${id}/credits/ledger" hidden>
      <h2>Credit ledger · this period</h2>
      <table class="table"><thead><tr><th>Entry</th><th>Detail</th><th class="r">Credits</th></tr></thead><tbody></tbody></table>
    </section>
    <section class="card">
      <h2>New key</h2>
      <form id="create-key" class="inline" data-project="${project.id}">
        <label>Label <input name="label" required pattern="[a-zA-Z0-9_.:\\-]{1,64}" placeholder="e.g. backend-prod"></label>
        <button type="submit" class="primary">Create key</button>
        <p class="error" role="alert" hidden></p>
      </form>
    </section>
    <dialog id="password-dialog">
      <form method="dialog" id="password-form">
        <h2 data-slot="title">Confirm</h2>
        <p class="muted" data-slot="text"></p>
        <label>Your password <input name="password" type="password" autocomplete="current-password" required></label>
        <p class="error" role="alert" hidden></p>
        <div class="buttons"><button type="button" data-action="close-dialog">Cancel</button><button type="submit" class="primary">Confirm</button></div>
      </form>
    </dialog>
    <dialog id="key-dialog">
      <div class="dialog-body">
        <h2>Copy your new key</h2>
        <p class="muted">It is shown once; tollgate keeps only its hash.</p>
        <pre class="secret" data-slot="key"></pre>
        <p class="muted small" data-slot="note"></p>
        <div class="buttons"><button type="button" class="primary" data-action="close-dialog">Done</button></div>
      </div>
    </dialog>`,
    { active: 'projects', chart: true },
  )
}

/** One row per project plus totals (live fragment of the operator view). */
export function operatorFragment(summaries: readonly ProjectSummary[], alerts: readonly AlertRecord[]): SafeHtml {
  const total = { requests: 0, errors: 0, credits: 0 }
  for (const s of summaries) {
    total.requests += s.window.requests
    total.errors += s.window.errors
    total.credits += s.window.credits
  }
  const low = summaries.filter((s) => s.balance.allocation > 0 && s.balance.percentLeft <= 20).length
  return html`<section class="tiles">
      <div class="card tile"><div class="muted small">Projects</div><div class="big">${summaries.length}</div></div>
      <div class="card tile"><div class="muted small">Requests · 24 h</div><div class="big">${formatNumber(total.requests)}</div></div>
      <div class="card tile"><div class="muted small">Errors · 24 h</div><div class="big ${total.errors ? 'bad' : ''}">${formatNumber(total.errors)}</div></div>
      <div class="card tile"><div class="muted small">Below 20% credits</div><div class="big ${low ? 'bad' : ''}">${low}</div></div>
    </section>
    <section class="card"><h2>All projects</h2>
    <table class="table">
      <thead><tr><th>Project</th><th>Plan</th><th>Credits left</th><th class="r">Requests 24 h</th><th class="r">Errors</th><th class="r">Credits 24 h</th><th>Features</th></tr></thead>
      <tbody>${summaries.map(
        (s) => html`<tr><td><a href="/dashboard/projects/${encodeURIComponent(s.project.id)}">${s.project.name}</a> <span class="muted small">${s.project.id}</span></td>
          <td>${s.project.plan}</td><td class="meter-cell">${meter(s.balance.percentLeft)} <span class="small">${formatNumber(s.balance.remaining)} / ${formatNumber(s.balance.allocation)}</span></td>
          <td class="r">${formatNumber(s.window.requests)}</td><td class="r ${s.window.errors ? 'bad' : ''}">${formatNumber(s.window.errors)}</td>
          <td class="r">${formatNumber(s.window.credits)}</td><td>${featureBadges(s)}</td></tr>`,
      )}</tbody>
    </table></section>
    <section class="card"><h2>Latest alerts</h2>${alertsList(alerts.slice(0, 10), true)}</section>`
}

export function operatorPage(viewer: DashboardViewer, summaries: readonly ProjectSummary[], alerts: readonly AlertRecord[]): string {
  return layout(
    'Operator',
    viewer,
    html`<div class="page-head"><h1>Operator view</h1><span class="muted small live-note">updates every ${REFRESH_MS / 1000} s</span></div>
    <div data-live="/dashboard/fragments/operator">${operatorFragment(summaries, alerts)}</div>`,
    { active: 'operator' },
  )
}

export function alertsFragment(alerts: readonly AlertRecord[]): SafeHtml {
  return html`<section class="card">${alertsList(alerts, true)}</section>`
}

export function alertsPage(viewer: DashboardViewer, alerts: readonly AlertRecord[]): string {
  return layout(
    'Alerts',
    viewer,
    html`<div class="page-head"><h1>Low-balance alerts</h1><span class="muted small live-note">updates every ${REFRESH_MS / 1000} s</span></div>
    <p class="muted">Each threshold of a project fires once per billing period as a signed webhook; every delivery attempt is listed (hover for its time and error).</p>
    <div data-live="/dashboard/fragments/alerts">${alertsFragment(alerts)}</div>`,
    { active: 'alerts' },
  )
}

/** A plain message page (404, no access). */
export function messagePage(viewer: DashboardViewer | undefined, title: string, text: string): string {
  return layout(title, viewer, html`<section class="card signin"><h1>${title}</h1><p>${text}</p><p><a href="/dashboard/projects">Back to projects</a></p></section>`)
}
