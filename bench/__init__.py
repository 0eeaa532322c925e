"""Benchmarks against the real kube-apiserver + etcd from the test harness."""
