/**
 * `binary-validator`: refuses a proof-server payload that the server would refuse anyway, before
 * it reaches the upstream: Content-Type `application/octet-stream` (415 otherwise, raised by the
 * core's body reader), size within the route's `maxBodyBytes` (413, counted while streaming by
 * the core), then the tagged header of the endpoint (see tagged-header.ts). The expected tags are
 * config, so a ledger upgrade is a gateway.yaml change, not a release.
 *
 * ```yaml
 * plugins:
 *   - name: binary-validator
 *     config:
 *       tags: ['(proof-preimage-versioned,option(wrapped-ir))']
 *       discriminant: { value: 1, type: ProofPreimageVersioned }
 * ```
 */
import type { PluginDefinition } from '../../core/proxy/plugin-api.ts'
import { GatewayError } from '../../core/proxy/plugin-api.ts'
import { compileTaggedCheck, taggedPayloadSchema, type TaggedPayloadSpec } from './tagged-header.ts'

const binaryValidator: PluginDefinition<TaggedPayloadSpec> = {
  name: 'binary-validator',
  version: '1.0.0',
  priority: 800,
  configSchema: taggedPayloadSchema,
  needs: () => ({ body: 'raw', contentTypes: ['application/octet-stream'] }),
  create(config) {
    const check = compileTaggedCheck(config)
    return {
      body(ctx) {
        const problem = check(ctx.body!.raw)
        if (problem) throw new GatewayError(400, problem.code, problem.message)
      },
    }
  },
}

export default binaryValidator
