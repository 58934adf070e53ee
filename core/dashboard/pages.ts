/**
 * The dashboard's pages and live fragments, as template functions (server-rendered HTML). The
 * script islands (assets/app.js) only refresh `[data-live]` regions from the fragment URLs, draw
 * the uPlot chart and send the admin API calls of buttons and dialogs.
 */
import type { AlertRecord } from '../alerts/low-balance.ts'
import type { BalanceView, ProjectSummary, RouteStat } from './data.ts'
import { ROTATED_LABEL } from '../admin/settings-admin-input.ts'
import { formatNumber, html, when, type SafeHtml } from './html.ts'
export { when } from './html.ts'
import { layout, REFRESH_MS, type DashboardViewer } from './layout.ts'
import { MAX_PASSWORD_LENGTH } from '../accounts/password.ts'
import { newProjectCard, projectSettingsCard, type AlertThresholdsView } from './operator-forms.ts'
import { FEATURES, featureBadges, meter, refusalReason, scroller } from './parts.ts'
export { refusalReason } from './parts.ts'
export { alertsList } from './parts.ts'
import { alertsList } from './parts.ts'

/** The sign-in form; the island posts it to the session endpoint. */
export function signInPage(): string {
  return layout(
    'Sign in',
    undefined,
    html`<section class="signin card">
      <h1>Sign in</h1>
      <p class="muted">Use your tollgate account. Operators create accounts on the Accounts page, with <code>tollgate user add</code> or the admin API.</p>
      <form id="sign-in" autocomplete="on" novalidate>
        <label>Email <input name="email" type="email" autocomplete="username" maxlength="255" required autofocus aria-describedby="sign-in-error"></label>
        <label>Password <input name="password" type="password" autocomplete="current-password" maxlength="${MAX_PASSWORD_LENGTH}" required aria-describedby="sign-in-error"></label>
        <p class="error" id="sign-in-error" role="alert" hidden></p>
        <button type="submit" class="primary">Sign in</button>
      </form>
    </section>`,
  )
}

/** What a balance is made of, in the ledger's terms. */
function creditsBreakdown(balance: BalanceView): SafeHtml {
  return html`<dl class="ledger-terms small">
    <div><dt>Allocation</dt><dd>${formatNumber(balance.allocation)}</dd></div>
    <div><dt>Granted</dt><dd>${formatNumber(balance.granted)}</dd></div>
    <div><dt>Used</dt><dd>${formatNumber(balance.used)}</dd></div>
    ${balance.pending !== undefined ? html`<div><dt>Pending</dt><dd>${formatNumber(balance.pending)}</dd></div>` : ''}
    <div><dt>Left</dt><dd>${formatNumber(balance.remaining)}</dd></div>
  </dl>`
}

function projectCard(summary: ProjectSummary): SafeHtml {
  const { project, balance, window } = summary
  return html`<a class="card project-card" href="/dashboard/projects/${encodeURIComponent(project.id)}" data-project="${project.id}">
    <div class="card-head"><h2 class="clip" title="${project.name}">${project.name}</h2><span class="chip">${project.plan}</span></div>
    <div class="muted small clip" title="${project.id}">${project.id}</div>
    <div class="credits-line"><span class="big" data-field="credits-left">${formatNumber(balance.remaining)}</span>
      <span class="muted">left of ${formatNumber(balance.total)} credits · ${balance.period}</span></div>
    ${meter(balance.percentLeft, 'Credits')}
    <div class="muted small">${formatNumber(balance.allocation)} allocation + ${formatNumber(balance.granted)} granted − ${formatNumber(balance.used)} used</div>
    <dl class="mini">
      <div><dt>Requests 24 h</dt><dd>${formatNumber(window.requests)}</dd></div>
      <div><dt>Refused</dt><dd class="${summary.traffic.refusals ? 'bad' : ''}">${formatNumber(summary.traffic.refusals)}</dd></div>
      <div><dt>Credits 24 h</dt><dd>${formatNumber(window.credits)}</dd></div>
    </dl>
    <div class="badges">${featureBadges(summary)}</div>
  </a>`
}

