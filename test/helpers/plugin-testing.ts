/**
 * `tollgate/testing`: what a plugin author's test needs to drive a real gateway, the way the
 * project tests its own plugins: a gateway process on 127.0.0.1 port 0 and a stand-in upstream.
 */
export { startGatewayProcess, type GatewayProcess } from './gateway-process.ts'
export { startTestUpstream, type TestUpstream, type Received } from './upstream.ts'
