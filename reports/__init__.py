"""Report writers. Outputs go to a per-run folder under slo-runs/ (not tracked)."""
