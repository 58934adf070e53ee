/** Bounded JSON nesting (core/proxy/json.ts): depth counted outside strings, refused before parsing. */
import t from 'tap'
import { jsonDepthExceeds, MAX_JSON_DEPTH, parseBoundedJson, JsonTextError } from '../../../core/proxy/json.ts'

const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth)

t.test('depth is counted over arrays and objects, not inside strings', async (t) => {
  t.equal(jsonDepthExceeds(nested(MAX_JSON_DEPTH)), false, 'exactly the limit is accepted')
  t.equal(jsonDepthExceeds(nested(MAX_JSON_DEPTH + 1)), true, 'one past it is refused')
  t.equal(jsonDepthExceeds(Buffer.from(nested(MAX_JSON_DEPTH + 1))), true, 'bytes are measured the same')
  t.equal(jsonDepthExceeds('{"a":{"b":[1]}}', 2), true)
  t.equal(jsonDepthExceeds(JSON.stringify({ s: '['.repeat(500) }), 2), false, 'brackets inside a string do not count')
  t.equal(jsonDepthExceeds(JSON.stringify({ s: '\\"[[[[[[' }), 2), false, 'an escaped quote does not end the string')
  t.equal(jsonDepthExceeds(JSON.stringify(Array.from({ length: 1000 }, () => [[1]]))), false, 'siblings do not add up')
  t.equal(jsonDepthExceeds(Buffer.from(JSON.stringify({ é: ['ü[', { x: '漢[[' }] }), 'utf8'), 3), false, 'multi-byte text is skipped whole')
})

t.test('parseBoundedJson refuses deep text before JSON.stringify could overflow on it', async (t) => {
  const deep = nested(5000)
  t.doesNotThrow(() => JSON.parse(deep), 'V8 parses it')
  t.throws(() => JSON.stringify(JSON.parse(deep)), RangeError, 'but cannot serialise it again')
  const thrown = (text: string) => {
    try {
      parseBoundedJson(text)
    } catch (error) {
      return error
    }
  }
  const deepError = thrown(deep)
  t.ok(deepError instanceof JsonTextError && deepError.tooDeep, 'refused as too deep')
  t.match((deepError as Error).message, /more than 64 levels deep/)
  const syntax = thrown('{"a":')
  t.ok(syntax instanceof JsonTextError && !syntax.tooDeep, 'invalid JSON is told apart')
  t.same(parseBoundedJson(Buffer.from('{"a":[1,{"b":null}]}')), { a: [1, { b: null }] })
})
