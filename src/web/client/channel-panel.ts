/**
 * The marketplace's channel panel: a payment channel (x402 `batch-settlement`) by its id, as the gateway holds it:
 * its balance, spent, remaining, claimed on chain, and a pending withdrawal (`GET /api/channels/:channelId`).
 */
import { CHANNEL_ID, type ChannelView } from '../../channels/channel-view-type.ts';
import { api } from './api.ts';
import { clearMessage, guarded, showMessage } from './chrome.ts';
import { byId, el, replaceChildren } from './dom.ts';
import { fromAtomic, money, shortHash } from './format.ts';

function amount(view: ChannelView, atomic: string): string {
  if (view.decimals === undefined) return `${atomic} (smallest units of ${shortHash(view.token)})`;
  return `${money(fromAtomic(BigInt(atomic), view.decimals))} ${view.symbol ?? ''}`.trim();
}

function rows(view: ChannelView): HTMLElement[] {
  const row = (term: string, value: string, field: string) => el('div', {}, el('dt', { text: term }), el('dd', { text: value, attrs: { 'data-field': field } }));
  const out = [
    row('Balance (deposits less refunds)', amount(view, view.balance), 'balance'),
    row('Spent', amount(view, view.spent), 'spent'),
    row('Remaining', amount(view, view.remaining), 'remaining'),
    row('Claimed by the merchant so far', amount(view, view.claimed), 'claimed'),
    row('Network', view.network, 'network'),
    row('Payer', view.payer, 'payer'),
  ];
  if (view.withdrawal) out.push(row('Withdrawal can be finalized', new Date(view.withdrawal.finalizableAt * 1000).toISOString(), 'withdrawal'));
  return out;
}

export function mountChannelPanel(): void {
  const ui = {
    form: byId<HTMLFormElement>('channel-form'),
    id: byId<HTMLInputElement>('channel-id'),
    show: byId<HTMLButtonElement>('channel-show'),
    message: byId('channel-message'),
    view: byId('channel-view'),
  };
  ui.form.addEventListener('submit', (e) => {
    e.preventDefault();
    const id = ui.id.value.trim();
    ui.view.hidden = true;
    clearMessage(ui.message);
    if (!CHANNEL_ID.test(id)) {
      showMessage(ui.message, 'error', 'A channel id is 0x followed by 64 hexadecimal digits.');
      return;
    }
    void guarded(ui.show, ui.message, async () => {
      const answer = await api<{ channel: ChannelView }>(`/api/channels/${id}`);
      replaceChildren(ui.view, ...rows(answer.body.channel));
      ui.view.hidden = false;
    });
  });
}
