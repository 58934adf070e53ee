/**
 * The body of `PUT /admin/projects/:id/alerts/thresholds`, checked by the rule gateway.yaml's
 * schema gives `projects[].alerts.thresholds` (core/config/projects-schema.ts): 1 to 10 entries,
 * each exactly one of `percent` (more than 0, at most 100) or `remaining` (an integer from 0), no
 * two alike. Every refusal is a 400 invalid_body whose message names the field.
 */
import { GatewayError } from '../proxy/errors.ts'
import type { AlertThreshold } from '../store/settings/types.ts'

export const MAX_THRESHOLDS = 10

const invalid = (message: string) => new GatewayError(400, 'invalid_body', message)

/** The thresholds of the body, or null to go back to gateway.yaml's. */
export function parseThresholds(body: unknown): AlertThreshold[] | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('body must be a JSON object: {"thresholds": [{"percent": 20}, {"remaining": 500}]}')
  const extra = Object.keys(body).find((k) => k !== 'thresholds')
  if (extra !== undefined) throw invalid(`unknown field ${extra}; allowed: thresholds`)
  const list = (body as { thresholds?: unknown }).thresholds
  if (list === null) return null
  if (!Array.isArray(list) || list.length < 1 || list.length > MAX_THRESHOLDS) {
    throw invalid(`thresholds must be an array of 1 to ${MAX_THRESHOLDS} thresholds, or null for gateway.yaml's`)
  }
  const seen = new Set<string>()
  return list.map((item, i) => {
    const at = `thresholds[${i}]`
    if (typeof item !== 'object' || item === null || Array.isArray(item)) throw invalid(`${at} must be an object with percent or remaining`)
    const keys = Object.keys(item)
    if (keys.length !== 1 || (keys[0] !== 'percent' && keys[0] !== 'remaining')) throw invalid(`${at} must have exactly one of percent or remaining`)
    const value = (item as Record<string, unknown>)[keys[0]!]
    let threshold: AlertThreshold
    if (keys[0] === 'percent') {
      if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > 100) throw invalid(`${at}.percent must be a number more than 0 and at most 100`)
      threshold = { percent: value }
    } else {
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) throw invalid(`${at}.remaining must be an integer from 0`)
      threshold = { remaining: value }
    }
    const id = `${keys[0]}:${value}`
    if (seen.has(id)) throw invalid(`${at} repeats ${keys[0]} ${value}`)
    seen.add(id)
    return threshold
  })
}
