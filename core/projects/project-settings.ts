/**
 * Effective projects: gateway.yaml's `projects` (the declarative seed) merged with the settings
 * changed at run time (the store's overrides), and the sync that keeps a table's
 * {@link ProjectDirectory} up to date with the store.
 *
 * Which wins: the yaml seeds a project; a field changed at run time (plan, scopes, a feature, the
 * credit allocation or period, the secret, a key's disabled/expiry state) wins over the yaml until an
 * operator resets the project (`POST /admin/projects/:id/reset`), after which the yaml's values are
 * in force again. Keys added at run time come on top of the yaml's keys. Projects created at run time
 * exist only in the store. An override of a project the yaml no longer seeds (and that was not created
 * at run time) is ignored until the yaml seeds it again.
 */
import { backgroundFailed, backgroundSucceeded, runInBackground } from '../proxy/resilience.ts'
import type { Logger } from 'pino'
import { SCOPES, type ApiKeyRecord, type Project, type ProjectDirectory, type Scope } from './projects.ts'
import type { ProjectOverride, SettingsSnapshot, SettingsStore } from '../store/settings/types.ts'

const KNOWN_SCOPES = new Set<string>(SCOPES)

/** The yaml defaults of a project created at run time (same as gateway.yaml's schema defaults). */
export function blankProject(id: string): Project {
  return {
    id,
    name: id,
    plan: 'standard',
    scopes: new Set(),
    credits: { allocation: 0, period: 'month' },
    features: { proveBatch: false, sponsoredWallet: false, relayToConfidentialSpace: false, tee: false, workstation: false },
    keys: [],
    settings: {},
  }
}

/** One project with its overrides applied. */
export function applyOverride(base: Project, override: ProjectOverride): Project {
  const keys: ApiKeyRecord[] = base.keys.map((key) => ({ ...key }))
  for (const change of override.keys) {
    let key = keys.find((k) => k.label === change.label)
    if (change.hash !== undefined) {
      // A key added at run time; it replaces a yaml key of the same label (the admin API refuses that case).
      const added: ApiKeyRecord = { label: change.label, hash: change.hash, disabled: false, ...(change.prefix ? { prefix: change.prefix } : {}) }
      if (key) keys[keys.indexOf(key)] = added
      else keys.push(added)
      key = added
    }
    if (!key) continue
    if (change.disabled !== undefined) key.disabled = change.disabled
    if (change.expiresAt !== undefined) key.expiresAt = change.expiresAt ?? undefined
  }
  return {
    id: base.id,
    name: override.name ?? base.name,
    plan: override.plan ?? base.plan,
    scopes: override.scopes ? new Set(override.scopes.filter((s): s is Scope => KNOWN_SCOPES.has(s))) : base.scopes,
    credits: { ...base.credits, ...override.credits },
    features: { ...base.features, ...override.features },
    secretHash: override.secretHash === undefined ? base.secretHash : (override.secretHash ?? undefined),
    ...(override.previousSecret ? { previousSecret: override.previousSecret } : base.previousSecret ? { previousSecret: base.previousSecret } : {}),
    keys,
    ...(override.alertThresholds ? { alertThresholds: override.alertThresholds } : base.alertThresholds ? { alertThresholds: base.alertThresholds } : {}),
    settings: base.settings,
  }
}

/** Seed projects with the store's overrides applied, plus the projects created at run time. */
export function mergeProjects(seed: readonly Project[], overrides: readonly ProjectOverride[]): Project[] {
  const byId = new Map(overrides.map((o) => [o.id, o]))
  const merged = seed.map((project) => {
    const override = byId.get(project.id)
    return override ? applyOverride(project, override) : project
  })
  const seeded = new Set(seed.map((p) => p.id))
  for (const override of overrides) if (override.created && !seeded.has(override.id)) merged.push(applyOverride(blankProject(override.id), override))
  return merged
}

/** Default period of the backstop re-read: a missed notification is caught within this time. */
export const DEFAULT_RESYNC_MS = 2000

/**
 * Keeps the current table's project directory equal to seed + store overrides. It re-reads the
 * store on every change notification and, as a backstop for a lost notification, whenever the
 * store's version moved since the last read (checked every `resyncMs`).
 */
export class ProjectSettingsSync {
  readonly #settings: SettingsStore
  readonly #log: Logger
  readonly #target: () => { projects: ProjectDirectory; seedProjects: readonly Project[] } | undefined
  #snapshot: SettingsSnapshot = { version: 0, projects: [] }
  #unsubscribe: (() => void) | undefined
  #timer: NodeJS.Timeout | undefined
  #refreshing: Promise<void> | undefined
  #again = false

  /** `target` is the table in service (undefined before the first one is built). */
  constructor(settings: SettingsStore, log: Logger, target: () => { projects: ProjectDirectory; seedProjects: readonly Project[] } | undefined) {
    this.#settings = settings
    this.#log = log
    this.#target = target
  }

  /** The overrides last read. */
  get snapshot(): SettingsSnapshot {
    return this.#snapshot
  }

  /** Reads the store once, then follows its notifications and polls its version every `resyncMs`. */
  async start(resyncMs = DEFAULT_RESYNC_MS): Promise<void> {
    this.#snapshot = await this.#settings.read()
    this.#unsubscribe = this.#settings.subscribe(() => void this.refresh())
    this.#timer = setInterval(() => void this.#backstop(), resyncMs)
    this.#timer.unref()
  }

  /** Applies the last snapshot to a directory (a freshly built table's). */
  apply(directory: ProjectDirectory, seed: readonly Project[]): void {
    directory.replace(mergeProjects(seed, this.#snapshot.projects))
  }

  /**
   * Re-reads the store and applies it to the current table. Concurrent calls coalesce: one read runs
   * at a time, and a call made during it causes one more read after it.
   */
  refresh(): Promise<void> {
    if (this.#refreshing) {
      this.#again = true
      return this.#refreshing
    }
    const run = async (): Promise<void> => {
      try {
        do {
          this.#again = false
          const snapshot = await this.#settings.read()
          if (snapshot.version < this.#snapshot.version) continue
          this.#snapshot = snapshot
          const target = this.#target()
          if (target) this.apply(target.projects, target.seedProjects)
        } while (this.#again)
        backgroundSucceeded('settings-sync', this.#log)
      } catch (error) {
        // Keeps the settings in force; logged once per outage (core/proxy/resilience.ts).
        backgroundFailed('settings-sync', error, this.#log)
      } finally {
        this.#refreshing = undefined
      }
    }
    this.#refreshing = run()
    return this.#refreshing
  }

  #backstop(): Promise<void> {
    return runInBackground('settings-version-check', async () => {
      if ((await this.#settings.version()) !== this.#snapshot.version) await this.refresh()
    }, this.#log)
  }

  stop(): void {
    this.#unsubscribe?.()
    clearInterval(this.#timer)
  }
}
