/**
 * The options of the commands whose code is heavy (`usage`, `user ...`, `receipt ...`), apart from
 * that code: cli.ts parses, checks and answers `--help` from these alone, and imports a command's
 * module only when it runs (a static import of those modules loaded the store, the config loader and
 * the receipt crypto for `--help`: ~1 s of CPU per start).
 */
import { CONFIG_OPTION, type CommandSpec } from './cli-args.ts'

export const USAGE_SPEC: CommandSpec = {
  name: 'usage',
  summary: 'Print per-project usage as a table (through the admin API when the gateway runs).',
  options: {
    config: CONFIG_OPTION,
    project: { type: 'string', value: 'ID', description: 'only this project' },
    from: { type: 'string', value: 'ISO', description: 'start of the range (default: 30 days before --to)' },
    to: { type: 'string', value: 'ISO', description: 'end of the range (default: now)' },
    granularity: { type: 'string', value: 'hour|day', description: 'bucket size (default: day)' },
    admin: { type: 'string', value: 'URL', description: "the running gateway's admin listener (default: the configured one)" },
    token: { type: 'string', value: 'T', description: 'admin token (default: $TOLLGATE_ADMIN_TOKEN)' },
  },
  notes: 'Without a reachable admin API and a token, the store is read directly (stop the gateway first for the sqlite engine).',
}

export const PASSWORD_NOTE = `The password is asked on the terminal (no echo, twice), or read from the first line of stdin
when stdin is not a terminal, e.g.  printf '%s\\n' "$PASSWORD" | npx tollgate user add ...
It is never an argument: ps and the shell history would show it.`

/** Refused on purpose: named, so that the answer is "read from stdin" rather than "unknown option". */
const PASSWORD_OPTION = { type: 'string', value: 'P', description: 'refused: pass the password on stdin or at the prompt (see below)' } as const

export const USER_SPECS = {
  add: {
    name: 'user add',
    summary: 'Create an admin account (operator: everything; owner: the projects named by --project).',
    options: {
      config: CONFIG_OPTION,
      email: { type: 'string', value: 'E', description: 'sign-in address of the account' },
      role: { type: 'string', value: 'operator|owner', description: 'what the account may do' },
      project: { type: 'string', value: 'ID', multiple: true, description: 'a project an owner owns' },
      password: PASSWORD_OPTION,
    },
    notes: PASSWORD_NOTE,
  },
  passwd: {
    name: 'user passwd',
    summary: "Change an account's password (signs its sessions out).",
    options: { config: CONFIG_OPTION, email: { type: 'string', value: 'E', description: 'sign-in address of the account' }, password: PASSWORD_OPTION },
    notes: PASSWORD_NOTE,
  },
  list: { name: 'user list', summary: 'List accounts, roles and owned projects.', options: { config: CONFIG_OPTION } },
} satisfies Record<string, CommandSpec>

export const RECEIPT_SPECS = {
  verify: {
    name: 'receipt verify',
    positionals: ['RECEIPT'],
    summary: 'Verify a signed receipt offline (the x-receipt header value, the PAYMENT-RESPONSE receipt signature, or a file holding it; - for stdin).',
    options: {
      keys: { type: 'string', value: 'FILE|URL', description: "the gateway's key set (JWKS, as served at /.well-known/tollgate-receipt-keys.json) or one JWK" },
      json: { type: 'boolean', description: 'print {valid, kid, payload} or {valid, reason} as JSON' },
    },
    notes: 'Exit 0 when the signature is valid, 1 when it is not.',
  },
  'public-key': {
    name: 'receipt public-key',
    summary: 'Print the public key set (JWKS) of the signing key in an environment variable; the private key is never printed.',
    options: {
      env: { type: 'string', value: 'NAME', description: 'environment variable holding the key (default: TOLLGATE_RECEIPT_KEY)' },
      kid: { type: 'string', value: 'KID', description: 'key id, as the receipt plugin config says (default: tollgate-receipt-1)' },
    },
  },
} satisfies Record<string, CommandSpec>
