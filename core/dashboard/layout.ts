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

/** A whole page: `body` in the shared frame; `active` marks the navigation entry, `chart` loads uPlot. */
export function layout(title: string, viewer: DashboardViewer | undefined, body: SafeHtml, options: { active?: string; chart?: boolean } = {}): string {
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
