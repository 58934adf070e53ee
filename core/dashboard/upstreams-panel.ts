/**
 * The operator page's "Upstream targets" panel: per upstream pool (gateway.yaml `upstreams`, the
 * proxy routes' and the x402 facilitator's `rpcUpstream` alike) and per target, what the gateway
 * learned of it: state (healthy, ejected, half-open, down by probe, backing off after a 429),
 * requests, errors, latency, ejections, in flight, retries, hedges, coalesced requests and 429s.
 *
 * Read from the in-process pool state (core/proxy/upstream/ Target: plain counters since start,
 * the same numbers /metrics exposes as tollgate_upstream_target_*), so this instance's view; a
 * cluster-wide one is Prometheus's job. The shapes below are structural (the pools satisfy them)
 * so the dashboard does not import the proxy's classes. Targets are named by their configured
 * name or index and zone, never their URL (it may hold an API key).
 */
import { formatNumber, html, type SafeHtml } from './html.ts'

/** What the panel reads of one target (core/proxy/upstream/target.ts). */
export interface TargetView {
  readonly name: string
  readonly zone: string | undefined
  readonly weight: number
  readonly inFlight: number
  /** Recent time to the answer head (moving average), ms; 0 before the first answer. */
  readonly latencyMs: number
  readonly ejectedUntil: number
  readonly probeDown: boolean
  readonly blockedUntil: number
  readonly counters: {
    readonly requests: number
    readonly errors: number
    readonly ejections: number
    readonly retries: number
    readonly hedges: number
    readonly throttled: number
    readonly latencySum: number
    readonly latencyCount: number
  }
}

/** What the panel reads of one pool (core/proxy/upstream/pool.ts). */
export interface UpstreamView {
  readonly name: string
  readonly targets: readonly TargetView[]
  readonly budget: { readonly refused: number }
  /** Requests answered by joining an identical one in flight: they reach no target, so the pool counts them. */
  readonly coalesced: number
}

function latency(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '—'
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`
}

/** The state in words (colour only repeats it). */
export function targetState(target: TargetView, now: number): { text: string; bad: boolean } {
  if (target.probeDown) return { text: 'down (probe)', bad: true }
  if (now < target.ejectedUntil) return { text: `ejected, ${Math.ceil((target.ejectedUntil - now) / 1000)} s left`, bad: true }
  if (target.ejectedUntil !== 0) return { text: 'half-open', bad: true }
  if (now < target.blockedUntil) return { text: `429 back-off, ${Math.ceil((target.blockedUntil - now) / 1000)} s left`, bad: true }
  return { text: 'healthy', bad: false }
}

function row(upstream: string, target: TargetView, now: number): SafeHtml {
  const c = target.counters
  const state = targetState(target, now)
  const errorShare = c.errors > 0 && c.requests > 0 ? ` (${((c.errors / c.requests) * 100).toFixed(c.errors * 1000 < c.requests ? 2 : 1)}%)` : ''
  const mean = c.latencyCount > 0 ? c.latencySum / c.latencyCount : undefined
  const id = `${upstream}/${target.name}`
  return html`<tr>
    <th scope="row" class="name-cell"><span class="clip" title="${id}">${target.name}</span>${target.zone ? html` <span class="chip" title="zone">${target.zone}</span>` : ''}</th>
    <td data-label="State" class="state ${state.bad ? 'bad' : ''}">${state.text}</td>
    <td data-label="Requests" class="r">${formatNumber(c.requests)}</td>
    <td data-label="Errors" class="r ${c.errors ? 'bad' : ''}">${formatNumber(c.errors)}${errorShare}</td>
    <td data-label="Mean latency" class="r">${latency(mean)}</td>
    <td data-label="Recent latency" class="r">${latency(c.latencyCount > 0 ? target.latencyMs : undefined)}</td>
    <td data-label="Ejections" class="r">${formatNumber(c.ejections)}</td>
    <td data-label="In flight" class="r">${formatNumber(target.inFlight)}</td>
    <td data-label="Retries" class="r">${formatNumber(c.retries)}</td>
    <td data-label="Hedges" class="r">${formatNumber(c.hedges)}</td>
    <td data-label="429 answers" class="r ${c.throttled ? 'bad' : ''}">${formatNumber(c.throttled)}</td>
  </tr>`
}

function table(upstream: UpstreamView, now: number): SafeHtml {
  const healthy = upstream.targets.filter((t) => !targetState(t, now).bad).length
  // Scrolls inside its card on a narrow desktop; on a phone each target is a block (app.css).
  return html`<div class="table-wrap" role="region" aria-label="Targets of ${upstream.name}" tabindex="0"><table class="table upstream-targets">
    <caption>${upstream.name} <span class="muted small">· ${healthy} of ${upstream.targets.length} healthy${upstream.budget.refused ? html` · ${formatNumber(upstream.budget.refused)} retries refused by the budget` : ''} · ${formatNumber(upstream.coalesced)} coalesced (answered from an identical request in flight, reaching no target)</span></caption>
    <thead><tr><th scope="col">Target</th><th scope="col">State</th><th scope="col" class="r">Requests</th><th scope="col" class="r">Errors</th>
      <th scope="col" class="r">Mean latency</th><th scope="col" class="r">Recent latency</th><th scope="col" class="r">Ejections</th><th scope="col" class="r">In flight</th>
      <th scope="col" class="r">Retries</th><th scope="col" class="r">Hedges</th><th scope="col" class="r">429 answers</th></tr></thead>
    <tbody>${upstream.targets.map((target) => row(upstream.name, target, now))}</tbody>
  </table></div>`
}

/** The live fragment: one table per upstream, in name order. */
export function upstreamsFragment(upstreams: Iterable<UpstreamView>, now = Date.now()): SafeHtml {
  const list = [...upstreams].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  if (list.length === 0) return html`<p class="muted">No upstreams configured.</p>`
  return html`${list.map((upstream) => table(upstream, now))}`
}

/** The panel as placed on the operator page, refreshed from /dashboard/fragments/upstreams. */
export function upstreamsSection(upstreams: Iterable<UpstreamView>): SafeHtml {
  return html`<section class="card" aria-labelledby="upstreams-title"><h2 id="upstreams-title">Upstream targets</h2>
    <p class="muted small">Since this gateway process started: attempts per target (retries and hedges included), answers that were errors (transport failures and 5xx), time to the answer head. The same figures are tollgate_upstream_target_* on /metrics.</p>
    <div data-live="/dashboard/fragments/upstreams">${upstreamsFragment(upstreams)}</div></section>`
}
