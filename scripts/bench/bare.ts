// The bare baseline: one fastify route echoing the same JSON, nothing else.
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.post('/echo', async (req) => req.body);
app.get('/echo', async () => ({ ok: true }));
await app.listen({ port: 0, host: '127.0.0.1' });
const addr = app.server.address();
process.stdout.write(`LISTENING ${typeof addr === 'object' && addr ? addr.port : 0}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
