/**
 * Prints a facilitator request body (`{x402Version, paymentPayload, paymentRequirements}`) holding
 * a payment made by the official `@x402/svm` client against the local SVM that `npm start` runs:
 * the dev payer pays 0.01 of the local mint to the dev payee, with the dev facilitator as fee
 * payer. It is what the README's Solana verify / settle curls send.
 *
 *     node --import tsx examples/svm/payment.ts [--rpc http://127.0.0.1:18899] [--version 2|1] > payment.json
 *
 * The keys are the fixed dev keys of accounts.ts, so the body matches the SVM started by
 * examples/dev.ts (or `examples/svm/index.ts`). Each run makes a new payment (the client picks a
 * fresh memo), valid until the SVM's blockhash moves on.
 */
import { createKeyPairSignerFromBytes } from '@solana/kit'
import { SOLANA_TESTNET_CAIP2 } from '@x402/svm'
import { ExactSvmScheme as OfficialClient } from '@x402/svm/exact/client'
import { ExactSvmSchemeV1 as OfficialClientV1 } from '@x402/svm/exact/v1/client'
import { devAccount } from './accounts.ts'

const args = process.argv.slice(2)
const flag = (name: string, fallback: string) => {
  const at = args.indexOf(name)
  return at >= 0 && args[at + 1] ? args[at + 1]! : fallback
}
const rpcUrl = flag('--rpc', process.env.SOLANA_RPC_URL ?? 'http://127.0.0.1:18899')
const version = flag('--version', '2') === '1' ? 1 : 2

const payer = await createKeyPairSignerFromBytes(devAccount('payer').secretKey)
const common = {
  scheme: 'exact', asset: devAccount('usdc mint').address as string, payTo: devAccount('payee').address as string,
  maxTimeoutSeconds: 60, extra: { feePayer: devAccount('facilitator').address as string },
}

let body: unknown
if (version === 2) {
  const requirements = { ...common, network: SOLANA_TESTNET_CAIP2, amount: '10000' }
  const created = await new OfficialClient(payer, { rpcUrl }).createPaymentPayload(2, requirements as any)
  body = { x402Version: 2, paymentPayload: { x402Version: 2, accepted: requirements, payload: created.payload, resource: { url: 'http://127.0.0.1:8080/paid' } }, paymentRequirements: requirements }
} else {
  const requirements = {
    ...common, network: 'solana-testnet', maxAmountRequired: '10000', resource: 'http://127.0.0.1:8080/paid',
    description: 'a paid thing', mimeType: 'application/json',
  }
  const created = await new OfficialClientV1(payer, { rpcUrl }).createPaymentPayload(1, requirements as any)
  body = { x402Version: 1, paymentPayload: { ...created, scheme: 'exact', network: requirements.network }, paymentRequirements: requirements }
}
console.log(JSON.stringify(body))
