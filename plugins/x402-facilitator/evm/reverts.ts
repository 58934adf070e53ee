/**
 * Turns viem errors into (reason, message) pairs safe to show a client: revert texts are mapped to
 * the reference codes (the same patterns the reference's settle-error parser recognises), and
 * anything else is reduced to a short message with RPC URLs and request bodies removed.
 */
import { BaseError, ContractFunctionRevertedError } from 'viem'
import { insufficientBalanceMessage, reasons } from './errors.ts'

/** The token's revert text, when the error is a revert. */
export function revertText(error: unknown): string | undefined {
  if (!(error instanceof BaseError)) return undefined
  const reverted = error.walk((e) => e instanceof ContractFunctionRevertedError)
  if (reverted instanceof ContractFunctionRevertedError) {
    return reverted.reason ?? reverted.data?.errorName ?? reverted.shortMessage
  }
  const text = error.walk((e) => /revert/i.test((e as BaseError).details ?? ''))
  if (!(text instanceof BaseError)) return undefined
  // Nodes phrase it "...reverted with reason string 'X'" or "execution reverted: X".
  const quoted = /reason string '([^']*)'/.exec(text.details) ?? /execution reverted: (.+)$/.exec(text.details)
  return quoted ? quoted[1] : text.details
}

/** Maps a token revert text to a reason code. */
export function reasonForRevert(text: string, fallback: string): { reason: string; message: string } {
  if (/exceeds balance|insufficient (balance|funds)/i.test(text)) {
    return { reason: reasons.insufficientBalance, message: insufficientBalanceMessage }
  }
  if (/used or canceled|authorization ?used|already used/i.test(text)) return { reason: reasons.nonceAlreadyUsed, message: text }
  if (/not yet valid|valid ?after/i.test(text)) return { reason: reasons.validAfter, message: text }
  if (/expired|valid ?before/i.test(text)) return { reason: reasons.validBefore, message: text }
  if (/invalid signature|signature/i.test(text)) return { reason: reasons.invalidSignature, message: text }
  return { reason: fallback, message: text }
}

/** A one-line description of an unexpected error without URLs, request bodies or stack. */
export function safeMessage(error: unknown): string {
  const raw = error instanceof BaseError ? error.shortMessage : error instanceof Error ? error.message : String(error)
  return raw
    .split('\n')[0]!
    .replace(/\bhttps?:\/\/\S+/gi, '<rpc>')
    .replace(/\bwss?:\/\/\S+/gi, '<rpc>')
    .slice(0, 300)
}

