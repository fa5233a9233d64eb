"""A relay client's proof that it holds the private key of the identity it claims.

The relay sends a fresh random challenge; the client signs `relaywire.auth_message`
of it and its key with its Ed25519 identity key, and the relay checks that
signature before it lets the connection send or receive anything. This is the
relay's only use of cryptography, so it lives here: the relay calls
`verify_key_proof` and never imports a crypto library itself.
"""

from __future__ import annotations

from nacl.exceptions import CryptoError
from nacl.signing import SigningKey, VerifyKey

from .relaywire import KEY_BYTES, SIGNATURE_BYTES, auth_message


def sign_key_proof(identity: SigningKey, challenge: bytes) -> bytes:
    """The signature that proves ``identity`` to a relay that sent ``challenge``."""
    key = bytes(identity.verify_key)
    signature: bytes = identity.sign(auth_message(challenge, key)).signature
    return signature


def verify_key_proof(public_key: bytes, challenge: bytes, signature: bytes) -> bool:
    """Whether ``signature`` proves the holder of ``public_key`` answered ``challenge``.

    False, never an exception, for anything that is not such a proof: a key of
    the wrong size or not a valid Ed25519 point, a signature of the wrong size,
    a signature by another key or over another challenge."""
    if len(public_key) != KEY_BYTES or len(signature) != SIGNATURE_BYTES:
        return False
    try:
        VerifyKey(public_key).verify(auth_message(challenge, public_key), signature)
    except (CryptoError, ValueError, TypeError):  # nacl raises these for a bad key or signature
        return False
    return True


__all__ = ["sign_key_proof", "verify_key_proof"]
