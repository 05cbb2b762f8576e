/// Session bookkeeping with the reference PDS's refresh semantics: refresh tokens rotate on
/// every use, and a rotated token presented again within the grace period gets the same
/// successor it got the first time; after that it counts as revoked.
extension AccountData {
    enum RefreshOutcome {
        case rotated(IssuedTokens)
        case reusedWithinGrace(IssuedTokens)
        case revoked
    }

    mutating func startSession(scope: String, issue: () -> IssuedTokens) -> IssuedTokens {
        let session = SessionRecord(id: Encodings.randomToken(), accessScope: scope)
        sessions[session.id] = session
        let tokens = issue()
        record(tokens, session: session.id)
        stats.sessionsCreated += 1
        return tokens
    }

    mutating func refresh(
        refreshJti: String,
        now: Double,
        gracePeriod: Double,
        issue: (_ accessScope: String) -> IssuedTokens
    ) -> RefreshOutcome {
        guard let token = refreshTokens[refreshJti], let session = sessions[token.sessionID], !session.revoked else {
            stats.rejectedRefreshes += 1
            return .revoked
        }
        if let successor = token.successor, let rotatedAt = token.rotatedAt {
            guard now < rotatedAt + gracePeriod else {
                stats.rejectedRefreshes += 1
                return .revoked
            }
            stats.refreshes += 1
            stats.refreshTokenReuses += 1
            return .reusedWithinGrace(successor)
        }
        let successor = issue(session.accessScope)
        refreshTokens[refreshJti]!.successor = successor
        refreshTokens[refreshJti]!.rotatedAt = now
        record(successor, session: session.id)
        stats.refreshes += 1
        return .rotated(successor)
    }

    private mutating func record(_ tokens: IssuedTokens, session: String) {
        refreshTokens[tokens.refreshJti] = RefreshTokenRecord(sessionID: session)
        accessTokens[tokens.accessJti] = session
    }

    /// Whether an access token (already signature- and expiry-checked) still belongs to a live session.
    func accessTokenIsLive(jti: String) -> Bool {
        guard let sessionID = accessTokens[jti], let session = sessions[sessionID] else { return false }
        return !session.revoked
    }

    /// deleteSession: the session of this refresh token ends, with all its tokens.
    mutating func endSession(refreshJti: String) {
        if let sessionID = refreshTokens[refreshJti]?.sessionID, sessions[sessionID]?.revoked == false {
            sessions[sessionID]!.revoked = true
        }
        stats.sessionsDeleted += 1
    }

    mutating func revokeAllSessions() {
        for id in sessions.keys { sessions[id]!.revoked = true }
    }
}
