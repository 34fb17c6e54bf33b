"""Predictions made before (and beside) a simulation (issue 12): the fairness of an allocation
and the allocations that fairness criteria and protocols' utilities predict
(`pathflow.analysis.fairness`), and where a network settles (`pathflow.analysis.equilibrium`)."""
