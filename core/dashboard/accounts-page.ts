/**
 * The Accounts page for operators (users of the admin API's /admin/users) and its live fragment.
 */
import type { AccountRow } from './data.ts'
import { html, when, type SafeHtml } from './html.ts'
import { layout, type DashboardViewer } from './layout.ts'
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from '../accounts/password.ts'


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
  return html`<div class="table-wrap" role="region" aria-label="Users" tabindex="0"><table class="table accounts">
    <thead><tr><th>Email</th><th>Role</th><th>Projects</th><th>Created</th><th><span class="sr-only">Actions</span></th></tr></thead>
    <tbody>${accounts.map((a) => {
      const self = a.id === viewer.userId
      return html`<tr data-user="${a.id}" data-email="${a.email}" data-role="${a.role}" data-projects="${JSON.stringify(a.projects)}" data-self="${self ? 'true' : 'false'}">
        <td class="email" title="${a.email}">${a.email}${self ? html` <span class="chip">you</span>` : ''}</td>
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
    })}</tbody></table></div>`
}

/**
 * Users for operators: the list, a create form and dialogs to change a role or projects, set a
 * password and delete. Every change is an admin API call (/admin/users) from assets/app.js; the
 * API's rules (and its 409 self_lockout) are the only ones, the form checks the password length
 * and confirmation before sending.
 */
export function accountsPage(viewer: DashboardViewer, accounts: readonly AccountRow[], projectIds: readonly string[]): string {
  const passwordFields = (autocomplete: string) => html`
    <label>Password <input name="password" type="password" autocomplete="${autocomplete}" minlength="${MIN_PASSWORD_LENGTH}" maxlength="${MAX_PASSWORD_LENGTH}">
      <span class="hint muted small">${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters, at least 5 different ones.</span><span class="field-error" data-error-for="password" hidden></span></label>
    <label>Confirm password <input name="confirm" type="password" autocomplete="${autocomplete}" maxlength="${MAX_PASSWORD_LENGTH}">
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
          <label>Email <input name="email" type="text" inputmode="email" autocomplete="off" spellcheck="false" maxlength="255" placeholder="dev@example.com">
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
        <label>Type the email to confirm <input name="typed" autocomplete="off" spellcheck="false">
          <span class="field-error" data-error-for="typed" hidden></span></label>
        <p class="error" role="alert" hidden></p>
        <div class="buttons"><button type="button" data-action="close-dialog">Cancel</button><button type="submit" class="primary danger-fill">Delete</button></div>
      </form>
    </dialog>`,
    { active: 'accounts' },
  )
}
