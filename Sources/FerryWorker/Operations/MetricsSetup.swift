import Metrics
import Prometheus
import Synchronization

/// The process's Prometheus registry, installed as swift-metrics' backend the
/// first time it is asked for (swift-metrics allows one bootstrap per process).
public enum WorkerMetrics {
    private static let installed = Mutex<PrometheusCollectorRegistry?>(nil)

    public static func registry() -> PrometheusCollectorRegistry {
        installed.withLock { current in
            if let current { return current }
            let registry = PrometheusCollectorRegistry()
            var factory = PrometheusMetricsFactory(registry: registry)
            factory.defaultDurationHistogramBuckets = [
                .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
                .seconds(5), .seconds(10), .seconds(30), .seconds(60),
            ]
            MetricsSystem.bootstrap(factory)
            current = registry
            return registry
        }
    }
}
