/**
 * A project as the credit meter's tests need one: an id, a plan, one scope and its credits; no keys,
 * no features, no settings.
 */
import type { Project } from '../../core/projects/projects.ts'
import type { Scope } from '../../core/projects/projects.ts'

export function meteredProject(allocation: number, period: Project['credits']['period'], scope: Scope = 'zkpaas'): Project {
  return {
    id: 'p1',
    name: 'p1',
    plan: 'enterprise',
    scopes: new Set([scope]),
    credits: { allocation, period },
    features: { proveBatch: false, sponsoredWallet: false, relayToConfidentialSpace: false, tee: false, workstation: false },
    keys: [],
    settings: {},
  }
}
