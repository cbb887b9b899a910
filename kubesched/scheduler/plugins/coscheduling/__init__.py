"""Coscheduling: gang scheduling with PodGroup objects (scheduler-plugins pkg/coscheduling)."""
