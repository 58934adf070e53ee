/**
 * `privnet_chainInfo`: the node has no such method, so the gateway composes it from standard
 * Substrate calls and the node's ledger/API version calls, in two round trips:
 *
 * 1. system_chain, system_name, system_version, system_properties, chain_getBlockHash [0],
 *    chain_getHeader [], chain_getFinalizedHead [], <ledgerVersion> [], <apiVersions> []
 *    (sent together with the client's other calls of the same request);
 * 2. chain_getBlockHash [best number] and chain_getHeader [finalized hash], so each block's
 *    number and hash describe the same block.
 *
 * Result:
 * `{chain, nodeName, nodeVersion, properties, genesisHash, bestBlock: {number, hash},
 *   finalizedBlock: {number, hash}, ledgerVersion, apiVersions}`.
 * Any sub-call failing makes the whole call fail with -32603, naming the sub-call in `data`.
 */
import { isObject, rpcError, type RpcErrorObject } from './calls.ts'
import type { NodeOutcome, OutgoingCall, RpcSender } from './upstream-call.ts'

export interface ChainInfoConfig {
  /** Client-facing method name. */
  method: string
  ledgerVersionMethod: string
  apiVersionsMethod: string
}

export type ChainInfoOutcome = { result: Record<string, unknown> } | { error: RpcErrorObject }

const FIELDS = ['chain', 'nodeName', 'nodeVersion', 'properties', 'genesisHash', 'bestHeader', 'finalizedHash', 'ledgerVersion', 'apiVersions'] as const

/** The first-round sub-calls, in {@link FIELDS} order. */
export function firstRound(config: ChainInfoConfig): OutgoingCall[] {
  return [
    { method: 'system_chain', params: [] },
    { method: 'system_name', params: [] },
    { method: 'system_version', params: [] },
    { method: 'system_properties', params: [] },
    { method: 'chain_getBlockHash', params: [0] },
    { method: 'chain_getHeader', params: [] },
    { method: 'chain_getFinalizedHead', params: [] },
    { method: config.ledgerVersionMethod, params: [] },
    { method: config.apiVersionsMethod, params: [] },
  ]
}

class SubCallFailed extends Error {}

function take(config: ChainInfoConfig, call: OutgoingCall, outcome: NodeOutcome | undefined): unknown {
  if (outcome === undefined) throw new SubCallFailed(`${config.method}: the node gave no answer to ${call.method}`)
  if ('error' in outcome) throw new SubCallFailed(`${config.method}: ${call.method} failed: ${outcome.error.message}`)
  return outcome.result
}

function blockNumber(config: ChainInfoConfig, header: unknown, from: string): number {
  const text = isObject(header) ? header.number : undefined
  if (typeof text !== 'string' || !/^0x[0-9a-fA-F]{1,16}$/.test(text)) throw new SubCallFailed(`${config.method}: ${from} gave no block number`)
  return Number.parseInt(text.slice(2), 16)
}

/**
 * Finishes a chainInfo call from its first-round outcomes (one per {@link firstRound} call).
 *
 * @example
 * ```ts
 * const calls = firstRound(config)
 * const outcome = await composeChainInfo(config, calls, await send(calls), send)
 * // { result: { chain: 'privnet-preview', bestBlock: { number: 4096, hash: '0x…' }, ... } }
 * ```
 */
export async function composeChainInfo(
  config: ChainInfoConfig,
  calls: readonly OutgoingCall[],
  outcomes: readonly (NodeOutcome | undefined)[],
  send: RpcSender,
): Promise<ChainInfoOutcome> {
  try {
    const first: Record<string, unknown> = {}
    FIELDS.forEach((field, i) => (first[field] = take(config, calls[i], outcomes[i])))
    const best = blockNumber(config, first.bestHeader, 'chain_getHeader')
    if (typeof first.finalizedHash !== 'string') throw new SubCallFailed(`${config.method}: chain_getFinalizedHead gave no hash`)
    const second: OutgoingCall[] = [
      { method: 'chain_getBlockHash', params: [best] },
      { method: 'chain_getHeader', params: [first.finalizedHash] },
    ]
    const [bestHash, finalizedHeader] = await send(second)
    return {
      result: {
        chain: first.chain,
        nodeName: first.nodeName,
        nodeVersion: first.nodeVersion,
        properties: first.properties,
        genesisHash: first.genesisHash,
        bestBlock: { number: best, hash: take(config, second[0], bestHash) },
        finalizedBlock: { number: blockNumber(config, take(config, second[1], finalizedHeader), 'chain_getHeader'), hash: first.finalizedHash },
        ledgerVersion: first.ledgerVersion,
        apiVersions: first.apiVersions,
      },
    }
  } catch (error) {
    if (error instanceof SubCallFailed) return { error: rpcError('internal', error.message) }
    throw error
  }
}
