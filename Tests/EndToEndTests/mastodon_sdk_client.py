"""Mastodon.py (PyPI), unmodified, pointed at blueskyd's gateway by `bskyctl exec` alone:
BLUESKYD_HTTP_URL is its API base URL. It holds no token of the account: the one it is given
is a placeholder blueskyd drops. Prints what it read and posted, as JSON.

    mastodon_sdk_client.py TEXT
"""
import json
import os
import sys

from mastodon import Mastodon

api = Mastodon(access_token="placeholder-blueskyd-adds-the-real-one", api_base_url=os.environ["BLUESKYD_HTTP_URL"],
               ratelimit_method="throw", request_timeout=30)
me = api.account_verify_credentials()
posted = api.status_post(sys.argv[1])
print(json.dumps({"username": me["username"], "displayName": me["display_name"], "statusID": str(posted["id"])}))
