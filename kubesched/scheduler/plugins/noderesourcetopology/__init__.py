"""NodeResourceTopologyMatch: NUMA-aware Filter and Score from NodeResourceTopology objects
(scheduler-plugins pkg/noderesourcetopology)."""
