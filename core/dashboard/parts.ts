/**
 * Pieces several dashboard pages share: the feature list, the credits meter, feature chips, a table
 * that scrolls inside its card, and the alert rows.
 */
import type { AlertRecord } from '../alerts/low-balance.ts'
import type { ProjectSummary } from './data.ts'
import { formatNumber, html, when, type SafeHtml } from './html.ts'

export const FEATURES: { key: 'proveBatch' | 'sponsoredWallet' | 'relayToConfidentialSpace' | 'tee' | 'workstation'; label: string; help: string; operatorOnly: boolean }[] = [
  { key: 'proveBatch', label: 'ZK Prove Batch', help: 'Batched proofs on /prove-batch', operatorOnly: false },
  { key: 'sponsoredWallet', label: 'Sponsored Wallet', help: 'Honour the sponsored request header', operatorOnly: false },
  { key: 'relayToConfidentialSpace', label: 'Relay to Confidential Space', help: 'Relay proof jobs to the confidential space', operatorOnly: true },
  { key: 'tee', label: 'TEE proving', help: 'tee_enabled requests go to the TEE pool', operatorOnly: true },
  { key: 'workstation', label: 'Cloud workstation', help: 'A personal workstation for this project (reload to see its card)', operatorOnly: true },
]

export function meter(percent: number, label: string): SafeHtml {
  const level = percent <= 10 ? 'low' : percent <= 30 ? 'warn' : 'ok'
  // A <meter> styles itself without inline style attributes (CSP: no 'unsafe-inline').
  return html`<meter class="meter ${level}" min="0" max="100" low="10.01" high="30.01" optimum="100" value="${percent.toFixed(1)}" aria-label="${label}: ${percent.toFixed(0)}% left">${percent.toFixed(0)}%</meter>`
}

export function featureBadges(summary: ProjectSummary): SafeHtml {
  const on = FEATURES.filter((f) => summary.project.features[f.key])
  return on.length ? html`${on.map((f) => html`<span class="chip on">${f.label}</span>`)}` : html`<span class="muted small">no ZK features</span>`
}

/** A table that scrolls inside its card on a narrow screen (the page itself never scrolls sideways). */
export function scroller(label: string, table: SafeHtml): SafeHtml {
  return html`<div class="table-wrap" role="region" aria-label="${label}" tabindex="0">${table}</div>`
}

/** Alert rows (project page, alerts page and operator view); every delivery attempt is readable without hovering. */
export function alertsList(alerts: readonly AlertRecord[], withProject: boolean): SafeHtml {
  if (alerts.length === 0) return html`<p class="muted">No low-balance alerts.</p>`
  return scroller('Low-balance alerts', html`<table class="table alerts">
    <thead><tr><th>Fired</th>${withProject ? html`<th>Project</th>` : ''}<th>Threshold</th><th class="r">Left</th><th>Delivery</th><th>Attempts</th></tr></thead>
    <tbody>${alerts.map((a) => {
      const threshold = a.threshold.percent !== undefined ? `${a.threshold.percent}% left` : `${formatNumber(a.threshold.remaining ?? 0)} left`
      const chip = a.state === 'delivered' ? 'on' : a.state === 'failed' ? 'off' : 'warn'
      return html`<tr><td>${when(a.firedAt)}</td>${withProject ? html`<td><a href="/dashboard/projects/${encodeURIComponent(a.projectId)}">${a.projectId}</a></td>` : ''}
        <td>${threshold} <span class="muted small">(${a.period})</span></td><td class="r">${formatNumber(a.balance.remaining)}</td>
        <td><span class="chip ${chip}">${a.state}</span></td>
        <td><ol class="attempts">${a.attempts.map((t) => html`<li><span class="attempt ${t.error ? 'bad' : 'good'}">${t.status ?? 'no answer'}</span> ${when(t.at)}${t.error ? html` <span class="small">${t.error}</span>` : ''}</li>`)}</ol></td></tr>`
    })}</tbody></table>`)
}


/** What a refusal means for this project, in words (the stable code stays beside it). */
export function refusalReason(answer: string, project?: ProjectSummary['project']): string {
  const [status, code] = answer.split(' ')
  switch (code) {
    case 'wrong_scope':
      return project ? `The route needs a scope this project lacks (its scopes: ${[...project.scopes].join(', ') || 'none'}).` : 'The route needs a scope the key’s project lacks.'
    case 'wrong_plan':
      return project ? `The route is for another plan (this project is on ${project.plan}).` : 'The route is for another plan.'
    case 'feature_disabled':
      return 'A feature the route needs is off for this project (see Features).'
    case 'credits_exhausted':
      return 'No credits left this period: top up or raise the allocation.'
    case 'rate_limited':
      return 'Over the rate limit of the route or the plan.'
    case 'forbidden':
      return 'Refused by the route’s access rules.'
    case 'disabled_key':
      return 'The key is disabled (see Keys): enable it, or use another.'
    case 'expired_key':
      return 'The key has expired (see Keys): give the client a new key.'
    case 'unknown_key':
      return 'No project has this key: mistyped, deleted, or guessed.'
    case 'missing_api_key':
    case 'invalid_api_key':
      return 'No usable key: missing, unknown, disabled or expired.'
  }
  if (status === '401') return 'The credential was refused.'
  if (status === '402') return 'Payment or credits required.'
  if (status === '403') return 'Not allowed for this project or key.'
  if (status === '429') return 'Too many requests.'
  return ''
}

