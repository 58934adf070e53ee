/**
 * Project settings changed at run time: the overrides the store keeps on top of gateway.yaml's
 * `projects` (the declarative seed). The core merges seed and overrides into the live project
 * directory (core/projects/project-settings.ts); this interface only stores, lists and announces changes.
 *
 * Precedence: gateway.yaml seeds a project; a field changed at run time wins over the yaml until
 * an operator resets the project (`resetProject`); projects created at run time exist only here.
 *
 * Every change names who made it (`actor`) and is appended to an audit trail, in the same
 * transaction as the change. The audit sequence number is also the settings version: a reader that
 * has seen version N has seen every change up to N.
 */

export type BillingPeriod = 'hour' | 'day' | 'month'

export interface FeatureFlags {
  proveBatch: boolean
  sponsoredWallet: boolean
  relayToConfidentialSpace: boolean
  tee: boolean
  workstation: boolean
}

/** Fields of a project that can be overridden; absent = the yaml's value. */
export interface ProjectFields {
  name?: string
  plan?: string
  scopes?: string[]
  /** Only the features named are overridden. */
  features?: Partial<FeatureFlags>
  /** `refill: null` removes a refill schedule (the calendar `period` applies again). */
  credits?: { allocation?: number; period?: BillingPeriod; refill?: { interval: 'day' | 'month'; day?: number } | null }
  /** `sha256:<hex>`; null removes the project's secret. */
  secretHash?: string | null
  /**
   * The secret replaced by a rotation, still accepted until `until` (epoch ms); null removes it.
   * Set together with `secretHash` by a rotation.
   */
  previousSecret?: { hash: string; until: number } | null
  /**
   * Low-balance alert thresholds in place of gateway.yaml's `projects[].alerts.thresholds` (the
   * webhook URL and secret stay the yaml's); null drops the override.
   */
  alertThresholds?: AlertThreshold[] | null
}

/** One low-balance threshold: exactly one of percent or remaining (gateway.yaml's rule). */
export type AlertThreshold = { percent: number; remaining?: undefined } | { remaining: number; percent?: undefined }

/** A key added at run time (hash only), or the state of a seed key overridden at run time. */
export interface KeyOverride {
  label: string
  /** `sha256:<hex>` of a key added at run time; undefined when the row only changes a seed key's state. */
  hash?: string
  disabled?: boolean
  /** Epoch ms; null = never expires (overrides a seed key's expiry). */
  expiresAt?: number | null
  /** The first characters of a generated key (shown in listings to tell keys apart). */
  prefix?: string
  updatedAt: number
  updatedBy: string
}

export interface ProjectOverride extends ProjectFields {
  id: string
  /** True when the project was created at run time (it has no yaml seed). */
  created: boolean
  keys: KeyOverride[]
  updatedAt: number
  updatedBy: string
}

export interface SettingsSnapshot {
  /** Sequence number of the last change included (0 = none ever). */
  version: number
  projects: ProjectOverride[]
}

export type SettingsAction = 'project.create' | 'project.update' | 'project.reset' | 'key.add' | 'key.update' | 'key.rotate' | 'credits.top_up' | UserAction

/** Changes of admin accounts (core/accounts/user-routes.ts): audited with the project id '' (they belong to no project). */
export type UserAction = 'user.create' | 'user.update' | 'user.delete'

/** Actions {@link SettingsStore.recordAction} appends: audited, but they change no project setting. */
export type RecordedAction = 'credits.top_up' | UserAction

/**
 * Who made a change. `actor` is the authenticated principal (a user's email, or `admin-token`);
 * `note` is free text the caller added (the admin token's `x-admin-actor` header), recorded beside
 * the actor and never in its place, since anyone holding the token can write any note.
 * A bare string is an actor without a note.
 */
export type ChangeActor = string | { actor: string; note?: string }

/** One change, as announced to subscribers and kept in the audit trail. */
export interface SettingsChange {
  /** Settings version after the change. */
  seq: number
  at: number
  /** The authenticated principal who made it. */
  actor: string
  /** The caller's own words about who or why (`x-admin-actor`); not authenticated. */
  actorNote?: string
  action: SettingsAction
  projectId: string
  /** What changed (field values; key hashes are never included). */
  detail: Record<string, unknown>
}

/** A listener is told that settings changed; it re-reads them (a notification may be coalesced or be a resync). */
export type SettingsListener = (change: SettingsChange | { seq: number; action: 'resync' }) => void

export class SettingsConflict extends Error {
  readonly code: 'project_exists' | 'key_exists'
  constructor(code: 'project_exists' | 'key_exists', message: string) {
    super(message)
    this.name = 'SettingsConflict'
    this.code = code
  }
}

/**
 * The settings part of a {@link Store}. Each operation is one transaction: the change, its audit
 * row and its notification commit together.
 */
export interface SettingsStore {
  /** Every override, consistent as of `version`. */
  read(): Promise<SettingsSnapshot>
  /** The current version only (cheap; the periodic backstop compares it). */
  version(): Promise<number>
  /** Creates a project that exists only in the store. Throws {@link SettingsConflict} if the store has it. */
  createProject(id: string, fields: ProjectFields, actor: ChangeActor): Promise<SettingsChange>
  /** Overrides fields of a project (seeded or created); features and credits merge field by field. */
  updateProject(id: string, fields: ProjectFields, actor: ChangeActor): Promise<SettingsChange>
  /** Adds a key by its hash. Throws {@link SettingsConflict} when the label or the hash is already stored. */
  addKey(projectId: string, key: { label: string; hash: string; expiresAt?: number; prefix?: string }, actor: ChangeActor): Promise<SettingsChange>
  /**
   * Rotation, in one transaction: the key labelled `label` takes `next.hash` (enabled, no expiry),
   * and its former hash lives on as a key labelled `previous.label` until `previous.expiresAt`.
   * Throws {@link SettingsConflict} when `previous.label` or `next.hash` is already stored.
   */
  rotateKey(
    projectId: string,
    label: string,
    next: { hash: string; prefix?: string },
    previous: { label: string; hash: string; expiresAt: number; prefix?: string },
    actor: ChangeActor,
  ): Promise<SettingsChange>
  /** Disables, re-enables or (un)expires a key, seeded or added. */
  updateKey(projectId: string, label: string, state: { disabled?: boolean; expiresAt?: number | null }, actor: ChangeActor): Promise<SettingsChange>
  /** Drops every override of the project (a created project disappears; a seeded one is the yaml's again). */
  resetProject(id: string, actor: ChangeActor): Promise<SettingsChange>
  /**
   * Appends an audit row for an operator action that changes no setting (a credit top-up, a change
   * of an admin account), with its own sequence number and notification like any change.
   */
  recordAction(projectId: string, action: RecordedAction, detail: Record<string, unknown>, actor: ChangeActor): Promise<SettingsChange>
  /** The audit trail, newest first. */
  audit(options?: { projectId?: string; limit?: number }): Promise<SettingsChange[]>
  /** Calls `listener` after every change made through any instance sharing the store. Returns the unsubscribe. */
  subscribe(listener: SettingsListener): () => void
}
