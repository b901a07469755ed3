import FerryTriggers

/// The one place where trigger handlers are registered. Ferry calls this at
/// start-up; a registration that cannot work stops start-up with its reason.
/// See triggers/README.md for how to add a handler.
public enum Registrations {
    /// The key-prefix resolver the worker uses: return `configured` (set by the
    /// `--prefix-*` flags, Amplify's layout by default) or your own
    /// `PrefixResolver`, which may also refuse requests (Amplify's client-side
    /// validation, enforced server-side).
    public static func prefixResolver(configured: any PrefixResolver) -> any PrefixResolver {
        configured
    }

    public static func register(into registry: inout TriggerRegistry, environment: TriggerEnvironment) throws {
        try registry.register(S3TriggerRegistration(
            name: "audit-log",
            events: ["ObjectCreated:*", "ObjectRemoved:*"],
            delivery: AsyncDelivery(maximumRetryAttempts: 2),
            handler: AuditLogHandler(file: environment.dataRoot.appendingPathComponent("audit/audit.jsonl"))
        ))
    }
}
