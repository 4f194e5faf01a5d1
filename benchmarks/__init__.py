"""Benchmarks: KEDA's polling pattern against the scaler and two reference servers."""
