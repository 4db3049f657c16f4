import t from 'tap';
import { parseUnits } from 'viem';
import { CAIP2, SUPPORTED_NETWORKS } from '../src/chain/canonical.ts';
import { stablecoinArtifact } from '../src/devnet/contracts/artifacts/index.ts';
import { clientsFor, freshAccount, network, tester, testDevnet } from './helpers/devnet.ts';
import { signTransferAuthorization } from './helpers/eip3009.ts';

const manifest = testDevnet();
const abi = stablecoinArtifact.abi;
const now = () => BigInt(Math.floor(Date.now() / 1000));

for (const caip2 of SUPPORTED_NETWORKS) {
  t.test(`EIP-3009 on ${caip2}`, async (t) => {
    const n = network(manifest, caip2);
    const token = n.stablecoin.address;
    const { pub, wallet } = clientsFor(n, tester('eip3009'));
    const payer = freshAccount();
    const payee = freshAccount().address;
    await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: token, abi, functionName: 'mint', args: [payer.address, parseUnits('100', 6)] }) });
    const domain = { name: n.stablecoin.name, version: n.stablecoin.version, chainId: n.chainId, verifyingContract: token };
    t.equal(await pub.readContract({ address: token, abi, functionName: 'name' }), n.stablecoin.name, 'EIP-712 name as the manifest says');
    t.equal(await pub.readContract({ address: token, abi, functionName: 'version' }), n.stablecoin.version);
    t.equal(await pub.readContract({ address: token, abi, functionName: 'decimals' }), 6);
    if (caip2 === CAIP2.base) t.equal(n.stablecoin.name, 'USD Coin');
    if (caip2 === CAIP2.baseSepolia) t.equal(n.stablecoin.name, 'USDC');

    const value = 12_345_678n; // 12.345678
    const signed = await signTransferAuthorization(payer, domain, { to: payee, value, validAfter: 0n, validBefore: now() + 300n });
    const { authorization: a, signature } = signed;
    const args = [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, signature] as const;

    const before = await pub.readContract({ address: token, abi, functionName: 'balanceOf', args: [payer.address] });
    const receipt = await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: token, abi, functionName: 'transferWithAuthorization', args }) });
    t.equal(receipt.status, 'success', 'the signed transfer settles');
    t.equal(await pub.readContract({ address: token, abi, functionName: 'balanceOf', args: [payer.address] }), before - value, 'payer paid exactly the value');
    t.equal(await pub.readContract({ address: token, abi, functionName: 'balanceOf', args: [payee] }), value, 'payee received exactly the value');
    t.equal(await pub.readContract({ address: token, abi, functionName: 'authorizationState', args: [a.from, a.nonce] }), true, 'nonce is marked used');

    await t.rejects(pub.simulateContract({ account: wallet.account, address: token, abi, functionName: 'transferWithAuthorization', args }), /used or canceled/, 'reusing the nonce reverts');

    // Expired by the chain's clock, which is what the token reads (the latest block can lag the wall clock).
    const chainNow = (await pub.getBlock({ blockTag: 'latest' })).timestamp;
    const expired = await signTransferAuthorization(payer, domain, { to: payee, value: 1n, validAfter: 0n, validBefore: chainNow });
    await t.rejects(
      pub.simulateContract({
        account: wallet.account,
        address: token,
        abi,
        functionName: 'transferWithAuthorization',
        args: [payer.address, payee, 1n, 0n, expired.authorization.validBefore, expired.authorization.nonce, expired.signature],
      }),
      /expired/,
      'an expired validBefore reverts',
    );

    const impostor = freshAccount();
    const forged = await signTransferAuthorization(impostor, domain, { from: payer.address, to: payee, value: 1n, validAfter: 0n, validBefore: now() + 300n });
    await t.rejects(
      pub.simulateContract({
        account: wallet.account,
        address: token,
        abi,
        functionName: 'transferWithAuthorization',
        args: [payer.address, payee, 1n, 0n, forged.authorization.validBefore, forged.authorization.nonce, forged.signature],
      }),
      /invalid signature/,
      'a signature by another key reverts',
    );

    const wrongDomain = await signTransferAuthorization(payer, { ...domain, name: `${domain.name} X` }, { to: payee, value: 1n, validAfter: 0n, validBefore: now() + 300n });
    await t.rejects(
      pub.simulateContract({
        account: wallet.account,
        address: token,
        abi,
        functionName: 'transferWithAuthorization',
        args: [payer.address, payee, 1n, 0n, wrongDomain.authorization.validBefore, wrongDomain.authorization.nonce, wrongDomain.signature],
      }),
      /invalid signature/,
      'a wrong EIP-712 domain name reverts',
    );

    const notYet = await signTransferAuthorization(payer, domain, { to: payee, value: 1n, validAfter: now() + 3600n, validBefore: now() + 7200n });
    await t.rejects(
      pub.simulateContract({
        account: wallet.account,
        address: token,
        abi,
        functionName: 'transferWithAuthorization',
        args: [payer.address, payee, 1n, notYet.authorization.validAfter, notYet.authorization.validBefore, notYet.authorization.nonce, notYet.signature],
      }),
      /not yet valid/,
      'a validAfter in the future reverts',
    );

    // The v,r,s overload settles too, and moves nothing else.
    const vrs = await signTransferAuthorization(payer, domain, { to: payee, value: 5n, validAfter: 0n, validBefore: now() + 300n });
    const r = `0x${vrs.signature.slice(2, 66)}` as const;
    const s = `0x${vrs.signature.slice(66, 130)}` as const;
    const v = Number.parseInt(vrs.signature.slice(130, 132), 16);
    const va = vrs.authorization;
    await pub.waitForTransactionReceipt({
      hash: await wallet.writeContract({ address: token, abi, functionName: 'transferWithAuthorization', args: [va.from, va.to, va.value, va.validAfter, va.validBefore, va.nonce, v, r, s] }),
    });
    t.equal(await pub.readContract({ address: token, abi, functionName: 'balanceOf', args: [payee] }), value + 5n, 'the v,r,s overload moves exactly its value');
  });
}
