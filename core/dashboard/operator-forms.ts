/**
 * The operators' forms (server-rendered; app.js sends them to the admin API, and shows a refusal
 * under the field it names): New project (Projects page), and on a project page its settings, a
 * credit top-up and the low-balance alert thresholds.
 */
import type { ProjectSummary } from './data.ts'
import { SCOPES } from '../projects/projects.ts'
import { html, type SafeHtml } from './html.ts'
import { MAX_THRESHOLDS } from '../alerts/thresholds.ts'

/** A project's low-balance thresholds as the form shows them (GET /admin/projects/:id/alerts/thresholds). */
export interface AlertThresholdsView {
  /** gateway.yaml gives the project a webhook (projects[].alerts); without one there is nothing to edit. */
  configured: boolean
  source: 'config' | 'runtime'
  thresholds: readonly { percent?: number; remaining?: number }[]
}

/** "20%, 500": how the form writes thresholds (a percentage of the allocation, or credits left). */
export function thresholdsText(thresholds: AlertThresholdsView['thresholds']): string {
  return thresholds.map((t) => (t.percent !== undefined ? `${t.percent}%` : String(t.remaining))).join(', ')
}

/** Checkboxes of the scopes a project may have (the API's SCOPES). */
function scopePicker(checked: ReadonlySet<string>): SafeHtml {
  return html`<fieldset class="picker" data-field="scopes"><legend>Scopes</legend>
    <div class="checks">${SCOPES.map((scope) => html`<label class="check"><input type="checkbox" name="scopes" value="${scope}" ${checked.has(scope) ? 'checked' : ''}> <code>${scope}</code></label>`)}</div>
    <p class="field-error" data-error-for="scopes" hidden></p></fieldset>`
}

/** A field with its rule under it and the slot its refusal goes to. */
function field(label: string, name: string, input: SafeHtml, rule?: string): SafeHtml {
  return html`<label>${label} ${input}${rule ? html`<span class="hint muted small" id="rule-${name}">${rule}</span>` : ''}
    <span class="field-error" data-error-for="${name}" hidden></span></label>`
}

/** The plan, scopes and credits of a project as form fields (new project, project settings). */
function projectFields(values: { name: string; plan: string; scopes: ReadonlySet<string>; allocation: number; period: string; refill?: { interval: string; day?: number } }): SafeHtml {
  const refill = values.refill ? (values.refill.interval === 'day' ? 'day' : 'month') : 'none'
  return html`<div class="fields">
      ${field('Name', 'name', html`<input name="name" maxlength="200" value="${values.name}" aria-describedby="rule-name">`, '1 to 200 characters')}
      ${field('Plan', 'plan', html`<input name="plan" maxlength="64" value="${values.plan}" spellcheck="false" aria-describedby="rule-plan">`, '1 to 64 letters, digits, _ . or -')}
      ${field('Credit allocation', 'credits.allocation', html`<input name="allocation" type="number" min="0" step="1" inputmode="numeric" value="${values.allocation}" aria-describedby="rule-credits.allocation">`, 'Credits per period, an integer from 0')}
      ${field('Billing period', 'credits.period', html`<select name="period">${['hour', 'day', 'month'].map((p) => html`<option value="${p}" ${values.period === p ? 'selected' : ''}>${p}</option>`)}</select>`)}
      ${field('Refill schedule', 'credits.refill', html`<select name="refill">
        <option value="none" ${refill === 'none' ? 'selected' : ''}>with the billing period</option>
        <option value="day" ${refill === 'day' ? 'selected' : ''}>every day</option>
        <option value="month" ${refill === 'month' ? 'selected' : ''}>every month on a day</option></select>`)}
      ${field('Refill day of the month', 'credits.refill.day', html`<input name="refillDay" type="number" min="1" max="31" step="1" inputmode="numeric" value="${values.refill?.day ?? ''}" aria-describedby="rule-credits.refill.day">`, '1 to 31, for a monthly refill')}
    </div>
    ${scopePicker(values.scopes)}`
}

/** Operators' settings of one project: plan, scopes, allocation and refill, and a credit top-up (admin API calls from app.js). */
export function projectSettingsCard(summary: ProjectSummary, thresholds?: AlertThresholdsView): SafeHtml {
  const { project } = summary
  return html`<details class="card settings" id="project-settings">
    <summary><h2>Settings and credits</h2><span class="muted small">operator</span></summary>
    <form id="project-form" class="account-form" data-project="${project.id}" novalidate>
      ${projectFields({ name: project.name, plan: project.plan, scopes: project.scopes, allocation: project.credits.allocation, period: project.credits.period, refill: project.credits.refill ?? undefined })}
      <p class="error" role="alert" hidden></p>
      <button type="submit" class="primary">Save settings</button>
    </form>
    <form id="top-up-form" class="inline top-up" data-project="${project.id}" novalidate>
      ${field('Top up credits', 'amount', html`<input name="amount" type="number" min="1" step="1" inputmode="numeric" required aria-describedby="rule-amount">`, 'An integer from 1; counts in this period only')}
      ${field('Reason', 'reason', html`<input name="reason" maxlength="64" placeholder="e.g. support-ticket-42" aria-describedby="rule-reason">`, 'Optional, 1 to 64 printable ASCII characters')}
      <button type="submit" class="primary">Top up</button>
      <p class="error" role="alert" hidden></p>
    </form>
    ${thresholdsForm(project.id, thresholds)}
  </details>`
}

/** The operators' New project form (Projects page). */
export function newProjectCard(): SafeHtml {
  return html`<details class="card settings" id="new-project">
    <summary><h2>New project</h2></summary>
    <form id="create-project" class="account-form" novalidate>
      <div class="fields">${field('Project id', 'id', html`<input name="id" maxlength="64" spellcheck="false" autocomplete="off" aria-describedby="rule-id">`, '1 to 64 letters, digits, _ . or -; cannot change later')}</div>
      ${projectFields({ name: '', plan: 'standard', scopes: new Set(), allocation: 0, period: 'month' })}
      <p class="error" role="alert" hidden></p>
      <button type="submit" class="primary">Create project</button>
    </form>
  </details>`
}

/** Low-balance thresholds of a project (operators): in place of gateway.yaml's, or back to them. */
function thresholdsForm(projectId: string, view: AlertThresholdsView | undefined): SafeHtml {
  if (!view) return html``
  if (!view.configured) {
    return html`<div class="thresholds"><h3>Low-balance alert thresholds</h3>
      <p class="muted small">This project has no alerts webhook: add <code>alerts</code> (url, secret, thresholds) to its entry in gateway.yaml first.</p></div>`
  }
  return html`<form id="thresholds-form" class="inline thresholds" data-project="${projectId}" novalidate>
      <h3>Low-balance alert thresholds</h3>
      ${field('Thresholds', 'thresholds', html`<input name="thresholds" maxlength="200" spellcheck="false" autocomplete="off" value="${thresholdsText(view.thresholds)}" aria-describedby="rule-thresholds">`,
        `Up to ${MAX_THRESHOLDS}, separated by commas: 20% of the allocation, or 500 credits left. Each fires once per period.`)}
      <button type="submit" class="primary">Save thresholds</button>
      <p class="muted small" data-slot="source">${view.source === 'runtime' ? 'Set here, in place of gateway.yaml’s.' : 'As in gateway.yaml.'}</p>
      <button type="button" data-action="thresholds-yaml" ${view.source === 'runtime' ? '' : 'hidden'}>Use gateway.yaml’s</button>
      <p class="error" role="alert" hidden></p>
    </form>`
}
