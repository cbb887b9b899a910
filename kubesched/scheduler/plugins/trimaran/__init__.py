"""Trimaran: scheduler-plugins' load-aware score plugins (TargetLoadPacking, LoadVariationRiskBalancing,
LowRiskOverCommitment) and what they share (the metrics collector, the recently-bound-pods handler,
resource statistics). Where their metrics come from — the plugin args, or the scheduler Handle's
`services.load_watcher` (a live source) and `services.metrics` (a reading or a MetricsFeed) — is the
collector's business (collector.py)."""
