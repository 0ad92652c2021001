// The bare baseline of the reconnect storm: a `ws` server that accepts every socket and sends
// it the same frames at once (BENCH_FRAMES, a JSON array of strings), nothing else: no
// authentication, no database, acks ignored. Same listen backlog as the service (Node's
// default, 511) and the same maxPayload.
import { WebSocketServer } from 'ws';

const frames = JSON.parse(process.env.BENCH_FRAMES ?? '[]') as string[];
const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', maxPayload: 64 * 1024, perMessageDeflate: false });
wss.on('connection', (ws) => {
  ws.on('error', () => {});
  for (const f of frames) ws.send(f);
});
wss.on('listening', () => {
  const addr = wss.address();
  process.stdout.write(`LISTENING ${typeof addr === 'object' && addr ? addr.port : 0}\n`);
});
process.on('SIGTERM', () => wss.close(() => process.exit(0)));
