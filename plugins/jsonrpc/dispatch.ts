/**
 * Runs validated entries: resolves each method against the allow-list and the alias map, sends
 * every forwarded call (plus chainInfo's sub-calls) to the node in one request, and puts the
 * answers back in input order with the client's ids. Notifications get no answer, whatever
 * happened to them.
 */
import { answer, hasNoParams, rpcError, type Answer, type Entry } from './calls.ts'
import { composeChainInfo, firstRound, type ChainInfoConfig, type ChainInfoOutcome } from './chain-info.ts'
import type { OutgoingCall, RpcSender } from './upstream-call.ts'

export interface MethodTable {
  /** Upstream methods callable under their own name. */
  allow: ReadonlySet<string>
  /** Client-facing name → upstream name. */
  aliases: Readonly<Record<string, string>>
  chainInfo?: ChainInfoConfig
}

type Plan = { kind: 'forward'; method: string } | { kind: 'chainInfo' }

/**
 * What a client-facing method name runs, or undefined when it is not offered.
 *
 * @example
 * ```ts
 * resolveMethod({ allow: new Set(['system_chain']), aliases: { privnet_ledgerVersion: 'midnight_ledgerVersion' } }, 'privnet_ledgerVersion')
 * // { kind: 'forward', method: 'midnight_ledgerVersion' }
 * ```
 */
export function resolveMethod(table: MethodTable, method: string): Plan | undefined {
  if (table.chainInfo && method === table.chainInfo.method) return { kind: 'chainInfo' }
  if (Object.hasOwn(table.aliases, method)) return { kind: 'forward', method: table.aliases[method] }
  if (table.allow.has(method)) return { kind: 'forward', method }
  return undefined
}

/**
 * One answer per entry, in order; null where nothing is answered (notifications).
 *
 * @example
 * ```ts
 * await dispatch([{ call: { id: 1, notification: false, method: 'system_chain' } }], table, send)
 * // [{ jsonrpc: '2.0', id: 1, result: 'privnet-preview' }]
 * ```
 */
export async function dispatch(entries: readonly Entry[], table: MethodTable, send: RpcSender): Promise<(Answer | null)[]> {
  const answers: (Answer | null)[] = new Array(entries.length).fill(null)
  const outgoing: OutgoingCall[] = []
  /** entry index → its position in `outgoing` */
  const forwarded = new Map<number, number>()
  const chainInfoEntries: number[] = []

  entries.forEach((entry, i) => {
    if ('error' in entry) {
      answers[i] = answer(entry.id, { error: entry.error })
      return
    }
    const { call } = entry
    const plan = resolveMethod(table, call.method)
    if (!plan) {
      if (!call.notification) answers[i] = answer(call.id, { error: rpcError('methodNotFound', call.method) })
      return
    }
    if (plan.kind === 'forward') {
      forwarded.set(i, outgoing.length)
      outgoing.push({ method: plan.method, params: call.params, notification: call.notification })
      return
    }
    // chainInfo only reads, so a notification of it has nothing to do.
    if (call.notification) return
    if (!hasNoParams(call.params)) answers[i] = answer(call.id, { error: rpcError('invalidParams', `${call.method} takes no params`) })
    else chainInfoEntries.push(i)
  })

  const subCalls = chainInfoEntries.length && table.chainInfo ? firstRound(table.chainInfo) : []
  const subStart = outgoing.length
  outgoing.push(...subCalls)
  if (outgoing.length === 0) return answers

  const outcomes = await send(outgoing)
  for (const [i, position] of forwarded) {
    const { call } = entries[i] as { call: { id: Answer['id']; notification: boolean } }
    if (call.notification) continue
    const outcome = outcomes[position]
    answers[i] = answer(call.id, outcome ?? { error: rpcError('internal', 'the node gave no answer to this call') })
  }
  if (subCalls.length) {
    const info: ChainInfoOutcome = await composeChainInfo(table.chainInfo!, subCalls, outcomes.slice(subStart), send)
    for (const i of chainInfoEntries) answers[i] = answer((entries[i] as { call: { id: Answer['id'] } }).call.id, info)
  }
  return answers
}
