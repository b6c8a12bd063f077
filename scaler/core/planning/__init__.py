"""The planners and their state: what a pass observes (`snapshot`), decides (`decisions`) and keeps
(`state`, folded forward by `advance`); `planner.plan` is the one decision, built from the scale-up
planner (`scaleup`, `expander`, `packing`, `constrained`, `queue_order`, `capacity`), the scale-down
planner (`scaledown`), interruption notices (`interruptions`) and ProvisioningRequests (`provreq`,
whose `serve` wraps `plan` for a pass)."""
