/**
 * Replacing a bought key by signing in with the wallet (`key-buy` action rekey, sign-in-with-x,
 * EIP-4361 + EIP-191): every forged or stale sign-in is refused with a stable code naming the
 * field, and changes nothing (the project's key keeps working):
 * a malformed header (400 invalid_siwx), a signature by another wallet (401 invalid_siwx_signature,
 * and the challenge stays usable by its owner), a challenge signed for another domain — the Host
 * header — (401 invalid_siwx_domain_mismatch), an expired challenge (401 invalid_siwx_expired),
 * a nonce the gateway never issued or already used, also by two requests at once (401
 * invalid_siwx_nonce), and a wallet that owns no project (404 wallet_project_not_found).
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { x402Client } from '@x402/core/client'
import { wrapFetchWithPayment } from '@x402/fetch'
import { ExactEvmScheme } from '@x402/evm/exact/client'
import type { LocalAccount } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { createSiweMessage } from 'viem/siwe'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'
import { call, type Answer } from '../helpers/x402.ts'
import { buyKeyConfig } from '../helpers/buy-key.ts'
import { price, startFixture } from '../plugins/x402-facilitator/evm-helpers.ts'

t.setTimeout(600_000)

const f = await startFixture(84532)
const { accounts } = f.chain
const up = await startTestUpstream()
t.teardown(async () => {
  await up.close()
  await f.close()
})
const gw = await startGatewayProcess(buyKeyConfig({
  upstream: up.url, store: `store: { dataDir: '{{DIR}}/data' }`, network: 'eip155:84532',
  asset: `{ address: "${f.chain.token}", name: USDC, version: "2", decimals: 6 }`, payTo: accounts.payee.address,
  rpcUrl: f.chain.rpcUrl, keyEnv: 'X402_FACILITATOR_KEY', chains: ['eip155:84532'], adminHash: hashCredential(randomBytes(8).toString('hex')),
}), { dir: tempDir('tollgate-siwx-'), env: { X402_FACILITATOR_KEY: accounts.facilitator.privateKey }, startTimeoutMs: 120_000 })
t.teardown(() => gw.stop('SIGKILL'))

const owner = privateKeyToAccount(accounts.payer.privateKey) as LocalAccount
const stranger = privateKeyToAccount(generatePrivateKey())
const wallet = new x402Client().register('eip155:84532', new ExactEvmScheme(owner))
  .setSpendControls({ allowedAssets: [{ network: 'eip155:84532', asset: f.chain.token, maxAmountPerPayment: price }] })
const bought = await wrapFetchWithPayment(fetch, wallet)(`${gw.url}/keys/buy`, { method: 'POST', headers: { 'x-buy-intent': randomBytes(24).toString('hex') } })
const KEY = ((await bought.json()) as any).key as string
const keyWorks = async () => (await call(`${gw.url}/api/${KEY}/call`)).status === 200

const rekey = (headers: Record<string, string> = {}, path = '/keys/rekey') => call(`${gw.url}${path}`, { method: 'POST', headers })
async function challenge(path = '/keys/rekey'): Promise<any> {
  return (await rekey({}, path)).json().extensions['sign-in-with-x'].info
}
const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64')
/** A SIWX header: the challenge's fields, `address` claimed, signed by `signer` over `edit`ed fields. */
async function signed(info: any, signer: LocalAccount, address: string = signer.address, edit: Record<string, unknown> = {}): Promise<string> {
  const fields = { ...info, address, chainId: 'eip155:84532', type: 'eip191', ...edit }
  const message = createSiweMessage({
    ...fields, chainId: 84532, issuedAt: new Date(fields.issuedAt), expirationTime: fields.expirationTime ? new Date(fields.expirationTime) : undefined,
  })
  return b64({ ...fields, signature: await signer.signMessage({ message }) })
}
const refusal = (answer: Answer) => [answer.status, answer.json().error?.code]
const said = (answer: Answer): string => answer.json().error?.message ?? ''

t.test('setup: the owner bought a key', async (t) => {
  t.equal(bought.status, 200)
  t.match(KEY, /^tg_/)
  t.ok(await keyWorks())
})

