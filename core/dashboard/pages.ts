/**
 * The dashboard's pages and live fragments, as template functions (server-rendered HTML). The
 * script islands (assets/app.js) only refresh `[data-live]` regions from the fragment URLs, draw
 * the uPlot chart and send the admin API calls of buttons and dialogs.
 */
import type { AlertRecord } from '../alerts/low-balance.ts'
import type { AccountRow, ProjectSummary, RouteStat } from './data.ts'
import { formatNumber, html, type SafeHtml } from './html.ts'

/** Who is looking (from the session). */
export interface DashboardViewer {
  /** Account name shown in the header. */
  user: string
  operator: boolean
  /** The account's id (marks its own row on the Accounts page). */
  userId?: string
  /** Sent back by the islands with every change (CSRF). */
  csrfToken: string
}

/** Polling interval of the live regions and the chart, ms. */
export const REFRESH_MS = 3000

const FEATURES: { key: 'proveBatch' | 'sponsoredWallet' | 'relayToConfidentialSpace' | 'tee' | 'workstation'; label: string; help: string; operatorOnly: boolean }[] = [
  { key: 'proveBatch', label: 'ZK Prove Batch', help: 'Batched proofs on /prove-batch', operatorOnly: false },
  { key: 'sponsoredWallet', label: 'Sponsored Wallet', help: 'Honour the sponsored request header', operatorOnly: false },
  { key: 'relayToConfidentialSpace', label: 'Relay to Confidential Space', help: 'Relay proof jobs to the confidential space', operatorOnly: true },
  { key: 'tee', label: 'TEE proving', help: 'tee_enabled requests go to the TEE pool', operatorOnly: true },
  { key: 'workstation', label: 'Cloud workstation', help: 'A personal workstation for this project (reload to see its card)', operatorOnly: true },
]

