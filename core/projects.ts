/**
 * Projects and their credentials, as configured in gateway.yaml (or the projects file it names).
 *
 * Keys and secrets are stored as `sha256:<hex>` digests. API keys are long random strings, so a
 * plain SHA-256 is the right tool (as GitHub and Stripe tokens): a lookup hashes the presented key
 * once and finds it by digest; the final comparison is constant-time.
 */
import { createHash, hash as oneShotHash, timingSafeEqual } from 'node:crypto'

export const SCOPES = ['zkpaas', 'rpc', 'x402', 'mirror', 'events'] as const
export type Scope = (typeof SCOPES)[number]

export interface ApiKeyRecord {
  label: string
  /** `sha256:<hex>` */
  hash: string
  disabled: boolean
  /** Epoch ms after which the key is refused; undefined = never. */
  expiresAt?: number
}

export interface ProjectFeatures {
  proveBatch: boolean
  sponsoredWallet: boolean
  relayToConfidentialSpace: boolean
  tee: boolean
  /** Cloud workstation (core/workstations): off until an operator enables it. */
  workstation: boolean
}

export interface Project {
  id: string
  name: string
  plan: string
  scopes: ReadonlySet<Scope>
  credits: { allocation: number; period: 'hour' | 'day' | 'month' }
  features: ProjectFeatures
  /** `sha256:<hex>`, or undefined when the project has no secret. */
  secretHash?: string
  keys: readonly ApiKeyRecord[]
  /** Operator-defined extras (per-project settings of plugins). */
  settings: Readonly<Record<string, unknown>>
}

/** Why a presented key was refused. The client never learns which; metrics and logs do. */
export type KeyRefusal = 'unknown_key' | 'disabled_key' | 'expired_key'

export type KeyLookup =
  | { ok: true; project: Project; key: ApiKeyRecord }
  | { ok: false; reason: KeyRefusal }

/** `sha256:<hex>` of a credential: the form gateway.yaml stores (`tollgate hash-key`). */
export function hashCredential(clear: string): string {
  return 'sha256:' + createHash('sha256').update(clear, 'utf8').digest('hex')
}

function digestBytes(hashed: string): Buffer {
  return Buffer.from(hashed.slice('sha256:'.length), 'hex')
}

/** Constant-time comparison of a clear credential against a stored digest. */
export function credentialMatches(clear: string, storedHash: string): boolean {
  const presented = createHash('sha256').update(clear, 'utf8').digest()
  const stored = digestBytes(storedHash)
  return stored.length === presented.length && timingSafeEqual(presented, stored)
}

/** sha256 of a credential as base64: the one-shot form is the cheapest on the per-request path. */
function digest64(clear: string): string {
  return oneShotHash('sha256', clear, 'base64')
}

/** Constant-time equality of two strings of the same length (digests). */
function sameDigest(a: string, b: string): boolean {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return diff === 0
}

/**
 * The projects in force: gateway.yaml's seed merged with the settings changed at run time
 * (core/project-settings.ts). Each route table has one; a settings change swaps its contents in
 * place ({@link ProjectDirectory.replace}), so plugins holding it see the change on their next
 * request. A request keeps the {@link Project} object it authenticated with.
 */
export class ProjectDirectory {
  /** By base64 sha256 of the key. */
  #byKeyDigest = new Map<string, { project: Project; key: ApiKeyRecord; digest: string }>()
  #byId = new Map<string, Project>()

  constructor(projects: readonly Project[]) {
    this.replace(projects)
  }

  /**
   * Replaces every project at once: both maps are built aside and swapped in, so a lookup sees
   * the old set or the new one, never a mix.
   */
  replace(projects: readonly Project[]): void {
    const byKeyDigest = new Map<string, { project: Project; key: ApiKeyRecord; digest: string }>()
    const byId = new Map<string, Project>()
    for (const project of projects) {
      byId.set(project.id, project)
      for (const key of project.keys) {
        const digest = digestBytes(key.hash).toString('base64')
        byKeyDigest.set(digest, { project, key, digest })
      }
    }
    this.#byKeyDigest = byKeyDigest
    this.#byId = byId
  }

  /** The project and label a key digest (`sha256:<hex>`) belongs to, if any (uniqueness checks). */
  ownerOfHash(hashed: string): { projectId: string; label: string } | undefined {
    const found = this.#byKeyDigest.get(digestBytes(hashed).toString('base64'))
    return found && { projectId: found.project.id, label: found.key.label }
  }

  get size(): number {
    return this.#byId.size
  }

  byId(id: string): Project | undefined {
    return this.#byId.get(id)
  }

  all(): Project[] {
    return [...this.#byId.values()]
  }

  /** Finds the project a clear API key belongs to. `now` is epoch ms. */
  lookupKey(clear: string, now = Date.now()): KeyLookup {
    const digest = digest64(clear)
    const found = this.#byKeyDigest.get(digest)
    if (!found || !sameDigest(digest, found.digest)) return { ok: false, reason: 'unknown_key' }
    if (found.key.disabled) return { ok: false, reason: 'disabled_key' }
    if (found.key.expiresAt !== undefined && now >= found.key.expiresAt) return { ok: false, reason: 'expired_key' }
    return { ok: true, project: found.project, key: found.key }
  }

  /** Constant-time check of a clear secret against the project's stored secret. */
  secretMatches(project: Project, clear: string): boolean {
    return project.secretHash !== undefined && credentialMatches(clear, project.secretHash)
  }
}
