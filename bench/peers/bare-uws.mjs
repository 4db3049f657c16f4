// The floor: a bare uWebSockets.js hello-world on the same machine, for the challenge-rate comparison.
import { App, us_listen_socket_close } from 'uWebSockets.js';

const port = Number(process.argv[2]);
let socket;
App()
  .get('/*', (res) => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end('{"hello":"world"}'))
  .listen('127.0.0.1', port, (s) => {
    socket = s;
    process.stdout.write(s ? 'ready\n' : 'failed\n');
  });
process.on('SIGTERM', () => {
  if (socket) us_listen_socket_close(socket);
  process.exit(0);
});
