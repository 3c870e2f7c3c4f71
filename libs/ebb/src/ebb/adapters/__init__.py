"""Runtime adapters: Kafka, PostgreSQL, Kubernetes, AWS, settings, logging, metrics."""
