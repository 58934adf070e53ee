/**
 * The proof server's "tagged" binary framing (ledger 7.0.0), for building test and bench payloads.
 *
 * Every top-level value starts with the ASCII header `midnight:<tag>:`; for `/prove` and `/check`
 * the next byte is the `ProofPreimageVersioned` discriminant, 0x01 for V2. Headers below were
 * checked against `@midnight-ntwrk/ledger-v7@7.0.0` (see shared/reference/upstreams.md §1.5).
 *
 * The gateway's binary validator takes its expected tags from gateway.yaml, not from this file;
 * this file serves the stand-in proof server, tests and benches.
 */
import { createHash } from 'node:crypto'

/** Request/response headers per proof-server endpoint (ledger 7.0.0 = proof server 7.0.0). */
export const PROOF_TAGS = {
  prove: {
    path: '/prove',
    request: 'midnight:(proof-preimage-versioned,option(proving-data),option(fr-bls)):',
    response: 'midnight:proof-versioned:',
  },
  check: {
    path: '/check',
    request: 'midnight:(proof-preimage-versioned,option(wrapped-ir)):',
    response: 'midnight:vec(option(u64)):',
  },
  proveTx: {
    path: '/prove-tx',
    request: 'midnight:(transaction[v9](signature[v1],proof-preimage,embedded-fr[v1]),map(string,proving-data)):',
    response: 'midnight:transaction[v9](signature[v1],proof,embedded-fr[v1]):',
  },
  k: {
    path: '/k',
    request: 'midnight:ir-source[v2]:',
    /** `/k` answers a decimal number as text, not a tagged value. */
    response: null,
  },
} as const

export type ProofEndpoint = keyof typeof PROOF_TAGS

/** First body byte after the header for `/prove` and `/check`: the V2 preimage discriminant. */
export const PREIMAGE_V2_DISCRIMINANT = 0x01

/** Characters the upstream keeps when echoing a wrong header; everything else becomes U+FFFD. */
const KEPT_IN_ECHO = /[A-Za-z0-9:_\-()[\],]/u

/**
 * The upstream's error text for a body whose header is not `expected`, or null when it matches.
 * Like the real server it echoes as many bytes as the expected header is long, decoded as lossy
 * UTF-8 with every character outside `[A-Za-z0-9:_-()[],]` replaced by `�`.
 *
 * @example
 * ```ts
 * headerMismatch(Buffer.from('{"a":1}'), PROOF_TAGS.prove.request)
 * // "expected header tag 'midnight:(proof-…):', got '��a�:1�'"
 * ```
 */
export function headerMismatch(body: Buffer, expected: string): string | null {
  const expectedBytes = Buffer.from(expected, 'ascii')
  const prefix = body.subarray(0, expectedBytes.length)
  if (prefix.equals(expectedBytes)) return null
  const decoded = new TextDecoder('utf-8', { fatal: false }).decode(prefix)
  let sanitised = ''
  for (const char of decoded) sanitised += KEPT_IN_ECHO.test(char) ? char : '\uFFFD'
  return `expected header tag '${expected}', got '${sanitised}'`
}

function tagged(header: string, discriminant: number | null, body: Buffer): Buffer {
  const parts: Buffer[] = [Buffer.from(header, 'ascii')]
  if (discriminant !== null) parts.push(Buffer.from([discriminant]))
  parts.push(body)
  return Buffer.concat(parts)
}

/**
 * A `/prove` payload: the request header, the V2 discriminant, then `body`.
 *
 * @example
 * ```ts
 * await fetch(`${proofServer.url}/prove`, { method: 'POST', body: buildProvePayload(Buffer.from('x')) })
 * ```
 */
export function buildProvePayload(body: Buffer): Buffer {
  return tagged(PROOF_TAGS.prove.request, PREIMAGE_V2_DISCRIMINANT, body)
}

/**
 * A `/check` payload: the request header, the V2 discriminant, then `body`.
 *
 * @example
 * ```ts
 * const payload = buildCheckPayload(Buffer.alloc(64))
 * ```
 */
export function buildCheckPayload(body: Buffer): Buffer {
  return tagged(PROOF_TAGS.check.request, PREIMAGE_V2_DISCRIMINANT, body)
}

/**
 * A `/prove-tx` payload: the tuple header, then `body` (tx body and key map; no discriminant).
 *
 * @example
 * ```ts
 * const payload = buildProveTxPayload(Buffer.from('tx-bytes'))
 * ```
 */
export function buildProveTxPayload(body: Buffer): Buffer {
  return tagged(PROOF_TAGS.proveTx.request, null, body)
}

/**
 * A `/k` payload: the ZKIR v2 header, then `body`.
 *
 * @example
 * ```ts
 * const payload = buildKPayload(Buffer.from('ir'))
 * ```
 */
export function buildKPayload(body: Buffer): Buffer {
  return tagged(PROOF_TAGS.k.request, null, body)
}

/** sha256 of `data`; the stand-in derives its fake proofs from it so answers tell inputs apart. */
export function digest(data: Buffer): Buffer {
  return createHash('sha256').update(data).digest()
}
