/**
 * The frame every dashboard page shares: head (CSRF token, refresh interval, stylesheets, the
 * script island), the header with the viewer's navigation, and `main`.
 */
import { html, type SafeHtml } from './html.ts'

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

/**
 * The one confirmation of destructive or irreversible actions (disable a key, rotate one, delete a
 * workstation or an account): app.js fills the text and shows the grace choice or the field where
 * the name must be typed, as the action needs.
 */
const confirmDialog = html`<dialog id="confirm-dialog" aria-labelledby="confirm-title">
  <form method="dialog" id="confirm-form" novalidate>
    <h2 id="confirm-title" data-slot="title">Are you sure?</h2>
    <p data-slot="text"></p>
    <label data-slot="grace" hidden>The old key keeps working for
      <select name="grace">
        <option value="0">no time: refuse it at once</option>
        <option value="300">5 minutes</option>
        <option value="3600" selected>1 hour</option>
        <option value="86400">1 day</option>
        <option value="604800">7 days</option>
      </select></label>
    <label data-slot="typed" hidden><span data-slot="typed-label">Type the name to confirm</span>
      <input name="typed" autocomplete="off" spellcheck="false" aria-describedby="confirm-typed-error">
      <span class="field-error" id="confirm-typed-error" data-error-for="typed" hidden></span></label>
    <p class="error" role="alert" hidden></p>
    <div class="buttons"><button type="button" data-action="close-dialog">Cancel</button><button type="submit" class="primary danger-fill" data-slot="confirm">Confirm</button></div>
  </form>
</dialog>`

/** The policy of a {@link standalonePage}: its stylesheet and icon from the same origin, a GET form, nothing else. */
export const STANDALONE_POLICY = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

/**
 * A page served outside the dashboard (the public listener's "Identity linked"): the dashboard's
 * stylesheet and icon from `assetBase` (that listener serves them there), `lang`, the skip link and
 * `main`, but no script, no navigation and no session.
 */
export function standalonePage(title: string, body: SafeHtml, assetBase: string): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · tollgate</title>
<link rel="icon" href="${assetBase}/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="${assetBase}/app.css">
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top"><span class="brand"><span class="logo" aria-hidden="true">◆</span> tollgate</span></header>
<main id="main" tabindex="-1">${body}</main>
</body>
</html>`.text
}

/** A whole page: `body` in the shared frame; `active` marks the navigation entry, `chart` loads uPlot. */
export function layout(title: string, viewer: DashboardViewer | undefined, body: SafeHtml, options: { active?: string; chart?: boolean } = {}): string {
  const link = (name: string, label: string) =>
    html`<a href="/dashboard/${name}" class="${options.active === name ? 'active' : ''}" ${options.active === name ? html`aria-current="page"` : ''}>${label}</a>`
  const nav = viewer
    ? html`<nav class="nav" aria-label="Main">
        ${link('projects', 'Projects')}
        ${viewer.operator ? link('operator', 'Operator') : ''}
        ${link('alerts', 'Alerts')}
        ${viewer.operator ? link('accounts', 'Accounts') : ''}
      </nav>
      <div class="who"><span class="user clip" title="${viewer.user}">${viewer.user}</span>${viewer.operator ? html`<span class="chip">operator</span>` : ''}
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
<a class="skip" href="#main">Skip to content</a>
<header class="top"><a class="brand" href="/dashboard"><span class="logo" aria-hidden="true">◆</span> tollgate</a>${nav}</header>
<main id="main" tabindex="-1">${body}</main>
<div id="announcer" class="sr-only" aria-live="polite" aria-atomic="true"></div>
${viewer ? confirmDialog : ''}
</body>
</html>`.text
}
