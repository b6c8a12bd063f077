"""The pool model and the scaler's settings: a pool (`pool`, `specs`), the instance catalogue
(`catalogue`), GPU sharing (`sharing`), the settings every component reads (`settings`: pools,
limits, timings, scale-down), and pools read back from a cloud's tags (`adopt`)."""
