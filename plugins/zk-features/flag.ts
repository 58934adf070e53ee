/**
 * Strict parsing of the boolean request flags (`sponsored`, `tee_enabled`). Only the four
 * spellings below are accepted, exactly as written: a typo such as `yes` or `True` is a 400, not a
 * silent "off", because a client that asked for a paid feature must learn it was not applied.
 */
const VALUES: Readonly<Record<string, boolean>> = { true: true, '1': true, false: false, '0': false }

/** The accepted spellings, for messages and docs. */
export const FLAG_SPELLINGS = 'true, false, 1 or 0'

/**
 * `true`/`1` → true, `false`/`0` → false, absent → undefined, anything else → null.
 *
 * @example
 * ```ts
 * parseFlag('1')      // true
 * parseFlag('TRUE')   // null (refused)
 * parseFlag(undefined) // undefined
 * ```
 */
export function parseFlag(raw: string | undefined): boolean | undefined | null {
  if (raw === undefined) return undefined
  return Object.hasOwn(VALUES, raw) ? VALUES[raw] : null
}
