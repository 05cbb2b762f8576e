"""An OAuth 2.0 authorization server built with Authlib (PyPI), nobody here wrote its rules:
authorization code with PKCE S256 (required), public client `blueskyd`, rotating refresh
tokens, RFC 7009 revocation, RFC 8414 metadata. Approves at once for one user.

    authlib_server.py REDIRECT_URI
Prints `port <N>` once listening on 127.0.0.1 (plain http: loopback only).
"""
import os
import secrets
import sys
import time

os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"  # http on loopback, for the test only

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from flask import Flask, jsonify, request
from werkzeug.serving import make_server

REDIRECT_URI = sys.argv[1]
USER = {"id": "user-1", "name": "Erin"}
CODES, TOKENS = {}, {}


class Client:
    client_id = "blueskyd"

    def get_client_id(self): return self.client_id
    def get_default_redirect_uri(self): return REDIRECT_URI
    def get_allowed_scope(self, scope): return " ".join(s for s in (scope or "").split() if s in ("profile", "read", "offline_access"))
    def check_redirect_uri(self, uri): return uri == REDIRECT_URI
    def check_client_secret(self, secret): return False
    def check_endpoint_auth_method(self, method, endpoint): return method == "none"
    def check_response_type(self, response_type): return response_type == "code"
    def check_grant_type(self, grant_type): return grant_type in ("authorization_code", "refresh_token")


class Code:
    def __init__(self, **fields): self.__dict__.update(fields)
    def get_redirect_uri(self): return self.redirect_uri
    def get_scope(self): return self.scope
    def get_nonce(self): return None
    def get_auth_time(self): return None


class Token:
    def __init__(self, fields, client_id):
        self.__dict__.update(fields)
        self.client_id, self.revoked, self.issued_at = client_id, False, time.time()
    def check_client(self, client): return client.client_id == self.client_id
    def get_scope(self): return self.scope
    def get_expires_in(self): return self.expires_in
    def is_revoked(self): return self.revoked
    def is_expired(self): return time.time() > self.issued_at + self.expires_in


CLIENT = Client()
app = Flask(__name__)
# Authlib issues no refresh token unless told to; an hour's access tokens.
app.config["OAUTH2_REFRESH_TOKEN_GENERATOR"] = True
app.config["OAUTH2_TOKEN_EXPIRES_IN"] = {"authorization_code": 3600, "refresh_token": 3600}


def save_token(token, request):
    record = Token(token, request.client.client_id)
    TOKENS[token["access_token"]] = record
    if "refresh_token" in token:
        TOKENS[token["refresh_token"]] = record


server = AuthorizationServer(app, query_client=lambda client_id: CLIENT if client_id == CLIENT.client_id else None,
                             save_token=save_token)


class AuthorizationCodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]

    def save_authorization_code(self, code, request):
        CODES[code] = Code(code=code, client_id=request.client.client_id, redirect_uri=request.redirect_uri,
                           scope=request.scope, user=USER, code_challenge=request.data.get("code_challenge"),
                           code_challenge_method=request.data.get("code_challenge_method"))

    def query_authorization_code(self, code, client):
        found = CODES.get(code)
        return found if found and found.client_id == client.client_id else None

    def delete_authorization_code(self, authorization_code):
        CODES.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code):
        return authorization_code.user


class RefreshTokenGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token):
        token = TOKENS.get(refresh_token)
        return token if token and not token.revoked and token.refresh_token == refresh_token else None

    def authenticate_user(self, credential):
        return USER

    def revoke_old_credential(self, credential):
        credential.revoked = True


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = ["none"]

    def query_token(self, token_string, token_type_hint):
        return TOKENS.get(token_string)

    def revoke_token(self, token, request):
        token.revoked = True


server.register_grant(AuthorizationCodeGrant, [CodeChallenge(required=True)])
server.register_grant(RefreshTokenGrant)
server.register_endpoint(Revocation)


@app.route("/.well-known/oauth-authorization-server")
def metadata():
    base = request.host_url.rstrip("/")
    return jsonify(issuer=base, authorization_endpoint=base + "/authorize", token_endpoint=base + "/token",
                   revocation_endpoint=base + "/revoke", userinfo_endpoint=base + "/userinfo",
                   response_types_supported=["code"], grant_types_supported=["authorization_code", "refresh_token"],
                   code_challenge_methods_supported=["S256"], token_endpoint_auth_methods_supported=["none"])


@app.route("/authorize")
def authorize():
    return server.create_authorization_response(grant_user=USER)


@app.route("/token", methods=["POST"])
def token():
    return server.create_token_response()


@app.route("/revoke", methods=["POST"])
def revoke():
    return server.create_endpoint_response(RevocationEndpoint.ENDPOINT_NAME)


@app.route("/userinfo")
def userinfo():
    bearer = request.headers.get("Authorization", "")[7:]
    token = TOKENS.get(bearer)
    if not token or token.revoked or token.access_token != bearer or token.is_expired():
        return jsonify(error="invalid_token"), 401
    return jsonify(sub=USER["id"], name=USER["name"])


if __name__ == "__main__":
    listener = make_server("127.0.0.1", 0, app)
    print(f"port {listener.server_port}", flush=True)
    listener.serve_forever()