/** The project grid (live fragment). */
export function projectsFragment(summaries: readonly ProjectSummary[]): SafeHtml {
  if (summaries.length === 0) return html`<p class="empty card">No projects yet. An operator creates one with New project above (or in gateway.yaml).</p>`
  return html`<div class="grid">${summaries.map(projectCard)}</div>`
}

export function projectsPage(viewer: DashboardViewer, summaries: readonly ProjectSummary[]): string {
  return layout(
    'Projects',
    viewer,
    html`<div class="page-head"><h1>Projects</h1><span class="muted small live-note">updates every ${REFRESH_MS / 1000} s</span></div>
    <p class="error" id="action-error" role="alert" hidden></p>
    <p class="notice" id="action-notice" role="status" hidden></p>
    ${viewer.operator ? newProjectCard() : ''}
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
    return html`<li><span class="label">${c}</span><meter class="bar s${c}" min="0" max="${total}" value="${n}" aria-label="${c}: ${n} of ${total}"></meter><span class="num">${formatNumber(n)}</span><span class="muted small">${((n / total) * 100).toFixed(1)}%</span></li>`
  })}</ul>`
}

/** Answers of the last 24 h by status and refusal code, the refusals explained. */
function answersTable(summary: ProjectSummary): SafeHtml {
  const { answers } = summary.traffic
  if (answers.length === 0) return html`<p class="muted">No answers in the last 24 hours.</p>`
  return scroller('Answers by status and refusal code', html`<table class="table answers">
    <thead><tr><th>Answer</th><th>Why</th><th class="r">Count</th></tr></thead>
    <tbody>${answers.map((a) => html`<tr data-answer="${a.answer}" class="${a.refusal ? 'refusal' : ''}"><td><code>${a.answer}</code>${a.refusal ? html` <span class="chip off">refused</span>` : ''}</td>
      <td class="small">${a.refusal ? refusalReason(a.answer, summary.project) : ''}</td><td class="r">${formatNumber(a.count)}</td></tr>`)}</tbody></table>`)
}

function routesTable(routes: readonly RouteStat[]): SafeHtml {
  if (routes.length === 0) return html`<p class="muted">No traffic yet.</p>`
  return scroller('Busiest routes', html`<table class="table">
    <thead><tr><th>Route</th><th>API type</th><th class="r">Requests</th><th class="r">Errors</th><th class="r">Mean</th><th class="r">Slowest</th></tr></thead>
    <tbody>${routes.slice(0, 8).map(
      (r) => html`<tr><td><code>${r.route}</code></td><td>${r.apiType}</td><td class="r">${formatNumber(r.requests)}</td>
        <td class="r ${r.errors ? 'bad' : ''}">${formatNumber(r.errors)}</td><td class="r">${r.meanLatencyMs.toFixed(1)} ms</td><td class="r">${r.maxLatencyMs.toFixed(0)} ms</td></tr>`,
    )}</tbody></table>`)
}

/**
 * The keys, by label (a rotation's leftover sorts right after its successor, and rows keep their
 * place after an action). A leftover in its grace period offers no Rotate or Disable: it expires on
 * its own, and the API refuses to rotate it (409 key_in_grace).
 */
export function keysFragment(summary: ProjectSummary): SafeHtml {
  const { project } = summary
  if (project.keys.length === 0) return html`<p class="muted">No keys yet: create one below.</p>`
  const now = Date.now()
  const keys = [...project.keys].sort((a, b) => (a.label < b.label ? -1 : a.label > b.label ? 1 : 0))
  return scroller('Keys', html`<table class="table keys">
    <thead><tr><th>Label</th><th>State</th><th>Expires</th><th class="r">Requests</th><th class="r">Refused</th><th>Last used</th><th><span class="sr-only">Actions</span></th></tr></thead>
    <tbody>${keys.map((key) => {
      const expired = key.expiresAt !== undefined && key.expiresAt <= now
      const tally = summary.traffic.keys[key.label]
      const grace = !expired && !key.disabled && ROTATED_LABEL.test(key.label)
      const state = key.disabled
        ? html`<span class="chip off">disabled</span>`
        : expired
          ? html`<span class="chip off">expired</span>`
          : grace
            ? html`<span class="chip warn">grace period</span>`
            : html`<span class="chip on">active</span>`
      const actions = grace || expired
        ? html`<span class="muted small">${grace ? 'expires on its own' : ''}</span>`
        : html`<button type="button" data-action="rotate-key" data-label="${key.label}" ${key.disabled ? 'disabled' : ''} aria-label="Rotate ${key.label}">Rotate</button>
          ${key.disabled
            ? html`<button type="button" data-action="enable-key" data-label="${key.label}" aria-label="Enable ${key.label}">Enable</button>`
            : html`<button type="button" class="danger" data-action="disable-key" data-label="${key.label}" aria-label="Disable ${key.label}">Disable</button>`}`
      return html`<tr data-key="${key.label}"><td class="label-cell"><code title="${key.label}">${key.label}</code></td><td>${state}</td>
        <td>${key.expiresAt === undefined ? html`<span class="muted">never</span>` : when(key.expiresAt)}</td>
        <td class="r" data-field="key-requests"><span class="phone-only muted small">Requests </span>${formatNumber(tally?.requests ?? 0)}</td>
        <td class="r ${tally?.refusals ? 'bad' : ''}" data-field="key-refusals"><span class="phone-only muted small">Refused </span>${formatNumber(tally?.refusals ?? 0)}</td>
        <td><span class="phone-only muted small">Last used </span>${tally?.lastUsed ? when(tally.lastUsed) : html`<span class="muted">not used</span>`}</td>
        <td class="actions">${actions}</td></tr>`
    })}</tbody></table>`)
}

function featureToggles(summary: ProjectSummary, viewer: DashboardViewer): SafeHtml {
  return html`<ul class="features">${FEATURES.map((f) => {
    const on = summary.project.features[f.key]
    const locked = f.operatorOnly && !viewer.operator
    return html`<li><div><strong id="feature-${f.key}">${f.label}</strong><div class="muted small">${f.help}${f.operatorOnly ? ' · operator only' : ''}</div></div>
      <button type="button" class="switch ${on ? 'on' : ''}" role="switch" aria-checked="${on ? 'true' : 'false'}" aria-labelledby="feature-${f.key}" data-action="toggle-feature"
        data-feature="${f.key}" data-label="${f.label}" data-next="${on ? 'false' : 'true'}" ${locked ? 'disabled' : ''}><span></span><em>${on ? 'On' : 'Off'}</em></button></li>`
  })}</ul>`
}

/** Everything of a project page that changes by itself (live fragment). */
export function projectFragment(summary: ProjectSummary, viewer: DashboardViewer): SafeHtml {
  const { balance, window } = summary
  // Every answer counts when the tally has them (a refused request is an error to its client).
  const answered = summary.traffic.total || window.requests
  const failed = summary.traffic.total ? summary.traffic.failed : window.errors
  const errorRate = answered ? (failed / answered) * 100 : 0
  const workstation = summary.project.features.workstation || window.workstationMinutes > 0
  return html`<section class="tiles" aria-label="Figures">
      <div class="card tile credits"><div class="muted small">Credits left · ${balance.period}</div>
        <div class="big" data-announce="Credits left" data-field="credits-left">${formatNumber(balance.remaining)}</div>
        ${meter(balance.percentLeft, 'Credits')}
        ${creditsBreakdown(balance)}</div>
      <div class="card tile"><div class="muted small">Requests · 24 h</div><div class="big" data-announce="Requests in 24 hours" data-field="requests">${formatNumber(window.requests)}</div>
        <div class="muted small">metered${summary.traffic.total ? html`; ${formatNumber(summary.traffic.total)} answers in all` : ''}</div></div>
      <div class="card tile"><div class="muted small">Refused · 24 h</div><div class="big ${summary.traffic.refusals ? 'bad' : ''}" data-field="refusals" data-announce="Refused in 24 hours">${formatNumber(summary.traffic.refusals)}</div>
        <div class="muted small">401, 402, 403 and 429 answers</div></div>
      <div class="card tile"><div class="muted small">Credits spent · 24 h</div><div class="big">${formatNumber(window.credits)}</div></div>
      <div class="card tile"><div class="muted small">Error rate · 24 h</div><div class="big ${errorRate > 5 ? 'bad' : ''}">${errorRate.toFixed(1)}%</div>
        <div class="muted small">${formatNumber(failed)} of ${formatNumber(answered)} answers failed or refused</div></div>
      ${workstation ? html`<div class="card tile"><div class="muted small">Workstation minutes · 24 h</div><div class="big" data-field="workstation-minutes">${formatNumber(window.workstationMinutes)}</div></div>` : ''}
    </section>
    <section class="cols">
      <div class="card"><h2>Answers by status class · 24 h</h2>${statusBreakdown(summary)}</div>
      <div class="card"><h2>Busiest routes</h2>${routesTable(summary.routes)}</div>
    </section>
    <section class="card" id="answers"><div class="card-head"><h2>Answers by status and refusal code · 24 h</h2>
      <span class="small">Export: <a href="/dashboard/fragments/projects/${encodeURIComponent(summary.project.id)}/traffic.csv" download>CSV</a> ·
        <a href="/dashboard/fragments/projects/${encodeURIComponent(summary.project.id)}/traffic.ndjson" download>NDJSON</a> ·
        <a href="/dashboard/fragments/projects/${encodeURIComponent(summary.project.id)}/keys.csv" download>keys CSV</a></span></div>
      ${answersTable(summary)}</section>
    <section class="card"><h2>Features</h2>${featureToggles(summary, viewer)}</section>
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

export function projectPage(viewer: DashboardViewer, summary: ProjectSummary, workstationBase?: string, alertThresholds?: AlertThresholdsView): string {
  const { project } = summary
  const id = encodeURIComponent(project.id)
  return layout(
    project.name,
    viewer,
    html`<div class="page-head" data-project-id="${project.id}" data-project-name="${project.name}">
      <div class="head-text"><a class="small" href="/dashboard/projects">← Projects</a><h1 class="wrap">${project.name} <span class="chip">${project.plan}</span></h1>
        <div class="muted small wrap">${project.id} · scopes: ${[...project.scopes].join(', ') || 'none'}</div></div>
      <span class="muted small live-note">updates every ${REFRESH_MS / 1000} s</span>
    </div>
    <p class="error" id="action-error" role="alert" hidden></p>
    <p class="notice" id="action-notice" role="status" hidden></p>
    ${viewer.operator ? projectSettingsCard(summary, alertThresholds) : ''}
    <section class="card chart-card">
      <div class="card-head"><h2>Requests per API type and refusals · last 24 h</h2>
        <a class="small" href="/admin/projects/${id}/usage?granularity=hour&amp;by=route&amp;format=csv" download>CSV</a></div>
      <div id="usage-chart" data-src="/dashboard/fragments/projects/${id}/chart.json" role="img" aria-label="Requests per hour and API type, and refused answers per reason, over the last 24 hours"></div>
    </section>
    ${workstationBase !== undefined ? workstationCard(project.id, workstationBase) : ''}
    <section class="card" id="keys">
      <h2>Keys</h2>
      <div data-live="/dashboard/fragments/projects/${id}/keys">${keysFragment(summary)}</div>
      <form id="create-key" class="inline" data-project="${project.id}" novalidate>
        <label>New key label <input name="label" required maxlength="64" pattern="[a-zA-Z0-9_.:\\-]{1,64}" placeholder="e.g. backend-prod" aria-describedby="label-rule">
          <span class="hint muted small" id="label-rule">1 to 64 letters, digits, _ . : or -</span></label>
        <button type="submit" class="primary">Create key</button>
        <p class="error" role="alert" hidden></p>
      </form>
    </section>
    <div data-live="/dashboard/fragments/projects/${id}">${projectFragment(summary, viewer)}</div>
    <section class="card" id="credit-ledger" data-src="/admin/projects/${id}/credits/ledger" hidden>
      <h2>Credit ledger · this period</h2>
      <div class="table-wrap" role="region" aria-label="Credit ledger" tabindex="0">
      <table class="table"><thead><tr><th>Entry</th><th>Detail</th><th class="r">Credits</th></tr></thead><tbody></tbody></table></div>
    </section>
    <dialog id="password-dialog" aria-labelledby="password-title">
      <form method="dialog" id="password-form">
        <h2 data-slot="title" id="password-title">Confirm</h2>
        <p class="muted" data-slot="text"></p>
        <label>Your password <input name="password" type="password" autocomplete="current-password" maxlength="${MAX_PASSWORD_LENGTH}" required></label>
        <p class="error" role="alert" hidden></p>
        <div class="buttons"><button type="button" data-action="close-dialog">Cancel</button><button type="submit" class="primary">Confirm</button></div>
      </form>
    </dialog>
    <dialog id="key-dialog" aria-labelledby="key-title">
      <div class="dialog-body">
        <h2 id="key-title">Copy your new key</h2>
        <p class="muted">It is shown once; tollgate keeps only its hash.</p>
        <pre class="secret" data-slot="key"></pre>
        <div class="buttons copy-row"><button type="button" data-action="copy-key">Copy key</button><span class="copied small" data-slot="copied" role="status"></span></div>
        <p class="muted small" data-slot="note"></p>
        <div class="buttons"><button type="button" class="primary" data-action="close-dialog">Done</button></div>
      </div>
    </dialog>`,
    { active: 'projects', chart: true },
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
    <p class="muted">Each threshold of a project fires once per billing period as a signed webhook; every delivery attempt is listed with its answer, time and error.</p>
    <div data-live="/dashboard/fragments/alerts">${alertsFragment(alerts)}</div>`,
    { active: 'alerts' },
  )
}

