/**
 * HTML from template literals with escaping by default: `html\`<p>${name}</p>\`` escapes `name`;
 * a value that is itself `html` (a {@link SafeHtml}) or an array of them is inserted as is. Pages are
 * built from these functions only, so no user-controlled text reaches the page unescaped.
 */

/** Markup that is already safe (built by {@link html} or {@link raw}). */
export class SafeHtml {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

/** Escapes text for an element body or a quoted attribute. */
export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c]!)
}

function part(value: unknown): string {
  if (value === undefined || value === null || value === false) return ''
  if (value instanceof SafeHtml) return value.text
  if (Array.isArray(value)) return value.map(part).join('')
  return escapeHtml(value)
}

/** Tagged template: interpolations are escaped unless they are SafeHtml (or arrays of it). */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0]!
  values.forEach((value, i) => {
    out += part(value) + strings[i + 1]!
  })
  return new SafeHtml(out)
}

/** Trusted markup as is (only for constant strings of our own). */
export function raw(text: string): SafeHtml {
  return new SafeHtml(text)
}

/** 12,345 */
export function formatNumber(value: number): string {
  return Math.round(value).toLocaleString('en-US')
}

/** A moment: the server writes UTC, the island rewrites it in the viewer's zone and relative ("in 42 min"); the full timestamp stays in `title`. */
export function when(at: number | string): SafeHtml {
  const iso = typeof at === 'number' ? new Date(at).toISOString() : at
  return html`<time datetime="${iso}" title="${iso}">${iso.replace('T', ' ').slice(0, 16)} UTC</time>`
}

