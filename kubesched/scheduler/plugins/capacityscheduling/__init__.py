"""CapacityScheduling: elastic quotas per namespace with borrowing and reclaiming (scheduler-plugins pkg/capacityscheduling)."""
