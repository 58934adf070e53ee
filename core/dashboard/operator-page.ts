/**
 * The operator view: every project at a glance (totals, one row per project, the latest alerts) and
 * the refusals no project owns (a key no project has, counted per route and answer under
 * `UNATTRIBUTED` by traffic.ts): a scan with made-up keys shows here and nowhere else.
 */
import type { AlertRecord } from '../alerts/low-balance.ts'
import type { ProjectSummary } from './data.ts'
import { formatNumber, html, when, type SafeHtml } from './html.ts'
import { layout, REFRESH_MS, type DashboardViewer } from './layout.ts'
import { alertsList, featureBadges, meter, refusalReason, scroller } from './parts.ts'
import { unattributedLabel, type TrafficTally } from './traffic.ts'

/** Refusals of keys no project has, by route and answer, most first (the presented key is never kept). */
export function unattributedTable(tally: TrafficTally | undefined): SafeHtml {
  const rows = Object.entries(tally?.keys ?? {})
    .map(([label, key]) => ({ ...unattributedLabel(label), count: key.requests, lastUsed: key.lastUsed }))
    .sort((a, b) => b.count - a.count || (a.route < b.route ? -1 : a.route > b.route ? 1 : a.answer < b.answer ? -1 : 1))
  const body = rows.length === 0
    ? html`<p class="muted">None: every refused key belonged to a project.</p>`
    : scroller('Refused without a project', html`<table class="table unattributed">
      <thead><tr><th scope="col">Route</th><th scope="col">Code and why</th><th scope="col" class="r">Count</th><th scope="col">Last</th></tr></thead>
      <tbody>${rows.map((r) => html`<tr data-unattributed="${r.route}"><td><code>${r.route}</code></td>
        <td class="code">${r.answer ? html`<code>${r.answer}</code> <span class="small why">${refusalReason(r.answer)}</span>` : html`<span class="muted">not recorded</span>`}</td>
        <td class="r"><span class="phone-only muted small">Count </span>${formatNumber(r.count)}</td><td class="when"><span class="phone-only muted small">Last </span>${r.lastUsed ? when(r.lastUsed) : ''}</td></tr>`)}</tbody></table>`)
  return html`<section class="card" id="unattributed" aria-labelledby="unattributed-title"><h2 id="unattributed-title">Refused without a project</h2>
    <p class="muted small">Requests with a key no project has, per route, since the tally began. The key itself is never stored.</p>${body}</section>`
}

/** One row per project plus totals (live fragment of the operator view). */
export function operatorFragment(summaries: readonly ProjectSummary[], alerts: readonly AlertRecord[], unattributed?: TrafficTally): SafeHtml {
  const total = { requests: 0, errors: 0, credits: 0 }
  for (const s of summaries) {
    total.requests += s.window.requests
    total.errors += s.window.errors
    total.credits += s.window.credits
  }
  const low = summaries.filter((s) => s.balance.total > 0 && s.balance.percentLeft <= 20).length
  return html`<section class="tiles" aria-label="Totals">
      <div class="card tile"><div class="muted small">Projects</div><div class="big">${summaries.length}</div></div>
      <div class="card tile"><div class="muted small">Requests · 24 h</div><div class="big">${formatNumber(total.requests)}</div></div>
      <div class="card tile"><div class="muted small">Errors · 24 h</div><div class="big ${total.errors ? 'bad' : ''}">${formatNumber(total.errors)}</div></div>
      <div class="card tile"><div class="muted small">Below 20% credits</div><div class="big ${low ? 'bad' : ''}">${low}</div></div>
    </section>
    <section class="card"><h2>All projects</h2>
    ${scroller('All projects', html`<table class="table">
      <thead><tr><th>Project</th><th>Plan</th><th>Credits left</th><th class="r">Requests 24 h</th><th class="r">Errors</th><th class="r">Refused</th><th class="r">Credits 24 h</th><th>Features</th></tr></thead>
      <tbody>${summaries.map(
        (s) => html`<tr><td class="name-cell"><a href="/dashboard/projects/${encodeURIComponent(s.project.id)}" class="clip" title="${s.project.name}">${s.project.name}</a> <span class="muted small clip" title="${s.project.id}">${s.project.id}</span></td>
          <td>${s.project.plan}</td><td class="meter-cell">${meter(s.balance.percentLeft, `Credits of ${s.project.id}`)} <span class="small">${formatNumber(s.balance.remaining)} / ${formatNumber(s.balance.total)}</span></td>
          <td class="r">${formatNumber(s.window.requests)}</td><td class="r ${s.window.errors ? 'bad' : ''}">${formatNumber(s.window.errors)}</td>
          <td class="r ${s.traffic.refusals ? 'bad' : ''}">${formatNumber(s.traffic.refusals)}</td>
          <td class="r">${formatNumber(s.window.credits)}</td><td>${featureBadges(s)}</td></tr>`,
      )}</tbody>
    </table>`)}</section>
    ${unattributedTable(unattributed)}
    <section class="card"><h2>Latest alerts</h2>${alertsList(alerts.slice(0, 10), true)}</section>`
}

/** `extra`: panels of their own files placed after the projects (upstreams-panel.ts). */
export function operatorPage(viewer: DashboardViewer, summaries: readonly ProjectSummary[], alerts: readonly AlertRecord[], unattributed?: TrafficTally, extra?: SafeHtml): string {
  return layout(
    'Operator',
    viewer,
    html`<div class="page-head"><h1>Operator view</h1><span class="muted small live-note">updates every ${REFRESH_MS / 1000} s</span></div>
    <div data-live="/dashboard/fragments/operator">${operatorFragment(summaries, alerts, unattributed)}</div>${extra}`,
    { active: 'operator' },
  )
}

