/**
 * The reliability suite's world: the real stand-in upstreams of examples/upstreams (proof server,
 * node JSON-RPC, mirror node, optionally the local EVM chain), each behind a fault proxy, and a
 * gateway config whose routes cover every route family of the product.
 */
import { randomBytes } from 'node:crypto'
import { hashCredential } from '../../../core/projects/projects.ts'
import { startProofServer } from '../../../examples/upstreams/proof-server.ts'
import { startNodeRpc } from '../../../examples/upstreams/node-rpc.ts'
import { startMirror } from '../../../examples/upstreams/mirror.ts'
import { startFaultProxy, type FaultProxy } from './fault-proxy.ts'

export const KEY = `rk_${randomBytes(16).toString('hex')}`
export const SECRET = `rs_${randomBytes(16).toString('hex')}`
export const ADMIN_TOKEN = `ra_${randomBytes(16).toString('hex')}`
/** Values that must never appear in an answer, a log line or an upstream request. */
export const CREDENTIALS = [KEY, SECRET, ADMIN_TOKEN]
export const PROJECT = 'rel'

export type UpstreamName = 'proof' | 'node' | 'mirror' | 'chain'

export interface Upstreams {
  proxies: Partial<Record<UpstreamName, FaultProxy>>
  /** Every request body/path/header the stand-ins recorded, as text, for the leak check. */
  recorded(): string
  chain?: { token: string; facilitatorKey: string; rpcUrl: string; raw: any }
  close(): Promise<void>
}

export async function startUpstreams(options: { chain?: boolean } = {}): Promise<Upstreams> {
  const proof = await startProofServer({ provingDelayMs: 0 })
  const node = await startNodeRpc({})
  const mirror = await startMirror({ network: 'testnet' })
  const proxies: Upstreams['proxies'] = {
    proof: await startFaultProxy(proof.url),
    node: await startFaultProxy(node.url),
    mirror: await startFaultProxy(mirror.url),
  }
  let chain: Upstreams['chain']
  let raw: any
  if (options.chain) {
    const { startLocalChain } = await import('../../../examples/chain/index.ts')
    raw = await startLocalChain({ port: 0, chainId: 84532 })
    proxies.chain = await startFaultProxy(raw.rpcUrl)
    chain = { token: raw.token, facilitatorKey: raw.accounts.facilitator.privateKey, rpcUrl: raw.rpcUrl, raw }
  }
  return {
    proxies,
    chain,
    recorded: () =>
      [proof, node, mirror]
        .flatMap((s) => (s.requests as any[]).map((r) => JSON.stringify({ ...r, body: r.body ? Buffer.from(r.body).toString('latin1') : '' })))
        .join('\n'),
    async close() {
      for (const proxy of Object.values(proxies)) await proxy!.close()
      await Promise.allSettled([proof.close(), node.close(), mirror.close(), raw?.close()])
    },
  }
}

export interface ConfigOptions {
  /** Upstream timeouts; short ones turn stalls into 504 quickly. */
  timeouts?: { connectMs: number; headersMs: number; bodyMs: number }
  /** Extra projects (id → key), each with `allocation` credits. */
  extraProjects?: { id: string; key: string; allocation: number }[]
  /** Main project's allocation. */
  allocation?: number
  access?: boolean
  /** Cost of a metered call (a reload test changes it). */
  cost?: number
  /** Client-side limits of the public listener. */
  headersTimeoutMs?: number
}