function layout(title: string, viewer: DashboardViewer | undefined, body: SafeHtml, options: { active?: string; chart?: boolean } = {}): string {
  const nav = viewer
    ? html`<nav class="nav">
        <a href="/dashboard/projects" class="${options.active === 'projects' ? 'active' : ''}">Projects</a>
        ${viewer.operator ? html`<a href="/dashboard/operator" class="${options.active === 'operator' ? 'active' : ''}">Operator</a>` : ''}
        <a href="/dashboard/alerts" class="${options.active === 'alerts' ? 'active' : ''}">Alerts</a>
        ${viewer.operator ? html`<a href="/dashboard/accounts" class="${options.active === 'accounts' ? 'active' : ''}">Accounts</a>` : ''}
      </nav>
      <div class="who"><span class="user">${viewer.user}</span>${viewer.operator ? html`<span class="chip">operator</span>` : ''}
        <button type="button" class="link" data-action="sign-out">Sign out</button></div>`
    : ''
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="${viewer?.csrfToken ?? ''}">
<meta name="refresh-ms" content="${REFRESH_MS}">
<title>${title} · tollgate</title>
<link rel="icon" href="/dashboard/assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/dashboard/assets/app.css">
${options.chart ? html`<link rel="stylesheet" href="/dashboard/assets/uPlot.min.css"><script src="/dashboard/assets/uPlot.iife.min.js" defer></script>` : ''}
<script src="/dashboard/assets/app.js" defer></script>
</head>
<body>
<header class="top"><a class="brand" href="/dashboard"><span class="logo">◆</span> tollgate</a>${nav}</header>
<main>${body}</main>
</body>
</html>`.text
}

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

/** 2026-11-24 22:10 UTC */
function when(ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 16) + ' UTC'
}

/** Checkboxes of the project ids that exist (the API refuses any other). */
function projectPicker(projectIds: readonly string[], legend: string): SafeHtml {
  return html`<fieldset class="picker" data-field="projects"><legend>${legend}</legend>
    ${projectIds.length === 0
      ? html`<p class="muted small">No projects yet.</p>`
      : html`<div class="checks">${projectIds.map((id) => html`<label class="check"><input type="checkbox" name="projects" value="${id}"> <code>${id}</code></label>`)}</div>`}
    <p class="field-error" data-error-for="projects" hidden></p>
  </fieldset>`
}

/** The users table (re-rendered after every change). Never a password or a hash: {@link AccountRow} has none. */
export function accountsFragment(viewer: DashboardViewer, accounts: readonly AccountRow[]): SafeHtml {
  if (accounts.length === 0) return html`<p class="muted">No accounts yet.</p>`
  return html`<table class="table accounts">
    <thead><tr><th>Email</th><th>Role</th><th>Projects</th><th>Created</th><th></th></tr></thead>
    <tbody>${accounts.map((a) => {
      const self = a.id === viewer.userId
      return html`<tr data-user="${a.id}" data-email="${a.email}" data-role="${a.role}" data-projects="${JSON.stringify(a.projects)}" data-self="${self ? 'true' : 'false'}">
        <td class="email">${a.email}${self ? html` <span class="chip">you</span>` : ''}</td>
        <td><span class="chip ${a.role === 'operator' ? 'warn' : ''}">${a.role}</span></td>
        <td class="projects">${a.role === 'operator'
          ? html`<span class="muted small">every project</span>`
          : a.projects.length ? a.projects.map((id) => html`<code>${id}</code> `) : html`<span class="muted small">none</span>`}</td>
        <td class="small">${when(a.createdAt)}</td>
        <td class="actions">
          <button type="button" data-action="edit-user">Role &amp; projects</button>
          <button type="button" data-action="user-password">Set password</button>
          <button type="button" class="danger" data-action="delete-user" ${self ? html`disabled title="You cannot delete your own account"` : ''}>Delete</button>
        </td></tr>`
    })}</tbody></table>`
}

/**
 * Users for operators: the list, a create form and dialogs to change a role or projects, set a
 * password and delete. Every change is an admin API call (/admin/users) from assets/app.js; the
 * API's rules (and its 409 self_lockout) are the only ones, the form checks the password length
 * and confirmation before sending.
 */
export function accountsPage(viewer: DashboardViewer, accounts: readonly AccountRow[], projectIds: readonly string[]): string {
  const passwordFields = (autocomplete: string) => html`
    <label>Password <input name="password" type="password" autocomplete="${autocomplete}" minlength="12">
      <span class="hint muted small">At least 12 characters.</span><span class="field-error" data-error-for="password" hidden></span></label>
    <label>Confirm password <input name="confirm" type="password" autocomplete="${autocomplete}">
      <span class="field-error" data-error-for="confirm" hidden></span></label>`
  const roleSelect = html`<select name="role"><option value="owner">owner: the projects listed</option><option value="operator">operator: every project and account</option></select>`
  return layout(
    'Accounts',
    viewer,
    html`<div class="page-head"><div><h1>Accounts</h1>
      <div class="muted small">Operators see and change every project and account; an owner sees only the projects listed.</div></div></div>
    <p class="error" id="action-error" role="alert" hidden></p>
    <p class="notice" id="action-notice" role="status" hidden></p>
    <section class="card"><h2>Users</h2><div id="accounts" data-src="/dashboard/fragments/accounts">${accountsFragment(viewer, accounts)}</div></section>
    <section class="card">
      <h2>New account</h2>
      <form id="create-user" class="account-form" novalidate>
        <div class="fields">
          <label>Email <input name="email" type="text" inputmode="email" autocomplete="off" spellcheck="false" placeholder="dev@example.com">
            <span class="field-error" data-error-for="email" hidden></span></label>
          <label>Role ${roleSelect}<span class="field-error" data-error-for="role" hidden></span></label>
          ${passwordFields('new-password')}
        </div>
        ${projectPicker(projectIds, 'Projects (owners)')}
        <p class="error" role="alert" hidden></p>
        <button type="submit" class="primary">Create account</button>
      </form>
    </section>
    <dialog id="user-edit-dialog">
      <form method="dialog" id="user-edit-form" novalidate>
        <h2>Role and projects</h2>
        <p class="muted" data-slot="email"></p>
        <label>Role ${roleSelect}<span class="hint muted small" data-slot="self-note" hidden>You cannot demote your own account.</span>
          <span class="field-error" data-error-for="role" hidden></span></label>
        ${projectPicker(projectIds, 'Projects (owners)')}
        <p class="error" role="alert" hidden></p>
        <div class="buttons"><button type="button" data-action="close-dialog">Cancel</button><button type="submit" class="primary">Save</button></div>
      </form>
    </dialog>
    <dialog id="user-password-dialog">
      <form method="dialog" id="user-password-form" novalidate>
        <h2>Set a new password</h2>
        <p class="muted" data-slot="text"></p>
        ${passwordFields('new-password')}
        <p class="error" role="alert" hidden></p>
        <div class="buttons"><button type="button" data-action="close-dialog">Cancel</button><button type="submit" class="primary">Set password</button></div>
      </form>
    </dialog>
    <dialog id="user-delete-dialog">
      <form method="dialog" id="user-delete-form">
        <h2>Delete account</h2>
        <p data-slot="text"></p>
        <p class="error" role="alert" hidden></p>
        <div class="buttons"><button type="button" data-action="close-dialog">Cancel</button><button type="submit" class="primary danger-fill">Delete</button></div>
      </form>
    </dialog>`,
    { active: 'accounts' },
  )
}

/** A plain message page (404, no access). */
export function messagePage(viewer: DashboardViewer | undefined, title: string, text: string): string {
  return layout(title, viewer, html`<section class="card signin"><h1>${title}</h1><p>${text}</p><p><a href="/dashboard/projects">Back to projects</a></p></section>`)
}
