import { execFileSync } from 'node:child_process'
import t from 'tap'
import { Counter, Registry } from 'prom-client'
import { SeriesCounter, SeriesHistogram } from '../../../core/proxy/series-metrics.ts'

function setup() {
  const registry = new Registry()
  const requests = new SeriesCounter({ name: 'demo_requests_total', help: 'Requests.', labelNames: ['route', 'status_class'], registers: [registry] })
  const duration = new SeriesHistogram({ name: 'demo_duration_seconds', help: 'Time.', labelNames: ['route'], buckets: [0.1, 0.01, 1], registers: [registry] })
  return { registry, requests, duration }
}

t.test('a counter series is exposed with its labels and the count of its increments', async (t) => {
  const { registry, requests } = setup()
  const ok = requests.series(['echo', '2xx'])
  ok.inc()
  ok.inc()
  requests.series(['echo', '5xx']).inc(3)
  t.equal(requests.series(['echo', '2xx']), ok, 'one series per label set')
  const text = await registry.metrics()
  t.match(text, '# TYPE demo_requests_total counter')
  t.match(text, 'demo_requests_total{route="echo",status_class="2xx"} 2')
  t.match(text, 'demo_requests_total{route="echo",status_class="5xx"} 3')
})

t.test('histogram buckets are cumulative, sorted, end in +Inf, with sum and count', async (t) => {
  const { registry, duration } = setup()
  const echo = duration.series(['echo'])
  for (const seconds of [0.005, 0.01, 0.05, 0.5, 2]) echo.observe(seconds)
  echo.observe(Number.NaN)
  const text = await registry.metrics()
  t.match(text, '# TYPE demo_duration_seconds histogram')
  t.match(text, 'demo_duration_seconds_bucket{route="echo",le="0.01"} 2', 'a value equal to a bound is in that bucket')
  t.match(text, 'demo_duration_seconds_bucket{route="echo",le="0.1"} 3')
  t.match(text, 'demo_duration_seconds_bucket{route="echo",le="1"} 4')
  t.match(text, 'demo_duration_seconds_bucket{route="echo",le="+Inf"} 5')
  t.match(text, 'demo_duration_seconds_count{route="echo"} 5', 'NaN is not counted')
  t.match(text, /demo_duration_seconds_sum\{route="echo"\} 2\.565/)
})

t.test('reset zeroes every series; a wrong label count is refused', async (t) => {
  const { registry, requests, duration } = setup()
  requests.series(['a', '2xx']).inc()
  duration.series(['a']).observe(0.2)
  registry.resetMetrics()
  const text = await registry.metrics()
  t.match(text, 'demo_requests_total{route="a",status_class="2xx"} 0')
  t.match(text, 'demo_duration_seconds_count{route="a"} 0')
  t.throws(() => requests.series(['only-one']), /expected 2 label values, got 1/)
})

t.test('the text passes promtool next to prom-client metrics of the same registry', async (t) => {
  const { registry, requests, duration } = setup()
  const plain = new Counter({ name: 'demo_plain_total', help: 'Kept by prom-client.', registers: [registry] })
  plain.inc()
  requests.series(['echo', '2xx']).inc()
  duration.series(['echo']).observe(0.02)
  duration.series(['other']).observe(3)
  const text = await registry.metrics()
  try {
    execFileSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' })
  } catch (error: any) {
    if (error.code === 'ENOENT') return void t.comment('SKIP promtool not installed (apt-get install prometheus)')
    t.fail(`promtool rejected the metrics: ${error.stdout}${error.stderr}\n${text}`)
  }
  t.pass('promtool accepts the text')
})
