/**
 * `action: rekey`: the wallet that owns a project bought over x402 gets a new API key by signing a
 * challenge (sign-in-with-x); every other key of the project is disabled at once.
 *
 * 1. A request without `SIGN-IN-WITH-X` → 401 `siwx_required` whose body carries the challenge as
 *    the x402 extension declares it: `extensions["sign-in-with-x"] = {info: {domain, uri, version,
 *    nonce, issuedAt, expirationTime, statement, resources}, supportedChains}`. The nonce is stored
 *    (`siwx-nonce:<nonce>` with its expiry) in the store, so any instance on the engine knows it.
 * 2. The same request with the signed header → the domain and URI must be the configured public
 *    `origin` (never the Host header), the nonce one we issued and not expired, the signature the
 *    address's; the nonce is then deleted, atomically, so it serves once (a reuse, or the slower of
 *    two requests racing with it, is 401 `invalid_siwx_nonce`).
 */
import { randomBytes } from 'node:crypto'
import { GatewayError } from '../../core/proxy/plugin-api.ts'
import type { RequestContext } from '../../core/proxy/plugin-api.ts'
import type { DocumentCollection } from '../../core/store/types.ts'
import { parseSiwx, signatureValid, siwxMessage, siwxRefused, SIWX_HEADER } from './siwx.ts'
import type { WalletProjects } from './wallet-project.ts'

export interface RekeyTerms {
  /** Public origin, `https://api.example.com`: the challenge's domain and URI are bound to it. */
  origin: string
  /** CAIP-2 chains a signature is accepted on. */
  chains: string[]
  challengeTtlSeconds: number
  statement: string
}

interface Challenge {
  expiresAt: number
}

const OWNER = 'siwx'
/** Expired challenges swept per new challenge (bounded work per request). */
const SWEEP = 20

export function rekeyHandler(docs: DocumentCollection, wallets: WalletProjects, terms: RekeyTerms) {
  const origin = new URL(terms.origin)
  const supportedChains = terms.chains.map((chainId) => ({ chainId, type: chainId.startsWith('solana:') ? 'ed25519' : 'eip191' }))

  const challenge = async (ctx: RequestContext) => {
    const now = Date.now()
    const nonce = randomBytes(16).toString('hex')
    const expiresAt = now + terms.challengeTtlSeconds * 1000
    await docs.insertIfAbsent<Challenge>(`siwx-nonce:${nonce}`, OWNER, { expiresAt })
    for (const old of await docs.listByOwner<Challenge>(OWNER, SWEEP)) if (old.doc.expiresAt < now) await docs.delete(old.key)
    const uri = origin.origin + ctx.path
    ctx.respond(401, {
      error: { code: 'siwx_required', message: 'sign the challenge in extensions["sign-in-with-x"] with the wallet that owns the project and send it base64-encoded in the SIGN-IN-WITH-X header' },
      extensions: {
        'sign-in-with-x': {
          info: {
            domain: origin.host, uri, version: '1', nonce,
            issuedAt: new Date(now).toISOString(), expirationTime: new Date(expiresAt).toISOString(),
            statement: terms.statement, resources: [uri],
          },
          supportedChains,
        },
      },
    }, { 'cache-control': 'no-store', 'www-authenticate': 'SIWX' })
  }

  return async (ctx: RequestContext): Promise<void> => {
    ctx.secretHeaders.add(SIWX_HEADER)
    const header = ctx.headers[SIWX_HEADER]
    if (header === undefined) return challenge(ctx)
    const p = parseSiwx(header)
    const now = Date.now()
    if (p.domain !== origin.host) throw siwxRefused('invalid_siwx_domain_mismatch', `SIGN-IN-WITH-X field domain must be ${origin.host}`)
    let uri: URL
    try {
      uri = new URL(p.uri)
    } catch {
      throw siwxRefused('invalid_siwx_uri_mismatch', `SIGN-IN-WITH-X field uri must be a URI on ${origin.origin}`)
    }
    if (uri.origin !== origin.origin) throw siwxRefused('invalid_siwx_uri_mismatch', `SIGN-IN-WITH-X field uri must be on ${origin.origin}`)
    if (!terms.chains.includes(p.chainId)) throw siwxRefused('invalid_siwx_chain', `SIGN-IN-WITH-X field chainId must be one of ${terms.chains.join(', ')}`)
    if (Date.parse(p.issuedAt) > now + 60_000) throw siwxRefused('invalid_siwx_issued_at_in_future', 'SIGN-IN-WITH-X field issuedAt is in the future')
    if (p.expirationTime && Date.parse(p.expirationTime) <= now) throw siwxRefused('invalid_siwx_expired', 'SIGN-IN-WITH-X field expirationTime has passed: ask for a new challenge')
    if (p.notBefore && Date.parse(p.notBefore) > now) throw siwxRefused('invalid_siwx_not_before', 'SIGN-IN-WITH-X field notBefore is still to come')
    const stored = await docs.get<Challenge>(`siwx-nonce:${p.nonce}`)
    if (!stored) throw siwxRefused('invalid_siwx_nonce', 'SIGN-IN-WITH-X field nonce is not a challenge of this gateway, or was used already: ask for a new challenge')
    if (stored.doc.expiresAt <= now) throw siwxRefused('invalid_siwx_expired', 'SIGN-IN-WITH-X field nonce names an expired challenge: ask for a new challenge')
    if (!(await signatureValid(p, siwxMessage(p)))) throw siwxRefused('invalid_siwx_signature', 'SIGN-IN-WITH-X field signature is not the signature of field address over the message')
    // Single use: of any number of requests carrying this nonce, the one whose delete removed it goes on.
    if (!(await docs.delete(`siwx-nonce:${p.nonce}`))) throw siwxRefused('invalid_siwx_nonce', 'SIGN-IN-WITH-X field nonce was used already: ask for a new challenge')
    const project = wallets.find(p.address)
    if (!project) throw new GatewayError(404, 'wallet_project_not_found', `the wallet in SIGN-IN-WITH-X field address owns no project: buy a key first`)
    const actor = `siwx:${p.address}`
    const key = await wallets.issueKey(project.id, 'siwx', actor)
    const disabled = await wallets.disableOthers(project.id, key.label, actor)
    ctx.logFields.projectId = project.id
    ctx.respond(200, { project: project.id, wallet: p.address, key: key.key, label: key.label, prefix: key.prefix, disabled }, { 'cache-control': 'no-store' })
  }
}
