/**
 * `action: buy`: a settled x402 payment buys the paying wallet a project (on its first purchase)
 * and credits; the first purchase also returns an API key, shown once. The next purchases from the
 * same wallet top up the same project and return no key (the key in use keeps working; a lost key
 * is replaced by signing in with the wallet, `action: rekey`).
 *
 * One payment, one grant, whatever races: the paywall binds the payment to the buyer's intent
 * header (a copy of the authorization from the chain cannot complete it), and this hook claims the
 * settlement (`buy:<network>:<transaction>`, atomic on every engine and across instances) before
 * it writes anything, so of two requests carrying the same payment one buys and the other is
 * refused 409 `payment_already_redeemed`. The grant's id is the settlement as well, so even a
 * second writer could not grant twice.
 */
import { errors, GatewayError } from '../../core/proxy/plugin-api.ts'
import type { RequestContext } from '../../core/proxy/plugin-api.ts'
import { scheduleBounds } from '../../core/proxy/plugin-api.ts'
import type { DocumentCollection, Store } from '../../core/store/types.ts'
import { onPaymentSettled, verifiedPayment, type SettledPayment } from '../x402-paywall/index.ts'
import type { IssuedKey, WalletProjects } from './wallet-project.ts'

export interface BuyTerms {
  unitsPerCredit: bigint
  reason: string
}

interface BuyClaim {
  request: string
  state: 'started' | 'done'
  /** A claim still `started` after this (the request died mid-way) may be taken over by a retry. */
  until: number
  projectId?: string
}

/** How long a purchase in progress keeps its claim before a retry may take it over. */
const LEASE_MS = 60_000
const OWNER = 'key-buy'

function alreadyRedeemed(ctx: RequestContext): GatewayError {
  ctx.logFields.x402Result = 'payment_already_redeemed'
  return new GatewayError(409, 'payment_already_redeemed', 'this payment already bought a key or credits (or is doing so in another request); sign a new payment to buy again')
}

/** Claims the settlement for this request; a stale claim (its request died) is taken over. */
async function claim(docs: DocumentCollection, id: string, ctx: RequestContext): Promise<void> {
  const now = Date.now()
  const mine: BuyClaim = { request: ctx.id, state: 'started', until: now + LEASE_MS }
  const { created } = await docs.insertIfAbsent<BuyClaim>(id, OWNER, mine)
  if (created) return
  const current = await docs.getWithRevision<BuyClaim>(id)
  if (!current || current.stored.doc.state === 'done' || now < current.stored.doc.until) throw alreadyRedeemed(ctx)
  if ((await docs.compareAndSet<BuyClaim>(id, current.revision, mine)) === undefined) throw alreadyRedeemed(ctx)
}

export function buyHandler(store: Store, docs: DocumentCollection, wallets: WalletProjects, terms: BuyTerms, routeName: string) {
  const creditsFor = (units: string): number => {
    const credits = BigInt(units) / terms.unitsPerCredit
    // A price below one credit is a config mistake; thrown before settlement it costs the buyer nothing.
    if (credits < 1n || credits > BigInt(Number.MAX_SAFE_INTEGER)) throw errors.internal(`route ${routeName}: a payment of ${units} units buys ${credits} credits`)
    return Number(credits)
  }

  const complete = async (ctx: RequestContext, settled: SettledPayment) => {
    const claimId = `buy:${settled.network}:${settled.transaction}`
    await claim(docs, claimId, ctx)
    try {
      await completeClaimed(ctx, settled, claimId)
    } catch (error) {
      // The paywall keeps the payment pending for the buyer's retry; ending the lease now lets that
      // retry take the claim over at once instead of after LEASE_MS. Best effort: the lease ends anyway.
      await docs.update<BuyClaim>(claimId, { request: ctx.id, state: 'started', until: 0 }).catch(() => undefined)
      throw error
    }
  }

  const completeClaimed = async (ctx: RequestContext, settled: SettledPayment, claimId: string) => {
    const amount = creditsFor(settled.amount)
    const actor = `x402:${settled.payer}`
    const project = await wallets.ensure(settled.payer, actor)
    const grantId = `x402:${settled.network}:${settled.transaction}`
    const { created, balance } = await store.grantCredits({
      id: grantId, projectId: project.id, period: scheduleBounds(project.credits, Date.now()).key,
      allocation: project.credits.allocation, amount, reason: terms.reason, actor: settled.payer,
    })
    if (!created && balance.projectId !== project.id) throw alreadyRedeemed(ctx)
    // The first purchase (no key works yet) gets a key; a top-up leaves the key in use alone.
    const key: IssuedKey | undefined = wallets.hasActiveKey(project) ? undefined : await wallets.issueKey(project.id, 'x402', actor)
    await docs.update<BuyClaim>(claimId, { request: ctx.id, state: 'done', until: 0, projectId: project.id })
    ctx.logFields.creditsGranted = created ? amount : 0
    ctx.logFields.projectId = project.id
    const { allocation, granted, used, remaining } = balance
    ctx.response!.headers['cache-control'] = 'no-store'
    ctx.response!.body = Buffer.from(JSON.stringify({
      project: project.id,
      wallet: settled.payer,
      ...(key
        ? { key: key.key, label: key.label, prefix: key.prefix }
        : { key: null, note: 'this wallet already has a project with a working key: the credits were added to it (a lost key is replaced by signing in with the wallet)' }),
      granted: created ? amount : 0,
      grant: { id: grantId, amount, reason: terms.reason, payer: settled.payer, network: settled.network, transaction: settled.transaction },
      period: balance.period,
      balance: { allocation, granted, used, remaining },
    }))
  }

  return async (ctx: RequestContext): Promise<void> => {
    const payment = verifiedPayment(ctx)
    if (!payment) throw errors.internal(`route ${routeName} runs key-buy without x402-paywall`)
    // Without an intent binding, a copy of the payment (public once broadcast) could collect the key.
    if (!payment.intentBound) throw errors.internal(`route ${routeName} runs key-buy without the paywall's intentHeader`)
    ctx.respond(200, { wallet: payment.payer, credits: creditsFor(payment.amount) })
    onPaymentSettled(ctx, (settled) => complete(ctx, settled))
  }
}
