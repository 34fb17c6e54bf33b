"""Predictions made before (and beside) a simulation (issue 12): the fairness of an allocation
and the allocations that fairness criteria and protocols' utilities predict
(`pathflow.analysis.fairness`), where a network settles (`pathflow.analysis.equilibrium`, with
the single-bottleneck closed forms in `pathflow.analysis.closed_forms`), whether it stays there
(`pathflow.analysis.stability`), and both in a few numbers (`pathflow.analysis.predict`)."""
