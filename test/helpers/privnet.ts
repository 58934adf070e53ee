/**
 * The privnet example config (examples/config/privnet.yaml) made testable: its routes as shipped,
 * with the test's own projects, an admin token, and the upstream URLs of stand-ins on port 0.
 */
import { readFileSync } from 'node:fs'
import { hashCredential } from '../../core/projects/projects.ts'

const EXAMPLE = new URL('../../examples/config/privnet.yaml', import.meta.url)

export interface TestProject {
  id: string
  key: string
  plan?: string
  scopes?: string[]
  allocation?: number
  features?: Partial<Record<'proveBatch' | 'sponsoredWallet' | 'tee' | 'relayToConfidentialSpace', boolean>>
}

export function projectsYaml(projects: readonly TestProject[]): string {
  const lines = ['projects:']
  for (const p of projects) {
    lines.push(
      `  - id: ${p.id}`,
      `    plan: ${p.plan ?? 'enterprise'}`,
      `    scopes: [${(p.scopes ?? ['zkpaas', 'rpc']).join(', ')}]`,
      `    credits: { allocation: ${p.allocation ?? 1000}, period: month }`,
      `    features: ${JSON.stringify(p.features ?? {})}`,
      `    keys: [{ label: test, hash: ${hashCredential(p.key)} }]`,
    )
  }
  return lines.join('\n') + '\n\n'
}

/** The example config with `projects` replaced, an admin token, and (optionally) smaller body caps. */
export function privnetConfig(projects: readonly TestProject[], options: { adminToken: string; maxBodyBytes?: number }): string {
  let text = readFileSync(EXAMPLE, 'utf8')
  text = text.replace(/^projects:\n[\s\S]*?(?=^upstreams:)/m, projectsYaml(projects))
  text = text.replace(/^admin:\n/m, `admin:\n  tokenHash: ${hashCredential(options.adminToken)}\n`)
  if (options.maxBodyBytes !== undefined) text = text.replaceAll('maxBodyBytes: 33554432', `maxBodyBytes: ${options.maxBodyBytes}`)
  return text
}

/** Environment that points the example's upstreams at stand-ins and its listeners at port 0. */
export function privnetEnv(urls: { proof?: string; tee?: string; relay?: string; node?: string }): NodeJS.ProcessEnv {
  const unused = 'http://127.0.0.1:9'
  return {
    TOLLGATE_PORT: '0',
    TOLLGATE_ADMIN_PORT: '0',
    PROOF_SERVER_URL: urls.proof ?? unused,
    PROOF_TEE_URL: urls.tee ?? unused,
    PROOF_RELAY_URL: urls.relay ?? unused,
    NODE_RPC_URL: urls.node ?? unused,
  }
}
