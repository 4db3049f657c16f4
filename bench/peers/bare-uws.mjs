// The floor: a bare uWebSockets.js hello-world on the same machine, for the challenge-rate comparison. It listens on
// a port the kernel gives it and prints `listening on <origin>`.
import { App, us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';

let socket;
App()
  .get('/*', (res) => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end('{"hello":"world"}'))
  .listen('127.0.0.1', 0, (s) => {
    socket = s;
    process.stdout.write(s ? `listening on http://127.0.0.1:${us_socket_local_port(s)}\n` : 'failed\n');
  });
process.on('SIGTERM', () => {
  if (socket) us_listen_socket_close(socket);
  process.exit(0);
});
