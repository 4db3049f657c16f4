import type { Dispatcher } from 'undici';

/**
 * Stops reading an undici response body and drops the rest. Destroying a body not read to its end makes it emit an
 * abort error; without a listener that error is thrown from the event loop and stops the process, so an outgoing
 * call's answer that is refused unread (a status or a declared length we do not take) goes through here.
 */
export function discardBody(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => {});
  body.destroy();
}
