#!/usr/bin/env python3
"""Independent check of a blueskyd DPoP proof with joserfc (not our Swift code).

Usage: verify_dpop_proof.py PROOF HTM HTU [--access-token TOKEN | --no-ath] [--nonce NONCE]
Prints the key's RFC 7638 thumbprint on success; exits 1 with the reason otherwise.
"""
import argparse
import base64
import hashlib
import json
import sys

from joserfc import jws
from joserfc.jwk import ECKey


def b64url_decode(segment: str) -> bytes:
    if "=" in segment:
        raise ValueError("padding in a JWS segment")
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def fail(reason: str) -> None:
    print(reason)
    sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("proof")
    parser.add_argument("htm")
    parser.add_argument("htu")
    parser.add_argument("--access-token")
    parser.add_argument("--no-ath", action="store_true")
    parser.add_argument("--nonce")
    args = parser.parse_args()

    header = json.loads(b64url_decode(args.proof.split(".")[0]))
    if set(header) != {"typ", "alg", "jwk"}:
        fail(f"header members {sorted(header)}")
    if header["typ"] != "dpop+jwt" or header["alg"] != "ES256":
        fail(f"typ/alg {header['typ']}/{header['alg']}")
    if set(header["jwk"]) != {"kty", "crv", "x", "y"}:
        fail(f"jwk members {sorted(header['jwk'])}")
    key = ECKey.import_key(header["jwk"])
    try:
        token = jws.deserialize_compact(args.proof, key, algorithms=["ES256"])
    except Exception as error:  # joserfc raises BadSignatureError and friends
        fail(f"signature: {type(error).__name__}")
    claims = json.loads(token.payload)
    if claims.get("htm") != args.htm:
        fail(f"htm {claims.get('htm')}")
    if claims.get("htu") != args.htu:
        fail(f"htu {claims.get('htu')}")
    if not isinstance(claims.get("iat"), int):
        fail("iat is not an integer")
    jti = claims.get("jti")
    if not isinstance(jti, str) or len(b64url_decode(jti)) * 8 < 96:
        fail("jti missing or shorter than 96 bits")
    if args.nonce is not None and claims.get("nonce") != args.nonce:
        fail(f"nonce {claims.get('nonce')}")
    if args.access_token is not None:
        digest = hashlib.sha256(args.access_token.encode("ascii")).digest()
        expected = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        if claims.get("ath") != expected:
            fail(f"ath {claims.get('ath')}, expected {expected}")
    if args.no_ath and "ath" in claims:
        fail("ath present on an authorization server proof")
    print(key.thumbprint())


if __name__ == "__main__":
    main()
