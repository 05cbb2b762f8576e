"""The Python atproto SDK (from PyPI, unmodified) using blueskyd's XRPC gateway.

No login: the SDK is pointed at the gateway and never holds a token. Prints one JSON object
with what each call returned; exits non-zero on the first failure (its message on stderr).

    gateway_sdk_client.py --socket PATH | --url http://127.0.0.1:PORT | --from-env
                          [--account HANDLE] [--blob-bytes N] [--loop-seconds S]

--from-env: what `bskyctl exec` gives a program, and nothing else: the base URL from
$ATPROTO_PDS_URL (its gateway token in the path), the socket from $BLUESKYD_XRPC_SOCKET when
that URL is http://localhost.
"""
import argparse
import json
import os
import sys
import time

import httpx
from atproto import Client
from atproto_client.request import Request


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket")
    parser.add_argument("--url", default="http://localhost")
    parser.add_argument("--account")
    parser.add_argument("--blob-bytes", type=int, default=0)
    parser.add_argument("--loop-seconds", type=float, default=0)
    parser.add_argument("--from-env", action="store_true")
    args = parser.parse_args()
    if args.from_env:
        args.url = os.environ["ATPROTO_PDS_URL"]
        if args.url.startswith("http://localhost/"):
            args.socket = os.environ["BLUESKYD_XRPC_SOCKET"]

    headers = {"atproto-account": args.account} if args.account else {}
    transport = httpx.HTTPTransport(uds=args.socket) if args.socket else None
    client = Client(base_url=args.url, request=Request(transport=transport, headers=headers, timeout=120))

    result = {}
    session = client.com.atproto.server.get_session()
    result["did"] = session.did
    result["handle"] = session.handle
    profile = client.get_profile(session.did)
    result["profileDid"] = profile.did
    timeline = client.get_timeline(limit=5)
    result["timelinePosts"] = len(timeline.feed)
    post = client.send_post("posted through blueskyd's gateway", profile_identify=session.did)
    result["postUri"] = post.uri
    if args.blob_bytes:
        # A PNG signature, then noise: the PDS sees an image of the asked size.
        data = b"\x89PNG\r\n\x1a\n" + os.urandom(args.blob_bytes - 8)
        blob = client.upload_blob(data)
        result["blobSize"] = blob.blob.size
        result["blobMimeType"] = blob.blob.mime_type
    result["deleted"] = client.delete_post(post.uri)

    # Calls one after another for a while: the account's token may be refreshed meanwhile.
    calls = 0
    deadline = time.monotonic() + args.loop_seconds
    while time.monotonic() < deadline:
        client.get_profile(session.did)
        calls += 1
    result["loopCalls"] = calls
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
