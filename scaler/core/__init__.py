"""The pure core: data, predicates, planners and state. No I/O, no adapters (import-linter enforces it)."""
