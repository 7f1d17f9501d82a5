import EgressProxy

extension SectionParser {
    /// `proxy` or `proxy_file` of an `apns`-shaped block: a proxy URL, `none`, or (absent or empty) the environment's
    /// `HTTPS_PROXY` with `NO_PROXY` (docs/configuration.md, "`apns.proxy`"). The URL may hold a password, so no
    /// problem quotes it (`proxy` is a secret key); a problem says what is wrong and how to write it.
    func proxy(in mapping: ConfigMapping) -> EgressProxyPolicy? {
        let value: ConfigValue
        let text: String?
        let what: String
        switch (mapping["proxy"], mapping["proxy_file"]) {
        case (nil, nil):
            return self.environmentProxy(at: mapping)
        case (let given?, nil):
            (value, text, what) = (given, given.optionalString(), "the proxy URL")
        case (nil, let file?):
            guard let path = file.nonEmptyString(), let contents = self.secret(fromFile: path, at: file) else {
                return nil
            }
            (value, text, what) = (file, contents, "the proxy URL in \(path.trimmingWhitespace())")
        case (_, let file?):
            file.report(.invalidValue, "give either proxy or proxy_file, not both")
            return nil
        }
        guard let text = text?.trimmingWhitespace(), !text.isEmpty else {
            // Empty (`${PROXY:-}`, or a file not read by `render`): as if not given.
            return self.environmentProxy(at: mapping)
        }
        if text.lowercased() == "none" {
            return .direct
        }
        do {
            return .configured(try EgressProxy(url: text))
        } catch {
            value.report(.invalidValue, "\(what) \(error.problem)", hint: error.fix + ", or none to connect directly")
            return nil
        }
    }

    /// The environment's proxy for a block without `proxy`; a problem with it is reported once, at the first such
    /// block's `proxy`, where setting `proxy` is one way out.
    private func environmentProxy(at mapping: ConfigMapping) -> EgressProxyPolicy? {
        switch self.reader.environmentProxy {
        case .success(let policy):
            return policy
        case .failure(let error):
            guard !self.reader.reportedEnvironmentProxy else { return nil }
            self.reader.reportedEnvironmentProxy = true
            let path = mapping.owner.path.isEmpty ? "proxy" : "\(mapping.owner.path).proxy"
            self.reader.report(
                .invalidValue, at: path, line: mapping.owner.line, "\(error)",
                hint: "\(ProxyURLError.form) in \(error.variable), or set proxy here (a URL, or none to connect "
                    + "directly)")
            return nil
        }
    }
}
