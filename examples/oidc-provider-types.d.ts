/**
 * The part of `oidc-provider` 9 (which ships no types) that examples/oidc-provider.ts uses.
 */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http'
  interface Account {
    accountId: string
    claims(): Promise<Record<string, unknown>>
  }
  interface Configuration {
    clients?: Record<string, unknown>[]
    cookies?: { keys: string[] }
    claims?: Record<string, string[]>
    findAccount?(ctx: unknown, id: string): Promise<Account | undefined>
  }
  export default class Provider {
    constructor(issuer: string, configuration?: Configuration)
    proxy: boolean
    callback(): (req: IncomingMessage, res: ServerResponse) => void
  }
}
