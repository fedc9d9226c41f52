"""virtbench's test Kubernetes node, behind tools/start-kubernetes (standard library only)."""
