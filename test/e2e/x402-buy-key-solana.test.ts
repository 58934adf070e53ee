/**
 * An agent buys an API key over x402 on Solana (the local SVM, litesvm; paid with the official
 * `@x402/fetch` wrapper and `@x402/svm`), tops it up, and replaces it by signing a sign-in-with-x
 * challenge with its ed25519 key (SIWS): the old key then answers 401, the new one runs on the
 * same credits.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { getBase58Decoder, signBytes } from '@solana/kit'
import { x402Client } from '@x402/core/client'
import { decodePaymentResponseHeader, wrapFetchWithPayment } from '@x402/fetch'
import { ExactSvmScheme } from '@x402/svm/exact/client'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'
import { call } from '../helpers/x402.ts'
import { buyKeyConfig, ORIGIN } from '../helpers/buy-key.ts'
import { network, price, startSvmFixture } from '../plugins/x402-facilitator/svm-helpers.ts'

t.setTimeout(600_000)

const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const CREDITS = 100
const f = await startSvmFixture()
const up = await startTestUpstream()
t.teardown(async () => {
  await up.close()
  await f.close()
})
const payee = f.local.accounts.payee.address

/** The SIWS text: EIP-4361's layout with "Solana account" and the chain reference as Chain ID. */
function siwsMessage(p: Record<string, string>): string {
  return [
    `${p.domain} wants you to sign in with your Solana account:`, p.address, '', p.statement, '',
    `URI: ${p.uri}`, `Version: ${p.version}`, `Chain ID: ${p.chainId.slice('solana:'.length)}`, `Nonce: ${p.nonce}`,
    `Issued At: ${p.issuedAt}`, `Expiration Time: ${p.expirationTime}`, 'Resources:', `- ${p.uri}`,
  ].join('\n')
}

t.test('an agent buys a key on Solana, tops it up, and replaces it by signing in', async (t) => {
  const gw = await startGatewayProcess(buyKeyConfig({
    upstream: up.url, store: `store: { dataDir: '{{DIR}}/data' }`, network: 'solana-testnet', asset: `{ address: "${f.local.mint}", decimals: 6 }`,
    payTo: payee, rpcUrl: f.local.rpcUrl, keyEnv: 'X402_SOLANA_FACILITATOR_KEY', chains: [network], adminHash: hashCredential(ADMIN_TOKEN),
  }), { dir: tempDir('tollgate-buy-key-svm-'), env: { X402_SOLANA_FACILITATOR_KEY: f.local.accounts.facilitator.secretKeyBase58 }, startTimeoutMs: 120_000 })
  t.teardown(() => gw.stop('SIGKILL'))
  const wallet = new x402Client().register('solana:*', new ExactSvmScheme(f.payer, { rpcUrl: f.local.rpcUrl }))
    .setSpendControls({ allowedAssets: [{ network: network as `${string}:${string}`, asset: f.local.mint as string, maxAmountPerPayment: price }] })
  const pay = wrapFetchWithPayment(fetch, wallet)
  const intent = () => ({ 'x-buy-intent': randomBytes(24).toString('base64url') })
  const projectId = `wallet-${f.payer.address}`
  const metered = async (key: string) => (await call(`${gw.url}/api/${key}/call`)).status

  const before = await f.local.tokenBalance(payee)
  const bought = await pay(`${gw.url}/keys/buy`, { method: 'POST', headers: intent() })
  t.equal(bought.status, 200, 'the official Solana client pays and gets the key')
  const settle = decodePaymentResponseHeader(bought.headers.get('payment-response')!)
  t.match(settle, { success: true, network, payer: f.payer.address })
  const first = (await bought.json()) as any
  t.match(first, { project: projectId, wallet: f.payer.address, key: /^tg_/, granted: CREDITS, grant: { id: `x402:${network}:${settle.transaction}` }, balance: { granted: CREDITS } })
  t.equal(await f.local.tokenBalance(payee), before + BigInt(price), 'the payee got the price on the SVM')
  t.equal(await metered(first.key), 200)

  const again = await pay(`${gw.url}/keys/buy`, { method: 'POST', headers: intent() })
  t.equal(again.status, 200)
  t.match(await again.json(), { project: projectId, key: null, granted: CREDITS, balance: { granted: 2 * CREDITS } }, 'the same project is topped up')
  t.equal(await metered(first.key), 200, 'the key keeps working')

  const challenged = await call(`${gw.url}/keys/rekey`, { method: 'POST' })
  t.equal(challenged.status, 401)
  const ext = challenged.json().extensions['sign-in-with-x']
  t.same(ext.supportedChains, [{ chainId: network, type: 'ed25519' }])
  t.equal(ext.info.uri, `${ORIGIN}/keys/rekey`)
  const fields = { ...ext.info, address: f.payer.address, chainId: network, type: 'ed25519' }
  const signature = getBase58Decoder().decode(await signBytes(f.payer.keyPair.privateKey, new TextEncoder().encode(siwsMessage(fields))))
  const header = Buffer.from(JSON.stringify({ ...fields, signature })).toString('base64')
  const rekeyed = await call(`${gw.url}/keys/rekey`, { method: 'POST', headers: { 'sign-in-with-x': header } })
  t.equal(rekeyed.status, 200)
  const next = rekeyed.json()
  t.match(next, { project: projectId, key: /^tg_/, disabled: [first.label] })
  t.equal(await metered(first.key), 401, 'the old key is disabled')
  t.equal(await metered(next.key), 200, 'the new key works')
  const again2 = await call(`${gw.url}/keys/rekey`, { method: 'POST', headers: { 'sign-in-with-x': header } })
  t.same([again2.status, again2.json().error.code], [401, 'invalid_siwx_nonce'], 'the signed challenge serves once')
  const balance = (await call(`${gw.adminUrl}/admin/projects/${projectId}/credits`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json().balance
  t.match(balance, { granted: 2 * CREDITS, used: 3 }, 'one balance across both keys')
})
