"""Trimaran: scheduler-plugins' load-aware score plugins (TargetLoadPacking, LoadVariationRiskBalancing,
LowRiskOverCommitment) and what they share (the metrics collector, the recently-bound-pods handler,
resource statistics)."""
