/**
 * The `upstreams` and `routes` sections most metered-route tests share: one echo upstream and a
 * key-in-path, credit-metered RPC route `/rpc/:apiKey/*rest`, as gateway.yaml text to append after
 * a test's own `projects`.
 *
 * @example
 * const yaml = `version: 1\n...projects:\n  - id: p\n...\n` + meteredRpcYaml({ upstreamUrl: up.url, cost: 2 })
 */
export function meteredRpcYaml(options: { upstreamUrl: string; cost: number; routeName?: string; connections?: number }): string {
  const connections = options.connections === undefined ? '' : `, connections: ${options.connections}`
  return `upstreams:
  echo: { url: '${options.upstreamUrl}'${connections} }
routes:
  - name: ${options.routeName ?? 'rpc'}
    path: /rpc/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: ${options.cost} } }
`
}
