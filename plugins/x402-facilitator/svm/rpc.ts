/**
 * The Solana JSON-RPC calls the facilitator makes, over fetch with a timeout per call. A transport
 * failure, a timeout or a malformed answer throws {@link SvmRpcFault} (the caller answers 502 or
 * keeps a settlement pending); a JSON-RPC error object throws {@link SvmRpcRejection} (the node
 * looked at the request and refused it).
 */
import { Agent } from 'undici'

export class SvmRpcFault extends Error {}
export class SvmRpcRejection extends Error {
  constructor(readonly code: number, message: string) {
    super(message)
  }
}

export interface SignatureStatus {
  confirmationStatus: string | null
  err: unknown
}

export interface SimulationOutcome {
  err: unknown
  logs: string[]
}

export interface AccountData {
  owner: string
  data: Uint8Array
}

/** Minimal Solana RPC client; `url` is never shown to clients. */
export class SvmRpc {
  readonly #url: string
  readonly #timeoutMs: number
  readonly #dispatcher = new Agent({ keepAliveTimeout: 10_000, connections: 32 })
  /** The exchange: the global fetch on `url`, or a pool's (rpc-pool.ts) for an `rpcUpstream`. */
  readonly #fetch: typeof fetch
  #id = 0

  constructor(url: string, timeoutMs: number, fetchFn: typeof fetch = fetch) {
    this.#url = url
    this.#timeoutMs = timeoutMs
    this.#fetch = fetchFn
  }

  async call<T>(method: string, params: unknown[]): Promise<T> {
    let answer: any
    try {
      const response = await this.#fetch(this.#url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: ++this.#id, method, params }),
        signal: AbortSignal.timeout(this.#timeoutMs),
        // @ts-expect-error undici's fetch takes a dispatcher
        dispatcher: this.#dispatcher,
      })
      if (!response.ok) throw new SvmRpcFault(`${method}: HTTP ${response.status}`)
      answer = await response.json()
    } catch (error) {
      if (error instanceof SvmRpcFault) throw error
      throw new SvmRpcFault(`${method}: ${(error as Error).name === 'TimeoutError' ? 'timed out' : (error as Error).message}`)
    }
    if (answer?.error) throw new SvmRpcRejection(Number(answer.error.code), String(answer.error.message ?? 'rejected'))
    if (!answer || !('result' in answer)) throw new SvmRpcFault(`${method}: malformed answer`)
    return answer.result as T
  }

  async isBlockhashValid(blockhash: string): Promise<boolean> {
    const result = await this.call<{ value: boolean }>('isBlockhashValid', [blockhash, { commitment: 'confirmed' }])
    return result.value === true
  }

  async simulate(base64: string): Promise<SimulationOutcome> {
    const result = await this.call<{ value: { err: unknown; logs?: string[] | null } }>('simulateTransaction', [
      base64, { encoding: 'base64', sigVerify: true, replaceRecentBlockhash: false, commitment: 'confirmed' },
    ])
    return { err: result.value?.err ?? null, logs: result.value?.logs ?? [] }
  }

  /** Sends without preflight (verify simulated already); returns the signature. */
  send(base64: string): Promise<string> {
    return this.call<string>('sendTransaction', [base64, { encoding: 'base64', skipPreflight: true, preflightCommitment: 'confirmed', maxRetries: 5 }])
  }

  async status(signature: string): Promise<SignatureStatus | null> {
    const result = await this.call<{ value: (SignatureStatus | null)[] }>('getSignatureStatuses', [[signature], { searchTransactionHistory: true }])
    return result.value?.[0] ?? null
  }

  async account(address: string): Promise<AccountData | null> {
    const result = await this.call<{ value: { owner: string; data: [string, string] } | null }>('getAccountInfo', [address, { encoding: 'base64', commitment: 'confirmed' }])
    if (!result.value) return null
    return { owner: result.value.owner, data: new Uint8Array(Buffer.from(result.value.data[0], 'base64')) }
  }

  async health(): Promise<void> {
    await this.call('getLatestBlockhash', [{ commitment: 'confirmed' }])
  }

  close(): Promise<void> {
    return this.#dispatcher.close()
  }
}