t.test('a malformed header: 400 invalid_siwx naming the field', async (t) => {
  const info = await challenge()
  const notJson = await rekey({ 'sign-in-with-x': 'not base64 json!' })
  t.same(refusal(notJson), [400, 'invalid_siwx'])
  t.match(said(notJson), /base64 of a JSON object/)
  const { nonce: _n, ...noNonce } = JSON.parse(Buffer.from(await signed(info, owner), 'base64').toString())
  const missing = await rekey({ 'sign-in-with-x': b64(noNonce) })
  t.same(refusal(missing), [400, 'invalid_siwx'])
  t.match(said(missing), /field nonce/)
  const badType = await rekey({ 'sign-in-with-x': b64({ ...noNonce, nonce: info.nonce, type: 'rsa' }) })
  t.match(said(badType), /field type/)
  const badTime = await rekey({ 'sign-in-with-x': b64({ ...noNonce, nonce: info.nonce, issuedAt: 'yesterday' }) })
  t.same(refusal(badTime), [400, 'invalid_siwx'])
  t.match(said(badTime), /field issuedAt/)
  t.ok(await keyWorks(), 'nothing changed')
})

t.test('a signature by another wallet: 401, and the challenge stays the owner’s', async (t) => {
  const info = await challenge()
  const forged = await rekey({ 'sign-in-with-x': await signed(info, stranger, owner.address) })
  t.same(refusal(forged), [401, 'invalid_siwx_signature'])
  t.match(said(forged), /field signature/)
  t.ok(await keyWorks(), 'the key still works')
  const real = await rekey({ 'sign-in-with-x': await signed(info, owner) })
  t.equal(real.status, 200, 'the owner can still use the challenge')
  t.notOk(await keyWorks(), 'and the old key is now disabled')
  const next = real.json().key as string
  t.equal((await call(`${gw.url}/api/${next}/call`)).status, 200)
})

t.test('a challenge signed for another domain (the Host header): 401', async (t) => {
  const info = await challenge()
  const host = new URL(gw.url).host
  const answer = await rekey({ 'sign-in-with-x': await signed(info, owner, owner.address, { domain: host, uri: `${gw.url}/keys/rekey` }) })
  t.same(refusal(answer), [401, 'invalid_siwx_domain_mismatch'])
  t.match(said(answer), /field domain/)
  const uri = await rekey({ 'sign-in-with-x': await signed(info, owner, owner.address, { uri: `${gw.url}/keys/rekey` }) })
  t.same(refusal(uri), [401, 'invalid_siwx_uri_mismatch'])
})

t.test('an expired challenge: 401 invalid_siwx_expired', async (t) => {
  const info = await challenge('/keys/rekey-fast')
  const header = await signed(info, owner)
  await new Promise((resolve) => setTimeout(resolve, 1500))
  const answer = await rekey({ 'sign-in-with-x': header }, '/keys/rekey-fast')
  t.same(refusal(answer), [401, 'invalid_siwx_expired'])
  // Without the message's own expirationTime, the stored challenge's expiry still decides.
  const info2 = await challenge('/keys/rekey-fast')
  const { expirationTime: _e, ...noExpiry } = info2
  const header2 = await signed(noExpiry, owner)
  await new Promise((resolve) => setTimeout(resolve, 1500))
  const answer2 = await rekey({ 'sign-in-with-x': header2 }, '/keys/rekey-fast')
  t.same(refusal(answer2), [401, 'invalid_siwx_expired'])
  t.match(said(answer2), /field nonce/)
})

t.test('a nonce never issued, or used already (also twice at once): 401 invalid_siwx_nonce', async (t) => {
  const made = await challenge()
  const unknown = await rekey({ 'sign-in-with-x': await signed({ ...made, nonce: randomBytes(16).toString('hex') }, owner) })
  t.same(refusal(unknown), [401, 'invalid_siwx_nonce'])
  const header = await signed(await challenge(), owner)
  const both = await Promise.all([rekey({ 'sign-in-with-x': header }), rekey({ 'sign-in-with-x': header })])
  t.same(both.map((a) => a.status).sort(), [200, 401], 'one sign-in per nonce')
  t.equal(refusal(both.find((a) => a.status === 401)!)[1], 'invalid_siwx_nonce')
  const reused = await rekey({ 'sign-in-with-x': header })
  t.same(refusal(reused), [401, 'invalid_siwx_nonce'])
  t.match(said(reused), /field nonce/)
})

t.test('a wallet that owns no project: 404 wallet_project_not_found', async (t) => {
  const answer = await rekey({ 'sign-in-with-x': await signed(await challenge(), stranger) })
  t.same(refusal(answer), [404, 'wallet_project_not_found'])
})
