import ATSyntax
import Foundation

/// The parts of a DID document atproto uses: the DID, its handle claims and its services.
public struct DIDDocument: Sendable, Codable, Equatable {
    public struct Service: Sendable, Codable, Equatable {
        public var id: String
        public var type: String
        /// The endpoint when it is a string (DID Core also allows maps and sets; atproto does not use them).
        public var serviceEndpoint: String?

        public init(id: String, type: String, serviceEndpoint: String?) {
            self.id = id
            self.type = type
            self.serviceEndpoint = serviceEndpoint
        }

        private enum CodingKeys: String, CodingKey { case id, type, serviceEndpoint }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            // `type` may be a string or a list of strings.
            if let single = try? container.decode(String.self, forKey: .type) {
                type = single
            } else {
                type = (try container.decode([String].self, forKey: .type)).first ?? ""
            }
            serviceEndpoint = try? container.decode(String.self, forKey: .serviceEndpoint)
        }
    }

    public var id: DID
    /// `at://<handle>` claims and other aliases, in document order.
    public var alsoKnownAs: [String]
    public var services: [Service]

    public init(id: DID, alsoKnownAs: [String] = [], services: [Service] = []) {
        self.id = id
        self.alsoKnownAs = alsoKnownAs
        self.services = services
    }

    private enum CodingKeys: String, CodingKey {
        case id, alsoKnownAs
        case services = "service"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(DID.self, forKey: .id)
        alsoKnownAs = try container.decodeIfPresent([String].self, forKey: .alsoKnownAs) ?? []
        services = try container.decodeIfPresent([Service].self, forKey: .services) ?? []
    }

    /// The PDS: the endpoint of the first `#atproto_pds` service of type `AtprotoPersonalDataServer`.
    public var pdsEndpoint: URL? {
        let service = services.first { service in
            (service.id == "#atproto_pds" || service.id == "\(id)#atproto_pds")
                && service.type == "AtprotoPersonalDataServer"
        }
        guard let endpoint = service?.serviceEndpoint, let url = URL(string: endpoint),
              let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http",
              let host = url.host, !host.isEmpty else { return nil }
        return url
    }

    /// The handle the document claims: its first `at://` alias, if that is a valid handle.
    public var handle: Handle? {
        claimedHandles.first
    }

    /// Every valid handle among the `at://` aliases.
    var claimedHandles: [Handle] {
        alsoKnownAs.compactMap { alias in
            guard alias.hasPrefix("at://") else { return nil }
            return Handle(String(alias.dropFirst("at://".count)))
        }
    }
}
