import { exactPermit2ProxyArtifact, permit2Artifact } from '../../devnet/contracts/artifacts/index.ts';

/**
 * The proxy's ABI plus the errors of Permit2, which bubble up through `settle` unchanged: with it a revert of a
 * Permit2 settlement decodes by name (InvalidNonce, SignatureExpired, InvalidSigner, ...).
 */
export const exactPermit2ProxySettleAbi = [
  ...exactPermit2ProxyArtifact.abi,
  ...permit2Artifact.abi.filter((item) => item.type === 'error'),
] as const;
