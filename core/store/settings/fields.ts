/**
 * What the SQLite and PostgreSQL settings engines share: how a change merges into a stored
 * override, and how stored rows become {@link ProjectOverride}s. Both engines read the row, merge
 * here and write it back inside one transaction, so they cannot drift apart.
 */
import type { ChangeActor, KeyOverride, ProjectFields, ProjectOverride, SettingsAction, SettingsChange } from './types.ts'

/** Merges `patch` into `stored`: features and credits field by field, the rest replaced. */
export function mergeFields(stored: ProjectFields, patch: ProjectFields): ProjectFields {
  const merged: ProjectFields = { ...stored }
  if (patch.name !== undefined) merged.name = patch.name
  if (patch.plan !== undefined) merged.plan = patch.plan
  if (patch.scopes !== undefined) merged.scopes = [...patch.scopes]
  if (patch.features !== undefined) merged.features = { ...stored.features, ...patch.features }
  if (patch.credits !== undefined) merged.credits = { ...stored.credits, ...patch.credits }
  if (patch.secretHash !== undefined) merged.secretHash = patch.secretHash
  if (patch.previousSecret !== undefined) merged.previousSecret = patch.previousSecret
  if (patch.alertThresholds === null) delete merged.alertThresholds
  else if (patch.alertThresholds !== undefined) merged.alertThresholds = patch.alertThresholds.map((t) => ({ ...t }))
  return merged
}

/** The audit detail of a field change: values, except the secret's hash (only whether one is set). */
export function fieldsDetail(fields: ProjectFields): Record<string, unknown> {
  const { secretHash, previousSecret, ...rest } = fields
  const detail: Record<string, unknown> = secretHash === undefined ? { ...rest } : { ...rest, secret: secretHash === null ? 'removed' : 'set' }
  if (previousSecret) detail.previousSecretUntil = new Date(previousSecret.until).toISOString()
  return detail
}

export interface KeyState {
  hash?: string
  disabled?: boolean
  expiresAt?: number | null
  prefix?: string
}

export interface StoredProjectRow {
  id: string
  created: boolean
  fields: ProjectFields
  updatedAt: number
  updatedBy: string
}

export interface StoredKeyRow {
  projectId: string
  label: string
  state: KeyState
  updatedAt: number
  updatedBy: string
}

/**
 * Groups rows into overrides. A key row whose project has no row of its own (a seed project whose
 * only change is a key) still yields an override, with no field set.
 */
export function toOverrides(projects: StoredProjectRow[], keys: StoredKeyRow[]): ProjectOverride[] {
  const byId = new Map<string, ProjectOverride>()
  for (const row of projects) {
    byId.set(row.id, { ...row.fields, id: row.id, created: row.created, keys: [], updatedAt: row.updatedAt, updatedBy: row.updatedBy })
  }
  for (const row of keys) {
    let project = byId.get(row.projectId)
    if (!project) {
      project = { id: row.projectId, created: false, keys: [], updatedAt: row.updatedAt, updatedBy: row.updatedBy }
      byId.set(row.projectId, project)
    }
    const key: KeyOverride = { label: row.label, updatedAt: row.updatedAt, updatedBy: row.updatedBy }
    if (row.state.hash !== undefined) key.hash = row.state.hash
    if (row.state.disabled !== undefined) key.disabled = row.state.disabled
    if (row.state.expiresAt !== undefined) key.expiresAt = row.state.expiresAt
    if (row.state.prefix !== undefined) key.prefix = row.state.prefix
    project.keys.push(key)
  }
  return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

export function change(seq: number, at: number, by: ChangeActor, action: SettingsAction, projectId: string, detail: Record<string, unknown>): SettingsChange {
  const { actor, note } = actorParts(by)
  return note === undefined ? { seq, at, actor, action, projectId, detail } : { seq, at, actor, actorNote: note, action, projectId, detail }
}

/** The principal and the note of a change's actor. */
export function actorParts(by: ChangeActor): { actor: string; note?: string } {
  return typeof by === 'string' ? { actor: by } : by
}

/** An audit row's actor and its note (a column that is null without one). */
export function storedActor(actor: string, note: string | null): ChangeActor {
  return note === null ? actor : { actor, note }
}

/** The principal alone: what a settings row's `updated_by` records. */
export function actorName(by: ChangeActor): string {
  return typeof by === 'string' ? by : by.actor
}

/** State of a rotated key's row: the new hash, enabled, no expiry. */
export function nextState(next: { hash: string; prefix?: string }): KeyState {
  return { hash: next.hash, disabled: false, ...(next.prefix ? { prefix: next.prefix } : {}) }
}

/** State of the key a rotation keeps alive until the grace ends. */
export function previousState(previous: { hash: string; expiresAt: number; prefix?: string }): KeyState {
  return { hash: previous.hash, disabled: false, expiresAt: previous.expiresAt, ...(previous.prefix ? { prefix: previous.prefix } : {}) }
}

/** Audit detail of a rotation: labels and the end of the grace, never a hash. */
export function rotationDetail(label: string, previous: { label: string; expiresAt: number }): Record<string, unknown> {
  return { label, previousLabel: previous.label, graceUntil: new Date(previous.expiresAt).toISOString() }
}
