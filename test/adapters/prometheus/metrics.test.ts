// The Prometheus adapter of the metrics port on its own: the figures it keeps in plain numbers
// are written as prom-client would write them, and a gauge whose read fails or hangs is left out.
import t from 'tap';
import { GAUGE_READ_TIMEOUT_MS, prometheusMetrics } from '../../../src/adapters/prometheus/metrics.js';

const lines = (text: string, part: string) => text.split('\n').filter((l) => l.startsWith(part));

t.test('when requests are recorded, then the latency histogram is cumulative, a value on a bound counts in its bucket, and counts are by status', async (t) => {
  const m = prometheusMetrics();
  const rec = m.requests('getIncident');
  m.requests('createIncident'); // registered, never called
  for (const s of [0.001, 0.0011, 0.3, 11]) rec(200, s);
  rec(404, 0.002);
  const { text, contentType } = await m.exposition();
  t.equal(contentType, 'text/plain; version=0.0.4; charset=utf-8');
  t.same(lines(text, 'cad_http_requests_total{operation="getIncident"'), [
    'cad_http_requests_total{operation="getIncident",status="200"} 4',
    'cad_http_requests_total{operation="getIncident",status="404"} 1',
  ]);
  const bucket = (le: string) => lines(text, `cad_http_request_duration_seconds_bucket{le="${le}",operation="getIncident"}`)[0]?.split(' ')[1];
  t.equal(bucket('0.001'), '1', 'a value on a bound counts in it');
  t.equal(bucket('0.0025'), '3');
  t.equal(bucket('0.25'), '3');
  t.equal(bucket('0.5'), '4');
  t.equal(bucket('10'), '4', 'over the last bound: only in +Inf');
  t.equal(bucket('+Inf'), '5');
  t.same(lines(text, 'cad_http_request_duration_seconds_count{operation="getIncident"}'), ['cad_http_request_duration_seconds_count{operation="getIncident"} 5']);
  t.match(lines(text, 'cad_http_request_duration_seconds_sum{operation="getIncident"}')[0], /^\S+ 11\.30/);
  t.same(lines(text, 'cad_http_request_duration_seconds_count{operation="createIncident"}'), ['cad_http_request_duration_seconds_count{operation="createIncident"} 0'], 'an operation never called is at 0');
  t.same(lines(text, 'cad_http_requests_total{operation="createIncident"'), [], 'and has no status yet');
});

t.test('when a gauge read hangs, then the scrape answers without it after the timeout and counts a scrape error', async (t) => {
  const m = prometheusMetrics();
  m.gauge('pushesPending', () => new Promise<number>(() => {}));
  m.gauge('socketsOnline', () => ({ device: 2, user: 1 }));
  const started = Date.now();
  const { text } = await m.exposition();
  t.ok(Date.now() - started >= GAUGE_READ_TIMEOUT_MS - 50, 'waited for the timeout');
  t.same(lines(text, 'cad_pushes_pending'), [], 'left out');
  t.same(lines(text, 'cad_sockets_online{'), ['cad_sockets_online{kind="device"} 2', 'cad_sockets_online{kind="user"} 1'], 'the others are there');
  t.same(lines(text, 'cad_database_errors_total{source="scrape"}'), ['cad_database_errors_total{source="scrape"} 1']);
  m.gauge('pushesPending', () => 5);
  t.same(lines((await m.exposition()).text, 'cad_pushes_pending'), ['cad_pushes_pending 5'], 'back once a read succeeds');
});

t.test('when two instances record, then each keeps its own figures (no global registry)', async (t) => {
  const a = prometheusMetrics();
  const b = prometheusMetrics();
  a.pushes('delivered', 3);
  t.same(lines((await a.exposition()).text, 'cad_pushes_total{state="delivered"}'), ['cad_pushes_total{state="delivered"} 3']);
  t.same(lines((await b.exposition()).text, 'cad_pushes_total{state="delivered"}'), ['cad_pushes_total{state="delivered"} 0']);
});