/** The suite's gateway.yaml; `{{DIR}}` is the gateway's temp dir (see startGatewayProcess). */
export function suiteConfig(up: Upstreams, options: ConfigOptions = {}): string {
  const t = options.timeouts ?? { connectMs: 2000, headersMs: 5000, bodyMs: 5000 }
  const timeouts = `{ connectMs: ${t.connectMs}, headersMs: ${t.headersMs}, bodyMs: ${t.bodyMs} }`
  const cost = options.cost ?? 1
  const projects = [
    `  - id: ${PROJECT}`,
    `    plan: enterprise`,
    `    scopes: [zkpaas, rpc, x402, mirror, events]`,
    `    credits: { allocation: ${options.allocation ?? 1_000_000_000}, period: month }`,
    `    features: { proveBatch: true, sponsoredWallet: true, tee: false, relayToConfidentialSpace: false }`,
    `    secretHash: ${hashCredential(SECRET)}`,
    `    keys: [{ label: rel, hash: ${hashCredential(KEY)} }]`,
    ...(options.extraProjects ?? []).flatMap((p) => [
      `  - id: ${p.id}`,
      `    plan: enterprise`,
      `    scopes: [rpc]`,
      `    credits: { allocation: ${p.allocation}, period: month }`,
      `    keys: [{ label: burst, hash: ${hashCredential(p.key)} }]`,
    ]),
  ].join('\n')
  const chain = up.chain
  const x402 = chain
    ? `
  - name: x402-facilitator
    methods: [GET, POST]
    path: /x402/:chain/:network/:apiKey/:endpoint
    apiType: x402
    errorFormat: x402
    maxBodyBytes: 65536
    handler:
      name: x402-facilitator
      config:
        networks:
          base:
            testnet:
              rpcUrl: "${up.proxies.chain!.url}"
              signerKeyEnv: X402_FACILITATOR_KEY
              assets: [{ address: "${chain.token}", name: USDC, version: "2", decimals: 6 }]
              receiptTimeoutMs: ${Math.max(2000, t.headersMs * 4)}
              pollingIntervalMs: 100
              rpcTimeoutMs: ${Math.max(100, t.headersMs)}
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: x402, scopeMessage: "Unauthorized access to x402 facilitator service" } }
      - { name: credit-meter, config: { apiType: x402, cost: ${cost} } }
`
    : ''
  return `version: 1
server:
  listen: { host: 127.0.0.1, port: 0 }
  drainTimeoutMs: 3000
  limits: { headersTimeoutMs: ${options.headersTimeoutMs ?? 10000}, requestTimeoutMs: 30000 }
admin:
  listen: { host: 127.0.0.1, port: 0 }
  tokenHash: ${hashCredential(ADMIN_TOKEN)}
store: { dataDir: '{{DIR}}/data' }
log: { level: info, access: ${options.access ?? false} }
watch: true
projects:
${projects}
upstreams:
  proof-server: { url: '${up.proxies.proof!.url}', timeouts: ${timeouts} }
  node-rpc: { url: '${up.proxies.node!.url}', timeouts: ${timeouts} }
  mirror-testnet: { url: '${up.proxies.mirror!.url}/api/v1', timeouts: ${timeouts} }
unmatched:
  - { prefix: /ledger/testnet/api/v1/, errorFormat: mirror }
routes:
  - name: zkpaas-prove
    methods: [POST]
    path: /privnet/zkpaas/:apiKey/prove
    rewrite: /prove
    upstream: proof-server
    apiType: PRIVNET_ZKPAAS
    maxBodyBytes: 1048576
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas, plans: [enterprise] } }
      - { name: zk-features, config: { sponsored: {} } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: ${cost} } }
      - name: binary-validator
        config: &prove-payload
          tags: ['(proof-preimage-versioned,option(proving-data),option(fr-bls))']
          discriminant: { value: 1, type: ProofPreimageVersioned }
  - name: zkpaas-prove-batch
    methods: [POST]
    path: /privnet/zkpaas/:apiKey/prove-batch
    apiType: PRIVNET_ZKPAAS
    maxBodyBytes: 1048576
    handler:
      name: prove-batch
      config:
        upstream: proof-server
        concurrency: 20
        itemTimeoutMs: ${t.headersMs + t.bodyMs}
        creditsPerProof: ${cost}
        endpoints:
          prove: { path: /prove, validate: *prove-payload }
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas, plans: [enterprise] } }
      - { name: zk-features, config: { requireFeatures: [proveBatch] } }
      - { name: batch-cap, config: { field: proofs, limit: 20, itemName: proof } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: ${cost}, perItem: { path: proofs } } }
  - name: zkpaas-health
    methods: [GET]
    path: /privnet/zkpaas/:apiKey/health
    rewrite: /health
    upstream: proof-server
    apiType: PRIVNET_ZKPAAS
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas, plans: [enterprise] } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 0 } }
  - name: privnet-rpc
    methods: [POST]
    path: /privnet/rpc/:apiKey
    apiType: PRIVNET_RPC
    errorFormat: jsonrpc
    maxBodyBytes: 1048576
    handler:
      name: jsonrpc
      config:
        upstream: node-rpc
        form: post
        maxBatch: 100
        allow: [system_chain, system_name, system_version, system_properties, system_health, chain_getHeader, chain_getBlockHash, chain_getFinalizedHead]
        aliases: { privnet_ledgerVersion: midnight_ledgerVersion, privnet_apiVersions: midnight_apiVersions }
        chainInfo: { method: privnet_chainInfo, ledgerVersionMethod: midnight_ledgerVersion, apiVersionsMethod: midnight_apiVersions }
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: rpc, plans: [enterprise] } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: ${cost} } }
  - name: privnet-rpc-get
    methods: [GET]
    path: /privnet/rpc/:apiKey
    apiType: PRIVNET_RPC
    errorFormat: jsonrpc
    handler:
      name: jsonrpc
      config:
        upstream: node-rpc
        form: get
        allow: [system_chain, system_name, system_version, system_properties, system_health, chain_getHeader, chain_getBlockHash, chain_getFinalizedHead]
        aliases: { privnet_ledgerVersion: midnight_ledgerVersion, privnet_apiVersions: midnight_apiVersions }
        chainInfo: { method: privnet_chainInfo, ledgerVersionMethod: midnight_ledgerVersion, apiVersionsMethod: midnight_apiVersions }
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: rpc, plans: [enterprise] } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: ${cost} } }
  - name: events-create
    methods: [POST]
    path: /events/ledger/create/:item/:apiKey
    apiType: EVENTS
    maxBodyBytes: 4096
    handler: { name: events, config: { operation: create } }
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: events } }
      - { name: secret-check, config: { header: x-api-secret } }
      - { name: credit-meter, config: { apiType: EVENTS, cost: ${cost} } }
  - name: events-settings
    methods: [POST]
    path: /events/ledger/settings/:apiKey
    apiType: EVENTS
    maxBodyBytes: 1024
    handler: { name: events, config: { operation: list } }
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: events } }
      - { name: secret-check, config: { header: x-api-secret } }
      - { name: credit-meter, config: { apiType: EVENTS, cost: ${cost} } }
  - name: mirror-accounts-list
    methods: [GET]
    path: /ledger/testnet/api/v1/accounts
    rewrite: /accounts
    upstream: mirror-testnet
    apiType: MIRROR
    errorFormat: mirror
    plugins:
      - &auth { name: header-auth, config: { header: x-api-key, scope: mirror } }
      - &credits { name: credit-meter, config: { apiType: MIRROR, cost: ${cost} } }
      - &links { name: mirror-links }
      - { name: mirror-validate, config: { route: accounts.list } }
  - name: mirror-accounts-get
    methods: [GET]
    path: /ledger/testnet/api/v1/accounts/:id
    rewrite: /accounts/:id
    upstream: mirror-testnet
    apiType: MIRROR
    errorFormat: mirror
    plugins: [*auth, *credits, *links, { name: mirror-validate, config: { route: accounts.get } }]
  - name: mirror-transactions-list
    methods: [GET]
    path: /ledger/testnet/api/v1/transactions
    rewrite: /transactions
    upstream: mirror-testnet
    apiType: MIRROR
    errorFormat: mirror
    plugins: [*auth, *credits, *links, { name: mirror-validate, config: { route: transactions.list } }]
${x402}`
}

/** Environment for the gateway process (the x402 signer key comes from the environment). */
export function suiteEnv(up: Upstreams): NodeJS.ProcessEnv {
  return up.chain ? { X402_FACILITATOR_KEY: up.chain.facilitatorKey } : {}
}