/** A plain message page (404, no access, an error) with the next step a person can take. */
export function messagePage(viewer: DashboardViewer | undefined, title: string, text: string, next?: SafeHtml): string {
  return layout(title, viewer, html`<section class="card signin"><h1>${title}</h1><p>${text}</p>
    <p>${next ?? (viewer ? html`<a href="/dashboard/projects">Back to projects</a>` : html`<a href="/dashboard/sign-in">Sign in</a>`)}</p></section>`)
}

/**
 * The admin API's refusal as a page, for a browser that navigated to an API URL: what happened in
 * words, the stable code, and the next step a person can take.
 */
export function errorPage(status: number, code: string, message: string): string {
  const title = status === 401 ? 'Sign in required' : status === 403 ? 'Not allowed' : status === 404 ? 'Not found' : status === 429 ? 'Too many attempts' : status >= 500 ? 'Something went wrong' : 'Request refused'
  const next = status === 401
    ? html`<a href="/dashboard/sign-in">Sign in</a>, then try again.`
    : status >= 500
      ? html`Try again in a moment; if it keeps failing, tell an operator (${code}). <a href="/dashboard/projects">Back to projects</a>`
      : html`<a href="/dashboard/projects">Back to projects</a>`
  return messagePage(undefined, title, `${message.charAt(0).toUpperCase()}${message.slice(1)} (${status} ${code}).`, next)
}
