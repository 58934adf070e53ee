/**
 * The request-body and query parsing of the settings admin API (core/admin/settings-admin.ts): every
 * refusal is a 400 whose message names the field, so a bad body never reaches the store.
 */
import { GatewayError } from '../proxy/errors.ts'
import { refuseUnknownFields } from '../proxy/http/body.ts'
import { SCOPES } from '../projects/projects.ts'
import type { FeatureFlags, ProjectFields } from '../store/settings/types.ts'

export const PROJECT_ID = /^[a-zA-Z0-9_.-]{1,64}$/
export const KEY_LABEL = /^[a-zA-Z0-9_.:-]{1,64}$/
export const HASH = /^sha256:[0-9a-f]{64}$/
const MAX_GRACE_SECONDS = 30 * 86400
/** The feature toggles a body may set. */
const FEATURES: readonly (keyof FeatureFlags)[] = ['proveBatch', 'sponsoredWallet', 'relayToConfidentialSpace', 'tee', 'workstation']
const PERIODS = ['hour', 'day', 'month'] as const
/** The overridable fields of a project, in the order messages list them. */
export const FIELDS = ['name', 'plan', 'scopes', 'features', 'credits', 'secretHash']

export const invalid = (message: string) => new GatewayError(400, 'invalid_body', message)

/** The value as a JSON object, or a 400 naming the field. */
export function object(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid(`${field} must be a JSON object`)
  return value as Record<string, unknown>
}

/** Validates the overridable fields of a request body; unknown fields are refused by name. */
export function parseFields(body: Record<string, unknown>, allowed: readonly string[] = FIELDS): ProjectFields {
  refuseUnknownFields(body, allowed)
  const fields: ProjectFields = {}
  if (body.name !== undefined) {
    if (typeof body.name !== 'string' || body.name.length < 1 || body.name.length > 200) throw invalid('name must be a string of 1 to 200 characters')
    fields.name = body.name
  }
  if (body.plan !== undefined) {
    if (typeof body.plan !== 'string' || !/^[a-zA-Z0-9_.-]{1,64}$/.test(body.plan)) throw invalid('plan must be 1 to 64 letters, digits, _ . or -')
    fields.plan = body.plan
  }
  if (body.scopes !== undefined) {
    const scopes = body.scopes
    if (!Array.isArray(scopes) || scopes.some((s) => !(SCOPES as readonly unknown[]).includes(s)) || new Set(scopes).size !== scopes.length) {
      throw invalid(`scopes must be an array of distinct values among ${SCOPES.join(', ')}`)
    }
    fields.scopes = scopes as string[]
  }
  if (body.features !== undefined) {
    const features = object(body.features, 'features')
    const parsed: Partial<FeatureFlags> = {}
    for (const [name, value] of Object.entries(features)) {
      if (!(FEATURES as readonly string[]).includes(name)) throw invalid(`features.${name} is not a feature; known: ${FEATURES.join(', ')}`)
      if (typeof value !== 'boolean') throw invalid(`features.${name} must be true or false`)
      parsed[name as keyof FeatureFlags] = value
    }
    fields.features = parsed
  }
  if (body.credits !== undefined) {
    const credits = object(body.credits, 'credits')
    const parsed: ProjectFields['credits'] = {}
    for (const [name, value] of Object.entries(credits)) {
      if (name === 'allocation') {
        if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) throw invalid('credits.allocation must be an integer >= 0')
        parsed.allocation = value
      } else if (name === 'period') {
        if (!(PERIODS as readonly unknown[]).includes(value)) throw invalid(`credits.period must be one of ${PERIODS.join(', ')}`)
        parsed.period = value as (typeof PERIODS)[number]
      } else if (name === 'refill') {
        parsed.refill = value === null ? null : parseRefill(value)
      } else throw invalid(`credits.${name} is not a field; allowed: allocation, period, refill`)
    }
    // A calendar period set alone replaces a refill schedule (else the schedule would still decide).
    if (parsed.period !== undefined && parsed.refill === undefined) parsed.refill = null
    fields.credits = parsed
  }
  if (body.secretHash !== undefined) {
    if (body.secretHash !== null && (typeof body.secretHash !== 'string' || !HASH.test(body.secretHash))) {
      throw invalid('secretHash must be sha256:<64 hex digits> (tollgate hash-key SECRET) or null')
    }
    fields.secretHash = body.secretHash as string | null
  }
  return fields
}

/** `{interval: day|month, day?: 1..31}`; every refusal names the field. */
export function parseRefill(value: unknown): { interval: 'day' | 'month'; day?: number } {
  const refill = object(value, 'credits.refill')
  for (const name of Object.keys(refill)) if (name !== 'interval' && name !== 'day') throw invalid(`credits.refill.${name} is not a field; allowed: interval, day`)
  if (refill.interval !== 'day' && refill.interval !== 'month') throw invalid('credits.refill.interval must be day or month')
  if (refill.day === undefined) return { interval: refill.interval }
  if (refill.interval === 'day') throw invalid('credits.refill.day applies to interval month only')
  if (typeof refill.day !== 'number' || !Number.isInteger(refill.day) || refill.day < 1 || refill.day > 31) throw invalid('credits.refill.day must be an integer from 1 to 31')
  return { interval: 'month', day: refill.day }
}

/** An ISO 8601 date-time as epoch milliseconds; `undefined` when the field is absent. */
export function parseExpiry(value: unknown, field: string): number | undefined {
  if (value === undefined) return undefined
  const at = typeof value === 'string' && /^\d{4}-\d\d-\d\dT/.test(value) ? Date.parse(value) : NaN
  if (!Number.isFinite(at)) throw invalid(`${field} must be an ISO 8601 date-time, e.g. 2027-01-01T00:00:00Z`)
  return at
}

/** `{graceSeconds}` of a rotation: how long the old key or secret keeps working. */
/**
 * The label a rotation gives the key it keeps alive for the grace (`<label>.rotated-<base36 ms>`).
 * Such a row is in its grace period: rotating it again would hand a fresh, permanent key to a
 * credential that is due to expire, so the API refuses it (409 key_in_grace) and the dashboard
 * offers no Rotate or Disable on it.
 */
export const ROTATED_LABEL = /\.rotated-[0-9a-z]+$/

export function parseGrace(body: unknown): number {
  const request = object(body ?? {}, 'body')
  refuseUnknownFields(request, ['graceSeconds'])
  const grace = request.graceSeconds
  if (typeof grace !== 'number' || !Number.isSafeInteger(grace) || grace < 0 || grace > MAX_GRACE_SECONDS) {
    throw invalid(`graceSeconds must be an integer from 0 to ${MAX_GRACE_SECONDS}`)
  }
  return grace
}

/** `?limit=` of a listing: 1 to `max` (an audit's 10000 by default), 100 when absent. */
export function limitOf(query: URLSearchParams, max = 10_000): number {
  const raw = query.get('limit')
  if (raw === null) return 100
  const limit = Number(raw)
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > max) throw new GatewayError(400, 'invalid_query', `limit must be an integer from 1 to ${max}`)
  return limit
}
