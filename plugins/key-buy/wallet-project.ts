/**
 * The project a wallet owns, and its keys, written through the same settings store calls as the
 * admin API (`POST /admin/projects`, `POST /admin/projects/:id/keys`, `.../disable`), so a project
 * bought over x402 is an ordinary run-time project: listed, audited, reset and enforced like any.
 *
 * The project id is the wallet's address after a prefix (EVM lower-cased, so every EVM chain maps
 * one wallet to one project; Solana base58 as is): a wallet can never own two projects, and two
 * purchases racing to create it (here or on another instance) create one.
 */
import { GatewayError } from '../../core/proxy/plugin-api.ts'
import { hashCredential, type Project, type ProjectDirectory } from '../../core/proxy/plugin-api.ts'
import { generateKey } from '../../core/proxy/plugin-api.ts'
import { SettingsConflict, type BillingPeriod, type SettingsStore } from '../../core/proxy/plugin-api.ts'

export interface WalletProjectTerms {
  projectPrefix: string
  plan: string
  scopes: string[]
  allocation: number
  period: BillingPeriod
}

/** A key shown once: the only place its clear text ever is. */
export interface IssuedKey {
  key: string
  label: string
  prefix: string
}

/** How long a write may take to reach this instance's directory (notification, else the 2 s re-read). */
const VISIBLE_WITHIN_MS = 5000

/** `wallet-0x90f7…` for an EVM payer, `wallet-7Xf…` for a Solana one. */
export function walletProjectId(prefix: string, address: string): string {
  return prefix + (address.startsWith('0x') ? address.toLowerCase() : address)
}

export class WalletProjects {
  readonly #settings: SettingsStore
  readonly #directory: ProjectDirectory
  readonly #terms: WalletProjectTerms

  constructor(settings: SettingsStore, directory: ProjectDirectory, terms: WalletProjectTerms) {
    this.#settings = settings
    this.#directory = directory
    this.#terms = terms
  }

  idOf(address: string): string {
    return walletProjectId(this.#terms.projectPrefix, address)
  }

  find(address: string): Project | undefined {
    return this.#directory.byId(this.idOf(address))
  }

  /** The wallet's project, created with the configured plan and credit terms when it has none. */
  async ensure(address: string, actor: string): Promise<Project> {
    const id = this.idOf(address)
    if (!this.#directory.byId(id)) {
      const { plan, scopes, allocation, period } = this.#terms
      try {
        await this.#settings.createProject(id, { name: `x402 wallet ${address}`, plan, scopes, credits: { allocation, period } }, actor)
      } catch (error) {
        // Another request (or instance) created it first: the same project, nothing to do.
        if (!(error instanceof SettingsConflict && error.code === 'project_exists')) throw error
      }
    }
    return this.#until(() => this.#directory.byId(id))
  }

  /** A new key for the project (the same format as the admin API's generated keys). */
  async issueKey(projectId: string, labelStem: string, actor: string): Promise<IssuedKey> {
    const generated = generateKey()
    const hash = hashCredential(generated.key)
    const label = `${labelStem}-${Date.now().toString(36)}-${generated.prefix.slice(3)}`
    await this.#settings.addKey(projectId, { label, hash, prefix: generated.prefix }, actor)
    await this.#until(() => this.#directory.ownerOfHash(hash))
    return { key: generated.key, label, prefix: generated.prefix }
  }

  /** Disables every active key of the project but `keep`; returns their labels. */
  async disableOthers(projectId: string, keep: string, actor: string): Promise<string[]> {
    const project = this.#directory.byId(projectId)
    const labels = (project?.keys ?? []).filter((k) => !k.disabled && k.label !== keep).map((k) => k.label)
    for (const label of labels) await this.#settings.updateKey(projectId, label, { disabled: true }, actor)
    await this.#until(() => {
      const now = this.#directory.byId(projectId)
      return labels.every((label) => now?.keys.find((k) => k.label === label)?.disabled) ? true : undefined
    })
    return labels
  }

  /** True when the project has a key that works now. */
  hasActiveKey(project: Project, now = Date.now()): boolean {
    return project.keys.some((k) => !k.disabled && (k.expiresAt === undefined || now < k.expiresAt))
  }

  /**
   * Waits until this instance's directory shows a write, so the key in the answer works on the next
   * request here. The write is durable already; only its visibility is awaited.
   */
  async #until<T>(probe: () => T | undefined): Promise<T> {
    const deadline = Date.now() + VISIBLE_WITHIN_MS
    for (;;) {
      const found = probe()
      if (found !== undefined) return found
      if (Date.now() > deadline) throw new GatewayError(503, 'settings_not_visible', 'the change is stored but not yet in force on this instance; retry')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }
}
