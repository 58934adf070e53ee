/**
 * The x402 example config (examples/config/x402.yaml) made testable: its routes as shipped, the
 * test's own projects, and the env that points it at a local chain and stand-ins on port 0.
 */
import { readFileSync } from 'node:fs'
import { request } from 'undici'
import type { LocalChain } from '../../examples/chain/index.ts'
import { projectsYaml, type TestProject } from './privnet.ts'

const EXAMPLE = new URL('../../examples/config/x402.yaml', import.meta.url)

/** The example config with `projects` replaced; `edit` may rewrite the text further. */
export function x402Config(projects: readonly TestProject[], edit: (text: string) => string = (text) => text): string {
  const text = readFileSync(EXAMPLE, 'utf8').replace(/^projects:\n[\s\S]*?(?=^upstreams:)/m, projectsYaml(projects))
  return edit(text)
}

/** Environment for the example: listeners on port 0, the chain's RPC, token and facilitator key. */
export function x402Env(chain: LocalChain, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    TOLLGATE_PORT: '0',
    TOLLGATE_ADMIN_PORT: '0',
    EVM_RPC_URL: chain.rpcUrl,
    X402_FACILITATOR_KEY: chain.accounts.facilitator.privateKey,
    X402_ASSET: chain.token,
    X402_PAY_TO: chain.accounts.payee.address,
    MIRROR_TESTNET_URL: 'http://127.0.0.1:9',
    ...extra,
  }
}

export interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  text: string
  json(): any
}

/** One HTTP call; `body` objects are sent as JSON. */
export async function call(
  url: string, options: { method?: 'GET' | 'POST' | 'PUT' | 'OPTIONS'; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const raw = options.body === undefined || typeof options.body === 'string' ? options.body : JSON.stringify(options.body)
  const headers = { ...(options.body !== undefined && typeof options.body !== 'string' ? { 'content-type': 'application/json' } : {}), ...options.headers }
  const res = await request(url, { method: options.method ?? (raw === undefined ? 'GET' : 'POST'), body: raw as string | undefined, headers })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers, text, json: () => JSON.parse(text) }
}

/** Decodes a base64 JSON header (PAYMENT-REQUIRED, PAYMENT-RESPONSE...). */
export function decodeHeader(value: string | string[] | undefined): any {
  if (typeof value !== 'string') return undefined
  return JSON.parse(Buffer.from(value, 'base64').toString('utf8'))
}
