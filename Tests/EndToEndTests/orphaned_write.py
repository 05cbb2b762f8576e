"""Another user's writes to the loopback gateway, each connection closed as soon as it is sent.

Its socket then lingers in the kernel's table held by no process (inode 0, shown as uid 0) while
the gateway looks for its owner: what once passed for the root user's. argv: port did count."""
import json
import socket
import sys

port, did, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(count):
    body = json.dumps({"repo": did, "collection": "app.bsky.feed.post",
                       "record": {"$type": "app.bsky.feed.post", "text": "orphan %d" % i,
                                  "createdAt": "2026-11-27T00:00:00Z"}}).encode()
    head = ("POST /xrpc/com.atproto.repo.createRecord HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (port, len(body))).encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            connection.sendall(head + body)
    except OSError:
        pass
print("sent", count)
