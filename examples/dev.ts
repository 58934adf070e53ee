/**
 * `npm start`: starts the local stand-in upstreams on their default ports, then the gateway with
 * gateway.yaml, so that every route answers with no outside service. Ctrl-C stops everything.
 *
 * Ports (override with the env vars gateway.yaml reads): proof server 18300, TEE proof pool 18301,
 * relay proof pool 18302, node RPC 18944, mirror mainnet 18551, mirror testnet 18552, EVM chain 18545,
 * Solana (local SVM) 18899.
 */
import { existsSync } from 'node:fs'
import { main } from '../core/cli/cli.ts'

interface Closable {
  close(): Promise<void>
}

const here = (path: string) => new URL(path, import.meta.url)
const port = (name: string, fallback: number) => Number(new URL(process.env[name] ?? `http://127.0.0.1:${fallback}`).port)

async function optional<T>(path: string, start: (module: any) => Promise<T>): Promise<T | undefined> {
  if (!existsSync(here(path))) return undefined
  return start(await import(here(path).href))
}

const started: Closable[] = []
const keep = (standIn: Closable | undefined, label: string, url?: string) => {
  if (!standIn) return
  started.push(standIn)
  console.error(`stand-in ${label} on ${url ?? (standIn as any).url}`)
}

try {
  await optional('./upstreams/proof-server.ts', async (m) => {
    keep(await m.startProofServer({ port: port('PROOF_SERVER_URL', 18300), provingDelayMs: 50 }), 'proof server')
    keep(await m.startProofServer({ port: port('PROOF_TEE_URL', 18301), provingDelayMs: 50 }), 'TEE proof pool')
    keep(await m.startProofServer({ port: port('PROOF_RELAY_URL', 18302), provingDelayMs: 50 }), 'relay proof pool')
  })
  await optional('./upstreams/node-rpc.ts', async (m) => keep(await m.startNodeRpc({ port: port('NODE_RPC_URL', 18944) }), 'node RPC'))
  await optional('./upstreams/mirror.ts', async (m) => {
    keep(await m.startMirror({ port: port('MIRROR_MAINNET_URL', 18551), network: 'mainnet' }), 'mirror mainnet')
    keep(await m.startMirror({ port: port('MIRROR_TESTNET_URL', 18552), network: 'testnet' }), 'mirror testnet')
  })
  await optional('./chain/index.ts', async (m) => {
    const chain = await m.startLocalChain({ port: port('EVM_RPC_URL', 18545) })
    keep(chain, 'EVM chain', chain.rpcUrl)
    // The facilitator signs with the local chain's funded dev account unless the operator set a key.
    process.env.X402_FACILITATOR_KEY ??= chain.accounts.facilitator.privateKey
    process.env.X402_ASSET ??= chain.token
  })
  await optional('./svm/index.ts', async (m) => {
    const local = await m.startLocalSvm({ port: port('SOLANA_RPC_URL', 18899) })
    keep(local, 'Solana (local SVM)', local.rpcUrl)
    // The fee payer is the local SVM's dev account unless the operator set a key.
    process.env.X402_SOLANA_FACILITATOR_KEY ??= local.accounts.facilitator.secretKeyBase58
    process.env.X402_SOLANA_ASSET ??= local.mint
  })
  await optional('./oidc-provider.ts', async (m) => {
    // The identity provider workstation owners sign in with; the demo project's owner is "demo-user".
    const idp = await m.startLocalOidcProvider(port('OIDC_ISSUER', 18900))
    idp.register({ clientId: 'tollgate-workstations', redirectUris: [`http://127.0.0.1:${process.env.TOLLGATE_PORT ?? 8080}/workstations/_auth/callback`] })
    keep(idp, 'OpenID provider (sign in as demo-user)', idp.issuer)
  })
} catch (error) {
  console.error(`could not start the stand-ins: ${(error as Error).message}`)
  await Promise.allSettled(started.map((s) => s.close()))
  process.exit(1)
}

const code = await main(['start', '-c', process.argv[2] ?? 'gateway.yaml'])
await Promise.allSettled(started.map((s) => s.close()))
process.exit(code)
